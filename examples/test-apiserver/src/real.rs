//! The real-server lane: a client for the cluster named by `MIGRATE_TEST_KUBECONFIG`.
//!
//! Every test that runs against a real API server gets its client here, so that all of them
//! skip (with a printed line) or run on the same terms. `examples/kube-testenv/testenv.sh start`
//! provides such a cluster: etcd and kube-apiserver on loopback, RBAC on, no nodes, no
//! controller-manager; `.ci/run` exports the variables below from it.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `MIGRATE_TEST_KUBECONFIG` | kubeconfig of the cluster; real-server tests are `#[ignore]`d and fail when run without it |
//! | `MIGRATE_TEST_NAMESPACE` | namespace for namespaced test objects (default `default`) |
//! | `MIGRATE_TEST_KUBECTL` | the `kubectl` to run (default `kubectl` on `PATH`) |
//! | `MIGRATE_TEST_HELM` | the `helm` to run (default `helm` on `PATH`) |
//!
//! A set but unusable kubeconfig fails the test instead of skipping it: a lane that was asked
//! to run must never pass by not running.
//!
//! # The rule for a real-server test
//!
//! Every test that reaches [`RealCluster::from_env`] or [`RealCluster::private`] (directly or
//! through a helper), or that needs `MIGRATE_TEST_HELM`/`MIGRATE_TEST_KUBECTL`, carries
//!
//! ```text
//! #[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
//! ```
//!
//! ([`NEEDS_REAL_SERVER`] is the reason, word for word). Plain `cargo test` then reports it
//! `ignored`, so its summary counts what did not run, instead of a pass that only printed
//! "skipped". With the server up (`eval "$(sh examples/kube-testenv/testenv.sh env)"`) they run
//! with `cargo test ... -- --ignored` (only them) or `-- --include-ignored` (everything), as
//! `.ci/run` does. Both ways of not running are failures, not skips:
//! - run (with `--ignored`) without `MIGRATE_TEST_KUBECONFIG`, [`RealCluster::from_env`]
//!   panics: a lane that was asked to run must not pass by not running;
//! - run without `--ignored`/`--include-ignored` while `MIGRATE_TEST_KUBECONFIG` is set, the
//!   test cannot have been marked (a marked one would not run), and it panics naming the
//!   attribute to add, so an unmarked real-server test fails in CI's plain pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::serde;
use kube::api::{Api, DeleteParams, PostParams};

/// The variable naming the real cluster's kubeconfig.
pub const KUBECONFIG_VAR: &str = "MIGRATE_TEST_KUBECONFIG";
/// The variable naming the namespace the tests use (default `default`).
pub const NAMESPACE_VAR: &str = "MIGRATE_TEST_NAMESPACE";
/// The variable naming the `kubectl` binary (default `kubectl` on `PATH`).
pub const KUBECTL_VAR: &str = "MIGRATE_TEST_KUBECTL";
/// The variable naming the `helm` binary (default `helm` on `PATH`).
pub const HELM_VAR: &str = "MIGRATE_TEST_HELM";

/// The reason every real-server test is ignored with, `#[ignore = "..."]` (see the
/// [module documentation](self)).
pub const NEEDS_REAL_SERVER: &str = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)";

/// Panics unless this test binary was asked to run ignored tests while `MIGRATE_TEST_KUBECONFIG`
/// is set, and unless it is set when it was: the two checks of the [rule](self#the-rule-for-a-real-server-test)
/// for a test that needs the real server or its tools. `what` names the test in the message.
///
/// # Panics
/// As above, with the step that fixes it.
pub fn require_real_lane(what: &str) {
    let asked = std::env::args().any(|a| a == "--ignored" || a == "--include-ignored");
    let set = std::env::var_os(KUBECONFIG_VAR).is_some();
    check_real_lane(what, asked, set);
}

/// [`require_real_lane`] on given facts: whether ignored tests were asked for, and whether
/// `MIGRATE_TEST_KUBECONFIG` is set.
///
/// # Panics
/// When the test must not run on these terms.
pub fn check_real_lane(what: &str, asked_for_ignored: bool, kubeconfig_set: bool) {
    assert!(
        kubeconfig_set,
        "{what}: needs a real API server, and {KUBECONFIG_VAR} is not set: start one \
         (sh examples/kube-testenv/testenv.sh build && sh examples/kube-testenv/testenv.sh start; \
         eval \"$(sh examples/kube-testenv/testenv.sh env)\"), or run without --ignored/--include-ignored \
         to leave the real-server tests out"
    );
    assert!(
        asked_for_ignored,
        "{what}: a real-server test that is not marked #[ignore = \"{NEEDS_REAL_SERVER}\"]: \
         add the attribute, so that plain cargo test reports it ignored when no server is set \
         (with one set, run the real-server tests with cargo test -- --ignored)"
    );
}

