//! `migrate test` cannot reach a real cluster, gives tests what a real run
//! gives scripts, and the helpers `migrate init` writes (the fake cluster,
//! `expect_safe_to_run_twice`) behave as AUTHORING.md says, under dash,
//! busybox ash and bash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use common::shells::{self, Shell};
use common::{json, migrate};

/// A tree made by `migrate init` with one migration `pre-apply/SLUG` whose
/// body runs under `shell`, and its test (also under `shell`).
fn tree_with(dir: &Path, shell: &Shell, slug: &str, body: &str, test: &str) -> PathBuf {
    let tree = dir.join(format!("tree-{}", shell.name));
    assert_eq!(json(&["init", tree.to_str().unwrap()]).0, 0);
    write_migration(&tree, shell, slug, body);
    write_test(&tree, shell, slug, test);
    tree
}

/// [`tree_with`] a migration `relabel` that labels a namespace.
fn relabel_tree(dir: &Path, shell: &Shell, test: &str) -> PathBuf {
    let body = "kubectl label namespace a x=y --overwrite";
    tree_with(dir, shell, "relabel", body, test)
}

/// Writes `pre-apply/SLUG` of `tree`: `body` under `shell`.
fn write_migration(tree: &Path, shell: &Shell, slug: &str, body: &str) {
    let script = format!(
        "#!{}\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n{body}\n",
        shell.shebang
    );
    std::fs::write(tree.join("pre-apply").join(slug), script).unwrap();
}

/// Writes `tests/SLUG.sh` of `tree`: `test` under `shell`.
fn write_test(tree: &Path, shell: &Shell, slug: &str, test: &str) {
    std::fs::write(
        tree.join("tests").join(format!("{slug}.sh")),
        format!("#!{}\n{test}\n", shell.shebang),
    )
    .unwrap();
}

/// [`run_tests`] under `shell`'s tree, which must exit `code`: the document.
fn tests_exit(
    tree: &Path,
    env: &[(&str, &std::ffi::OsStr)],
    shell: &Shell,
    code: i32,
) -> serde_json::Value {
    let (got, doc) = run_tests(tree, env);
    assert_eq!(got, code, "{}: {doc:#}", shell.name);
    doc
}

/// The output of the only test of `tree`, which fails (exit 2).
fn failed_output(tree: &Path, shell: &Shell) -> String {
    let doc = tests_exit(tree, &[], shell, 2);
    only_result(&doc)["output"].as_str().unwrap().to_owned()
}

/// `migrate test TREE --output json` with extra environment; (code, document).
fn run_tests(tree: &Path, env: &[(&str, &std::ffi::OsStr)]) -> (i32, serde_json::Value) {
    let mut cmd = migrate();
    cmd.args(["test", tree.to_str().unwrap(), "--output", "json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (code, doc, _) = common::parse(cmd.output().unwrap());
    (code, doc)
}

fn only_result(doc: &serde_json::Value) -> &serde_json::Value {
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(1), "{doc:#}");
    &doc["results"][0]
}

/// A directory of stand-ins for the real `kubectl` and `helm`, which leave
/// a mark when they run.
fn real_commands(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("real-bin");
    let mark = dir.join("real-ran");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["kubectl", "helm", "flux"] {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho \"{name} $*\" >> '{}'\n", mark.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (bin, mark)
}

fn path_with(first: &Path) -> std::ffi::OsString {
    let mut path = first.as_os_str().to_owned();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap());
    path
}

#[test]
fn a_test_that_calls_cluster_commands_without_fakes_fails_and_the_real_ones_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let (real, mark) = real_commands(dir.path());
    for shell in shells::all() {
        // The test drops the statuses: the refusal must still fail it.
        let tree = relabel_tree(
            dir.path(),
            &shell,
            "kubectl get namespaces || true\n\"${HELM:-helm}\" list || true\nsh -e pre-apply/relabel || true\nexit 0",
        );
        let doc = tests_exit(&tree, &[("PATH", &path_with(&real))], &shell, 2);
        let result = only_result(&doc);
        assert_eq!(result["outcome"], "fail", "{}: {doc:#}", shell.name);
        let reason = result["reason"].as_str().unwrap();
        common::assert_contains_all(
            reason,
            &[
                "reached for a real cluster command",
                "kubectl get namespaces",
                "helm list",
                "kubectl label namespace a x=y --overwrite",
            ],
        );
        let output = result["output"].as_str().unwrap_or_default();
        assert!(
            output.contains("migrate test refuses to run the real kubectl"),
            "{}: {output}",
            shell.name
        );
        assert!(
            !mark.exists(),
            "{}: a real command ran: {}",
            shell.name,
            std::fs::read_to_string(&mark).unwrap()
        );
    }
}

