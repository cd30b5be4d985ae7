//! API round trips, counted (not timed) through the in-process test API
//! server, for the real code paths: [`Migrator::prepare`] and
//! [`Migrator::record`] over [`ConfigMapLedger`], and the hook runner
//! (core's [`Driver::run`] through [`migrate_runner::Processes`]) for
//! whole runs, on the ConfigMap and on the custom-resource ledger.
//!
//! Each scenario starts its own server, plants the ledger it needs directly
//! in storage (not counted), resets the counters, runs the operation, and
//! returns every request it made.

use std::collections::BTreeMap;
use std::fmt;

use ledger_configmap::{ConfigMapLedger, Options};
use migrate_runner::{PreRunScan, Processes, ScriptSettings};
use migration_core::drive::{Console, Driver, RunSettings};
use migration_core::{
    EntryState, Ledger, LedgerEntry, LockedLedger, MigrateError, MigrationsTree, Migrator,
    PlanRequest, Prepared, Slug, SystemClock, Tier, Timestamp,
};
use test_apiserver::{TestApiServer, Verb};

use crate::inputs::{LEGACY, PlanInput, image};
use ledger_crd::{GROUP, KIND, PLURAL, VERSION};

// The ledger ConfigMap at its default place (its Lease is `<name>-lock`).
pub use migration_kube::defaults::{LEDGER_NAME as NAME, NAMESPACE};

/// The requests one operation made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// `(verb, resource) → requests`, e.g. `("GET", "configmaps") → 1`.
    pub by_kind: BTreeMap<(String, String), usize>,
    /// Every request.
    pub total: usize,
    /// `METHOD path` of each request, in order.
    pub log: Vec<String>,
}

impl Counts {
    fn from_server(server: &TestApiServer) -> Self {
        let log = server.requests().log();
        let mut by_kind = BTreeMap::new();
        for r in &log {
            let verb = match r.verb {
                Verb::Get => "GET",
                Verb::List => "LIST",
                Verb::Watch => "WATCH",
                Verb::Create => "POST",
                Verb::Update => "PUT",
                Verb::Patch => "PATCH",
                Verb::Delete => "DELETE",
            };
            *by_kind
                .entry((verb.to_owned(), r.resource.clone()))
                .or_insert(0) += 1;
        }
        Counts {
            by_kind,
            total: server.requests().total(),
            log: log.iter().map(|r| r.method_path.clone()).collect(),
        }
    }

    /// Requests of one verb on one resource.
    pub fn count(&self, verb: &str, resource: &str) -> usize {
        self.by_kind
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .by_kind
            .iter()
            .map(|((verb, res), n)| format!("{n}×{verb} {res}"))
            .collect();
        write!(f, "{} ({})", self.total, parts.join(", "))
    }
}

/// One counted scenario: what was done, what it cost, the documented
/// minimum, and what the operation returned.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// The requests made.
    pub counts: Counts,
    /// The fewest requests the operation can make (see `benches/README.md`).
    pub minimum: usize,
    /// What the operation reported (seeded, pending, ...), or its error.
    pub outcome: String,
}

fn ledger(server: &TestApiServer) -> ConfigMapLedger {
    ConfigMapLedger::with_options(server.client(), NAMESPACE, NAME, Options::default())
}

/// What a `Migrator` scenario runs against: its own server, holding the
/// planted ledger (if any), and a client of it.
struct Setup {
    server: TestApiServer,
    ledger: ConfigMapLedger,
}

impl Setup {
    /// A server holding `planted` as the ledger's data, or no ledger.
    async fn new(planted: Option<&[(String, String)]>) -> Self {
        let server = TestApiServer::start().await;
        if let Some(data) = planted {
            plant(&server, data);
        }
        let ledger = ledger(&server);
        Setup { server, ledger }
    }

    /// The migrator over `tree`, with the image the runner records.
    fn migrator<'a>(&'a self, tree: &'a MigrationsTree) -> Migrator<'a> {
        Migrator::new(tree, &self.ledger, &SystemClock).with_image(Some(image()))
    }

    /// `Migrator::prepare` for the pre-apply tier, counting from here.
    async fn prepare(&self, tree: &MigrationsTree) -> Result<Prepared, MigrateError> {
        self.server.requests().reset();
        self.migrator(tree)
            .prepare(&PlanRequest::tier(Tier::PreApply))
            .await
    }

    /// The requests since the last reset.
    fn counts(&self) -> Counts {
        Counts::from_server(&self.server)
    }
}