/// The variable naming kube-testenv's built tools (set by `testenv.sh env`).
pub const TESTENV_BIN_VAR: &str = "MIGRATE_TESTENV_BIN";

/// kube-testenv's script, which starts and stops a server.
const TESTENV_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../kube-testenv/testenv.sh");

/// A cluster from [`RealCluster::private`]: dereferences to the cluster, and
/// stops its own server, if it started one, when dropped.
#[derive(Debug)]
pub struct PrivateCluster {
    cluster: RealCluster,
    /// Held for its drop alone: stops the server this cluster started.
    _state: Option<StateGuard>,
}

impl std::ops::Deref for PrivateCluster {
    type Target = RealCluster;
    fn deref(&self) -> &RealCluster {
        &self.cluster
    }
}

/// The state directory of a private server: stops it and removes the
/// directory when dropped.
#[derive(Debug)]
struct StateGuard(PathBuf);

impl Drop for StateGuard {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg(TESTENV_SCRIPT)
            .arg("stop")
            .env("MIGRATE_TESTENV_STATE", &self.0)
            .output();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A real API server to test against; see the [module documentation](self).
#[derive(Clone)]
pub struct RealCluster {
    config: kube::Config,
    client: kube::Client,
    namespace: String,
    kubeconfig: PathBuf,
}

impl std::fmt::Debug for RealCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealCluster")
            .field("server", &self.config.cluster_url.to_string())
            .field("namespace", &self.namespace)
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

impl RealCluster {
    /// The cluster named by `MIGRATE_TEST_KUBECONFIG`, for a test marked
    /// `#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]` (the
    /// [rule](self#the-rule-for-a-real-server-test)). Always `Some`: a test that cannot run
    /// fails instead of returning early; the `Option` stays so that tests written as
    /// `let Some(cluster) = ... else { return }` keep compiling.
    ///
    /// # Panics
    /// If the variable is unset, if the test was not run as an ignored test (so it is not
    /// marked), or if the kubeconfig cannot be read or yields no client.
    pub async fn from_env(what: &str) -> Option<Self> {
        require_real_lane(what);
        let path = std::env::var_os(KUBECONFIG_VAR).unwrap_or_default();
        Some(Self::from_kubeconfig(PathBuf::from(path)).await)
    }

    /// A cluster no other test uses, for a test that watches every object of
    /// the cluster (any other test's writes would show as its own): with
    /// kube-testenv's tools built (`MIGRATE_TESTENV_BIN`, which `testenv.sh
    /// env` exports), a new etcd and kube-apiserver started for it (about
    /// five seconds) and stopped when the returned value is dropped; a
    /// kubeconfig of some other cluster is used as given, shared. Always `Some`, as
    /// [`RealCluster::from_env`].
    ///
    /// # Panics
    /// As [`RealCluster::from_env`], or if the private server cannot be started.
    pub async fn private(what: &str) -> Option<PrivateCluster> {
        let shared = Self::from_env(what).await?;
        let Some(bin) = std::env::var_os(TESTENV_BIN_VAR) else {
            return Some(PrivateCluster {
                cluster: shared,
                _state: None,
            });
        };
        let state = std::env::temp_dir().join(unique_name("kube-testenv"));
        let started = Command::new("sh")
            .arg(TESTENV_SCRIPT)
            .arg("start")
            .env("MIGRATE_TESTENV_STATE", &state)
            .env(TESTENV_BIN_VAR, bin)
            .output()
            .unwrap_or_else(|e| panic!("sh {TESTENV_SCRIPT} start: {e}"));
        // Stopped on drop whatever happens next, so no daemon outlives the test.
        let guard = StateGuard(state.clone());
        succeeded("testenv.sh start (a private API server)", &started);
        let cluster = Self::from_kubeconfig(state.join("kubeconfig")).await;
        Some(PrivateCluster {
            cluster,
            _state: Some(guard),
        })
    }

    /// The cluster a kubeconfig names.
    async fn from_kubeconfig(kubeconfig: PathBuf) -> Self {
        let parsed = match kube::config::Kubeconfig::read_from(&kubeconfig) {
            Ok(parsed) => parsed,
            Err(e) => panic!("{KUBECONFIG_VAR}={}: {e}", kubeconfig.display()),
        };
        let config = match kube::Config::from_custom_kubeconfig(parsed, &Default::default()).await {
            Ok(config) => config,
            Err(e) => panic!("{KUBECONFIG_VAR}={}: {e}", kubeconfig.display()),
        };
        let client = match kube::Client::try_from(config.clone()) {
            Ok(client) => client,
            Err(e) => panic!("{KUBECONFIG_VAR}={}: {e}", kubeconfig.display()),
        };
        let namespace = std::env::var(NAMESPACE_VAR).unwrap_or_else(|_| "default".into());
        Self {
            config,
            client,
            namespace,
            kubeconfig,
        }
    }