#[test]
fn a_real_kubectl_a_test_puts_first_on_path_still_reaches_no_cluster() {
    let Some(kubectl) = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
    else {
        eprintln!("SKIPPED: no kubectl installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The cluster the caller's kubeconfig names: it must see no connection.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let kubeconfig = common::kubeconfig_for(dir.path(), &url);
    let real_dir = kubectl.parent().unwrap().display().to_string();
    for shell in shells::all() {
        let tree = relabel_tree(
            dir.path(),
            &shell,
            &format!(
                "PATH='{real_dir}':$PATH\nkubectl --request-timeout=5s get namespaces && exit 0\nunset KUBECONFIG\nkubectl --request-timeout=5s get namespaces && exit 0\nexit 1"
            ),
        );
        let (code, doc) = run_tests(
            &tree,
            &[
                ("KUBECONFIG", kubeconfig.as_os_str()),
                ("KUBERNETES_SERVICE_HOST", "127.0.0.1".as_ref()),
                (
                    "KUBERNETES_SERVICE_PORT",
                    listener.local_addr().unwrap().port().to_string().as_ref(),
                ),
            ],
        );
        assert_eq!(code, 2, "{}: {doc:#}", shell.name);
        assert_eq!(only_result(&doc)["outcome"], "fail", "{doc:#}");
        assert!(
            listener.accept().is_err(),
            "{}: the caller's cluster was reached: {doc:#}",
            shell.name
        );
    }
}

#[test]
fn migration_tree_and_migrate_tolerate_are_there_as_in_a_real_run() {
    let dir = tempfile::tempdir().unwrap();
    for shell in shells::all() {
        let body = "test -d \"$MIGRATION_TREE/pre-apply\"\n\
                    test \"$MIGRATION_SLUG\" = widgets-relabel\n\
                    test \"$MIGRATION_TIER\" = pre-apply\n\
                    test -n \"$MIGRATION_NAMESPACE\"\n\
                    migrate-tolerate --not-found -- kubectl get crd widgets.example.com\n\
                    kubectl label namespace a x=y --overwrite";
        let test = ". \"$(dirname \"$0\")/lib.sh\"\n\
             answer 'kubectl get crd widgets.example.com' not-found customresourcedefinitions.apiextensions.k8s.io widgets.example.com\n\
             run_migration pre-apply/widgets-relabel\n\
             expect_call 'label namespace a x=y --overwrite'\n\
             # Forbidden is never tolerated: the migration must stop.\n\
             answer 'kubectl get crd widgets.example.com' forbidden customresourcedefinitions.apiextensions.k8s.io widgets.example.com get\n\
             if run_migration pre-apply/widgets-relabel; then echo 'Forbidden was tolerated' >&2; exit 1; fi";
        let tree = tree_with(dir.path(), &shell, "widgets-relabel", body, test);
        let doc = tests_exit(&tree, &[], &shell, 0);
        assert_eq!(only_result(&doc)["outcome"], "pass", "{doc:#}");
    }
}

/// The fake's text for `answer PATTERN KIND DETAIL`, called as `kubectl ARGS`:
/// (status, stderr).
fn fake_answer(tree: &Path, kind_and_detail: &str, args: &str) -> (i32, String) {
    probe(
        tree,
        &format!("answer '*' {kind_and_detail}\nkubectl {args}"),
    )
}

/// Runs `body` as a test file of `tree` after sourcing its lib.sh; (status, stderr).
fn probe(tree: &Path, body: &str) -> (i32, String) {
    let file = tree.join("tests/probe.sh");
    std::fs::write(&file, format!(". \"$(dirname \"$0\")/lib.sh\"\n{body}\n")).unwrap();
    let out = std::process::Command::new("sh")
        .arg(&file)
        .current_dir(tree)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The kubectl texts recorded from the real kubectl (tests/fixtures/kubectl-errors).
fn recorded(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/kubectl-errors/{name}.txt")),
    )
    .unwrap()
}

#[test]
fn the_fake_cluster_answers_with_kubectls_recorded_texts_and_status() {
    let (_dir, tree) = common::initialised("m");
    for (kind, args, file) in [
        (
            "not-found configmaps not-found",
            "get configmap not-found",
            "not-found",
        ),
        (
            "not-served widgets",
            "get widgets",
            "resource-type-not-served",
        ),
        (
            "forbidden configmaps forbidden get default",
            "get configmap forbidden",
            "forbidden",
        ),
        ("timeout", "get configmaps", "client-timeout"),
        (
            "already-exists configmaps already-exists",
            "create -f -",
            "already-exists-from-file",
        ),
        (
            "already-exists configmaps already-exists",
            "create configmap already-exists",
            "already-exists",
        ),
    ] {
        let (status, stderr) = fake_answer(&tree, kind, args);
        assert_eq!(status, 1, "{kind}: {stderr}");
        assert_eq!(stderr, recorded(file), "{kind}");
    }
    // A kind the fake knows no real text for is refused, not answered with a bare failure.
    let (status, stderr) = probe(
        &tree,
        "answer '*' forbidden configmaps x get\nhelm status x",
    );
    assert_eq!(status, 2, "{stderr}");
    common::assert_contains_all(&stderr, &["no text of helm is known for 'forbidden'"]);
}

#[test]
fn safe_to_run_twice_fails_a_migration_whose_second_run_changes_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    for shell in shells::all() {
        // Creates unconditionally: the second run creates again.
        let tree = tree_with(
            dir.path(),
            &shell,
            "make-namespace",
            "kubectl create namespace x",
            ". \"$(dirname \"$0\")/lib.sh\"\nexpect_safe_to_run_twice pre-apply/make-namespace",
        );
        let output = failed_output(&tree, &shell);
        common::assert_contains_all(
            &output,
            &[
                "pre-apply/make-namespace changed the cluster again when run a second time",
                "kubectl create namespace x",
            ],
        );
        // Checks first, and the cluster after the first run has the namespace.
        let tree = dir.path().join(format!("checked-{}", shell.name));
        std::fs::rename(dir.path().join(format!("tree-{}", shell.name)), &tree).unwrap();
        write_migration(
            &tree,
            &shell,
            "make-namespace",
            "found=$(kubectl get namespace x --ignore-not-found -o name)\n\
             [ -n \"$found\" ] || kubectl create namespace x",
        );
        write_test(
            &tree,
            &shell,
            "make-namespace",
            ". \"$(dirname \"$0\")/lib.sh\"\n\
             created() { answer 'kubectl get namespace x *' ok namespace/x; }\n\
             expect_safe_to_run_twice pre-apply/make-namespace created",
        );
        tests_exit(&tree, &[], &shell, 0);
    }
}

#[test]
fn a_failure_injected_into_no_call_is_a_failed_test_saying_so_not_a_migration_that_ignored_it() {
    let dir = tempfile::tempdir().unwrap();
    for shell in shells::all() {
        // Fails closed: a failed `get` stops it.
        let body = "namespaces=$(kubectl get namespaces -o name)\nfor ns in $namespaces; do kubectl label \"$ns\" a=b --overwrite; done";
        // A careless test names the call as the answers' glob would: with `kubectl ` and a `*`.
        // No call's arguments contain that, so nothing fails; the test must not pass for it,
        // and must not blame the migration.
        let tree = tree_with(
            dir.path(),
            &shell,
            "label",
            body,
            ". \"$(dirname \"$0\")/lib.sh\"\nexpect_failure_when_kubectl_fails pre-apply/label 'kubectl get namespaces*'",
        );
        let output = failed_output(&tree, &shell);
        common::assert_contains_all(
            &output,
            &["no kubectl call's arguments contained 'kubectl get namespaces*'"],
        );
        assert!(!output.contains("succeeded although"), "{output}");
        // Named as the arguments read, the failure is injected and the migration stops on it.
        write_test(
            &tree,
            &shell,
            "label",
            ". \"$(dirname \"$0\")/lib.sh\"\nexpect_failure_when_kubectl_fails pre-apply/label 'get namespaces'",
        );
        tests_exit(&tree, &[], &shell, 0);
    }
}

#[test]
fn init_and_the_demo_ship_the_same_fake_cluster_and_test_helpers() {
    let (_dir, tree) = common::initialised("m");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo/tests");
    let read = |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    for file in ["fake-cluster", "lib.sh"] {
        assert_eq!(
            read(tree.join("tests").join(file)),
            read(demo.join(file)),
            "tests/{file}: the demo runs what init writes"
        );
    }
}

#[test]
fn safe_to_run_twice_finds_the_verb_after_global_flags_with_values_as_kubectl_does() {
    let dir = tempfile::tempdir().unwrap();
    for shell in shells::all() {
        // AUTHORING's own form: the namespace before the verb. Each call is
        // safe to repeat, whichever global flags come before its verb.
        let body = "kubectl -n acme delete secret old-token --ignore-not-found\n\
                    kubectl --context staging --namespace=acme get secret new-token\n\
                    kubectl --kubeconfig /k -n acme label namespace acme a=b --overwrite\n\
                    helm --kube-context staging -n acme status acme\n\
                    flux --namespace flux-system get kustomizations";
        let tree = tree_with(
            dir.path(),
            &shell,
            "drop-token",
            body,
            ". \"$(dirname \"$0\")/lib.sh\"\nexpect_safe_to_run_twice pre-apply/drop-token",
        );
        tests_exit(&tree, &[], &shell, 0);
        // A namespace named like a safe verb is the flag's value, not the
        // verb: the create after it still changes the cluster again.
        write_migration(
            &tree,
            &shell,
            "drop-token",
            "kubectl -n get create secret generic t --from-literal=a=b",
        );
        let output = failed_output(&tree, &shell);
        common::assert_contains_all(
            &output,
            &[
                "changed the cluster again when run a second time",
                "kubectl -n get create secret generic t",
            ],
        );
    }
}

#[test]
fn the_manifest_the_quick_start_generates_is_not_picked_up_by_git_add() {
    let (dir, tree) = common::initialised("migrations");
    common::git(dir.path(), &["init", "-q"]);
    std::fs::create_dir_all(tree.join("order.d")).unwrap();
    std::fs::write(tree.join("order.d/00001-v1"), "a\n").unwrap();
    common::git(dir.path(), &["add", "-A"]);
    let staged = common::git(dir.path(), &["diff", "--cached", "--name-only"]);
    assert!(!staged.contains("order.d"), "{staged}");
    assert!(staged.contains("migrations/tests/lib.sh"), "{staged}");
}