fn plant(server: &TestApiServer, data: &[(String, String)]) {
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    server
        .put_object(
            "configmaps",
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE,
                    "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                "data": data,
            }),
        )
        .expect("the test server stores the ledger");
}

/// `Migrator::prepare` for the pre-apply tier on a ledger that already
/// records every migration of an `n`-migration tree: nothing to seed, nothing
/// pending. Then one `Migrator::record` right after it (as the runner records
/// an outcome on the ledger it has just read).
pub async fn prepare_nothing_pending(n: usize) -> (Scenario, Scenario) {
    let input = PlanInput::build(n, 0);
    let setup = Setup::new(Some(&input.ledger_data)).await;
    let prepared = setup.prepare(&input.tree).await.expect("prepare succeeds");
    let prepare = Scenario {
        name: format!("prepare, nothing pending, N={n}"),
        counts: setup.counts(),
        minimum: 1,
        outcome: format!(
            "{} pending, {} seeded",
            prepared.plan.pending.len(),
            prepared.written.len()
        ),
    };
    setup.server.requests().reset();
    let slug = input
        .tree
        .scripts()
        .keys()
        .next()
        .cloned()
        .expect("a script");
    let entry = LedgerEntry {
        attempts: 2,
        image: Some(image()),
        ..LedgerEntry::new(EntryState::Ok, Timestamp::now().truncated())
    };
    setup
        .migrator(&input.tree)
        .record(&slug, &entry)
        .await
        .expect("record succeeds");
    let record = Scenario {
        name: "record one outcome after prepare".into(),
        counts: setup.counts(),
        minimum: 1,
        outcome: "recorded".into(),
    };
    (prepare, record)
}

/// `Migrator::prepare` with no ledger object: a fresh install of an
/// `n`-migration tree (every slug recorded `skipped-fresh-install`).
pub async fn prepare_fresh_install(n: usize) -> Scenario {
    let input = PlanInput::build(n, 0);
    let setup = Setup::new(None).await;
    // Too many entries for the 1 MiB budget is refused before anything is
    // sent: the read is then the only request.
    let (outcome, minimum) = match setup.prepare(&input.tree).await {
        Ok(p) => (format!("{} entries created", p.written.len()), 2),
        Err(e) => (format!("refused: {e}"), 1),
    };
    Scenario {
        name: format!("prepare, fresh install, N={n}"),
        counts: setup.counts(),
        minimum,
        outcome,
    }
}

/// `Migrator::prepare` on a chart-created ledger holding only `version: 57`:
/// the 56 legacy-map slugs are seeded `legacy`.
pub async fn prepare_legacy_seeding() -> Scenario {
    let input = PlanInput::build(LEGACY, 0);
    let setup = Setup::new(Some(&[("version".into(), (LEGACY + 1).to_string())])).await;
    let prepared = setup.prepare(&input.tree).await.expect("prepare succeeds");
    Scenario {
        name: format!("prepare, legacy seeding of {LEGACY} keys"),
        counts: setup.counts(),
        minimum: 2,
        outcome: format!("{} seeded", prepared.written.len()),
    }
}

/// Discards the runner's output.
struct Quiet;

impl Console for Quiet {
    fn script_line(&self, _slug: &Slug, _line: &str) {}
    fn progress(&self, _line: &str) {}
}

/// The ledger backend a whole-run scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `configmap:cozy-system/cozystack-version`.
    ConfigMap,
    /// `crd:cozystack-version`, the `MigrationLedger` custom resource.
    Crd,
}

impl Backend {
    /// The resource its ledger object is stored as (request counts name it).
    pub fn resource(self) -> &'static str {
        match self {
            Backend::ConfigMap => "configmaps",
            Backend::Crd => "migrationledgers",
        }
    }
}

/// A whole hook run (core's `Driver::run` through the runner's processes,
/// pre-apply tier) on a ConfigMap ledger that records `recorded`
/// migrations, with `pending` more to run: real `/bin/sh` scripts from a
/// temporary directory, the real lock.
pub async fn runner(recorded: usize, pending: usize) -> Scenario {
    runner_on(Backend::ConfigMap, recorded, pending).await
}