    /// A client with the kubeconfig's (admin) credentials.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The client configuration, to derive other clients (impersonation, no retries, ...).
    pub fn config(&self) -> kube::Config {
        self.config.clone()
    }

    /// A client that impersonates `user` (and `groups`), through the admin's right to
    /// impersonate: requests are authorized as that user, so RBAC applies to them.
    ///
    /// # Panics
    /// If kube cannot build the client.
    pub fn impersonating(&self, user: &str, groups: &[&str]) -> kube::Client {
        let mut config = self.config();
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
        match kube::Client::try_from(config) {
            Ok(client) => client,
            Err(e) => panic!("cannot build a client impersonating {user}: {e}"),
        }
    }

    /// A kubeconfig (as JSON, which is YAML) for the same cluster that authenticates as
    /// ServiceAccount `namespace/name` with a token minted through the TokenRequest API (valid
    /// for an hour). The ServiceAccount must exist.
    ///
    /// # Panics
    /// If the token cannot be minted or the kubeconfig not rewritten.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> String {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let token = match accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
        {
            Ok(answer) => answer.status.map(|s| s.token).unwrap_or_default(),
            Err(e) => panic!("cannot mint a token for serviceaccount {namespace}/{name}: {e}"),
        };
        let parsed = match kube::config::Kubeconfig::read_from(&self.kubeconfig) {
            Ok(parsed) => parsed,
            Err(e) => panic!("{KUBECONFIG_VAR}={}: {e}", self.kubeconfig.display()),
        };
        let mut doc = match serde_json::to_value(&parsed) {
            Ok(doc) => doc,
            Err(e) => panic!("cannot re-encode the kubeconfig: {e}"),
        };
        let user = format!("sa-{namespace}-{name}");
        doc["users"] = serde_json::json!([{"name": user, "user": {"token": token}}]);
        if let Some(contexts) = doc["contexts"].as_array_mut() {
            for context in contexts {
                context["context"]["user"] = serde_json::json!(user);
                context["context"]["namespace"] = serde_json::json!(namespace);
            }
        }
        doc.to_string()
    }

    /// A client authenticated as ServiceAccount `namespace/name` (see
    /// [`service_account_kubeconfig`](Self::service_account_kubeconfig)): RBAC applies to it as to
    /// a pod running under that ServiceAccount.
    ///
    /// # Panics
    /// If the token cannot be minted or kube cannot build the client.
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> kube::Client {
        let text = self.service_account_kubeconfig(namespace, name).await;
        let parsed = match kube::config::Kubeconfig::from_yaml(&text) {
            Ok(parsed) => parsed,
            Err(e) => panic!("the rewritten kubeconfig does not parse: {e}"),
        };
        let config = match kube::Config::from_custom_kubeconfig(parsed, &Default::default()).await {
            Ok(config) => config,
            Err(e) => panic!("the rewritten kubeconfig is unusable: {e}"),
        };
        match kube::Client::try_from(config) {
            Ok(client) => client,
            Err(e) => panic!("cannot build a client for serviceaccount {namespace}/{name}: {e}"),
        }
    }