/// [`runner`] on `backend`. The custom-resource ledger is planted through a
/// handle of its own (its `create`, not counted): its entries live in the
/// status subresource, which only the engine's encoding fills faithfully.
pub async fn runner_on(backend: Backend, recorded: usize, pending: usize) -> Scenario {
    let input = PlanInput::build(recorded, pending);
    let dir = tempfile::tempdir().expect("a temporary directory");
    input
        .write_to(dir.path())
        .expect("the tree is written to disk");
    let tree = migration_core::MigrationsTree::load(dir.path()).expect("the tree loads");
    let server = TestApiServer::start().await;
    let ledger: Box<dyn LockedLedger> = match backend {
        Backend::ConfigMap => {
            plant(&server, &input.ledger_data);
            Box::new(ledger(&server))
        }
        Backend::Crd => {
            server.register_custom_resource(GROUP, VERSION, PLURAL, KIND, false, true);
            let snapshot = input.snapshot();
            let entries: Vec<(Slug, LedgerEntry)> = snapshot
                .records
                .iter()
                .filter_map(|(slug, record)| record.entry().map(|e| (slug.clone(), e.clone())))
                .collect();
            ledger_crd::CrdLedger::new(server.client(), NAME)
                .create(&entries)
                .await
                .expect("the custom-resource ledger is planted");
            Box::new(ledger_crd::CrdLedger::new(server.client(), NAME))
        }
    };
    let mut config = RunSettings::new(Tier::PreApply, "bench-runner/pid-1".into());
    config.image = Some(image());
    let mut scripts = ScriptSettings::default();
    scripts.tripwire.shim = Some(shim_binary());
    let (_interrupt, interrupted) = tokio::sync::watch::channel(false);
    let scan = PreRunScan::new(&scripts.lint);
    let mut processes = Processes::new(&tree, &scripts, &Quiet, interrupted);
    let driver = Driver {
        tree: &tree,
        ledger: ledger.as_ref(),
        clock: &SystemClock,
        settings: &config,
        console: &Quiet,
        scan: &scan,
    };
    server.requests().reset();
    let outcome = match driver.run(&mut processes).await {
        Ok(report) => format!(
            "{} pending, {} results",
            report.pending,
            report.results.len()
        ),
        Err(e) => format!("failed: {e}"),
    };
    let name = match backend {
        Backend::ConfigMap => format!("runner, N={recorded} recorded, K={pending} pending"),
        Backend::Crd => format!("runner on crd:, N={recorded} recorded, K={pending} pending"),
    };
    Scenario {
        name,
        counts: Counts::from_server(&server),
        minimum: runner_minimum(pending),
        outcome,
    }
}

/// The fewest requests a hook run with `k` pending migrations can make on
/// either Kubernetes backend: read the ledger (1); then one conditional patch
/// before each script (its attempt mark, with the previous migration's
/// record; the first also takes the lock kept in the ledger object) and one
/// after the last (its record, releasing the lock), plus one read of the
/// Lease that runners of older releases lock the ledger through (taking the
/// lock must not start beside one of them): `k + 3`. With nothing pending
/// the read is all: no lock is taken, nothing is written.
pub fn runner_minimum(k: usize) -> usize {
    if k == 0 { 1 } else { k + 3 }
}

/// Every scenario in the README's table, in order.
pub async fn all() -> Vec<Scenario> {
    let mut out = Vec::new();
    for n in [100, 1_000] {
        let (prepare, record) = prepare_nothing_pending(n).await;
        out.push(prepare);
        if n == 100 {
            out.push(record);
        }
    }
    for n in [100, 1_000, 10_000] {
        out.push(prepare_fresh_install(n).await);
    }
    out.push(prepare_legacy_seeding().await);
    for k in [0, 1, 10] {
        out.push(runner(100, k).await);
    }
    for k in [0, 1, 10] {
        out.push(runner_on(Backend::Crd, 100, k).await);
    }
    out
}

/// The tripwire's `migrate-shim` for in-process runs (the runner would look
/// next to its own executable, which here is a test or bench binary in
/// `target/<profile>/deps`): `$MIGRATE_SHIM`, else `target/<profile>/`.
/// `cargo test --workspace` builds it (the migrate package's tests need
/// it); alone, build it first with `cargo build -p migrate --bins`.
pub fn shim_binary() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("MIGRATE_SHIM") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("the running executable's path");
    let beside = exe
        .parent()
        .and_then(std::path::Path::parent)
        .map(|d| d.join(migrate_runner::tripwire::SHIM_BINARY))
        .filter(|p| p.is_file());
    beside.unwrap_or_else(|| {
        panic!(
            "no {} next to {}: build it first (cargo build -p migrate --bins, --release for benches) or set MIGRATE_SHIM",
            migrate_runner::tripwire::SHIM_BINARY,
            exe.display()
        )
    })
}