    /// The namespace for namespaced test objects (`MIGRATE_TEST_NAMESPACE`, default `default`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `kubectl --kubeconfig <the kubeconfig>`, from `MIGRATE_TEST_KUBECTL` or `PATH`.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(tool(KUBECTL_VAR, "kubectl"));
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }

    /// Runs `kubectl <args>` with `stdin` on its standard input and returns what it did,
    /// successful or not (for tests that expect a refusal).
    ///
    /// # Panics
    /// If kubectl cannot be started.
    pub fn kubectl_with_stdin(&self, args: &[&str], stdin: &str) -> std::process::Output {
        use std::io::Write;
        use std::process::Stdio;
        let mut child = self
            .kubectl()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl (set {KUBECTL_VAR}): {e}"));
        if let Some(mut input) = child.stdin.take() {
            // kubectl may exit before reading everything; its output says why.
            let _ = input.write_all(stdin.as_bytes());
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("kubectl {args:?} did not finish: {e}"))
    }

    /// Runs `kubectl <args>` with `stdin` on its standard input and returns its standard
    /// output followed by its standard error.
    ///
    /// # Panics
    /// Unless kubectl succeeds; the message carries its output.
    pub fn kubectl_ok(&self, args: &[&str], stdin: &str) -> String {
        succeeded(
            &format!("kubectl {args:?}"),
            &self.kubectl_with_stdin(args, stdin),
        )
    }

    /// `helm --kubeconfig <the kubeconfig>`, from `MIGRATE_TEST_HELM` or `PATH`.
    pub fn helm(&self) -> Command {
        let mut command = Command::new(tool(HELM_VAR, "helm"));
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }

    /// The run-lock Lease `<name>-lock` of ledger object `name`, in [`namespace`](Self::namespace),
    /// as stored (`None` if absent).
    ///
    /// # Panics
    /// On an API error.
    pub async fn lock_lease(&self, name: &str) -> Option<Lease> {
        let leases: Api<Lease> = Api::namespaced(self.client(), self.namespace());
        match leases.get_opt(&format!("{name}-lock")).await {
            Ok(lease) => lease,
            Err(e) => panic!("cannot read Lease {name}-lock: {e}"),
        }
    }

    /// Deletes ledger object `name` from `objects` and its run-lock Lease from
    /// [`namespace`](Self::namespace), ignoring either being absent (see [`delete_with_lock`]).
    pub async fn delete_with_lock<K>(&self, objects: &Api<K>, name: &str)
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let leases: Api<Lease> = Api::namespaced(self.client(), self.namespace());
        delete_with_lock(objects, &leases, name).await;
    }

    /// Creates namespace `name` unless it exists (no controller-manager runs on a test
    /// environment, so tests never delete namespaces: they would stay `Terminating`).
    ///
    /// # Panics
    /// On any API error but `AlreadyExists`.
    pub async fn ensure_namespace(&self, name: &str) {
        let api: Api<Namespace> = Api::all(self.client());
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("cannot create namespace {name}: {e}"),
        }
    }
}

/// The value in an `Option`, or a plain `return` from the enclosing test when it is `None`:
/// `let f = or_skip!(Fixture::new("what", "prefix").await);` for a real-server test that
/// skips (having printed why) when no cluster is configured.
#[macro_export]
macro_rules! or_skip {
    ($option:expr) => {
        match $option {
            Some(value) => value,
            None => return,
        }
    };
}

/// The API server's refusal in `result`: the `Status` of a `kube::Error::Api`.
///
/// # Panics
/// If `result` is a success or another kind of error.
pub fn api_status<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The standard output followed by the standard error of a tool run as `what`.
///
/// # Panics
/// Unless the run succeeded; the message names `what` and carries the output.
pub fn succeeded(what: &str, out: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed: {text}");
    text
}

/// Waits until the API server reports CustomResourceDefinition `name` `Established`
/// (polling every 250 ms).
///
/// # Panics
/// On an API error, or if it is not established within 30 s.
pub async fn wait_until_established(client: &kube::Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for _ in 0..120 {
        let crd = match crds.get(name).await {
            Ok(crd) => crd,
            Err(e) => panic!("cannot read the CRD {name}: {e}"),
        };
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    panic!("the CRD {name} did not become established within 30 s");
}

/// A name no other test run uses: `<prefix>-<pid>-<counter>` (DNS-1123, at most 63 characters
/// for prefixes up to 40).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

fn tool(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// The ledger objects one real-server lane makes (one per conformance case), named so that
/// runs never collide, and deleted together with their run-lock Leases at the end.
#[derive(Debug)]
pub struct LaneObjects {
    prefix: String,
    made: std::sync::Mutex<Vec<String>>,
}

impl LaneObjects {
    /// Objects named `<prefix>-<pid>-<case>`.
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: format!("{prefix}-{}", std::process::id()),
            made: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The name of `case`'s object (DNS-1123: underscores become dashes, at most 40
    /// characters of the case, no trailing dash), remembered for [`LaneObjects::delete`].
    pub fn name_for(&self, case: &str) -> String {
        let case: String = case.replace('_', "-").chars().take(40).collect();
        let name = format!("{}-{}", self.prefix, case.trim_end_matches('-'));
        self.made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(name.clone());
        name
    }

    /// Deletes every remembered object from `objects` and its `<name>-lock` Lease from
    /// `leases`; an object already gone is fine.
    pub async fn delete<K>(self, objects: &Api<K>, leases: &Api<Lease>)
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let made = self
            .made
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for name in made {
            delete_with_lock(objects, leases, &name).await;
        }
    }
}

/// Deletes object `name` and its run-lock Lease `<name>-lock`, ignoring either being absent
/// (a test's last step; a failed test leaves both behind for inspection).
pub async fn delete_with_lock<K>(objects: &Api<K>, leases: &Api<Lease>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let _ = objects.delete(name, &DeleteParams::default()).await;
    let _ = leases
        .delete(&format!("{name}-lock"), &DeleteParams::default())
        .await;
}
