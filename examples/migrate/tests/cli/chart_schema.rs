//! The chart's `values.schema.json` with the real `helm` (`MIGRATE_TEST_HELM`; these tests are
//! ignored unless asked for, as every test that needs kube-testenv's tools is, see
//! `test_apiserver::real`): its defaults pass `helm lint` and `helm template`, and a mistyped
//! value is refused naming the key, where without a schema helm ignored it silently.

use std::process::Command;

use test_apiserver::real::{HELM_VAR, require_real_lane};

use crate::chart::CHART;

/// `helm ARGS... CHART` with `--set` values: whether it succeeded, and its output.
fn helm(what: &str, command: &[&str], sets: &[&str]) -> (bool, String) {
    require_real_lane(what);
    let helm = std::env::var_os(HELM_VAR)
        .unwrap_or_else(|| panic!("{what}: {HELM_VAR} is not set (testenv.sh env sets it)"));
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(helm);
    cmd.args(command).arg(CHART);
    for set in sets {
        cmd.arg("--set").arg(set);
    }
    // helm's caches and settings out of the user's home.
    cmd.env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"));
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `helm lint` and `helm template` both refuse `set`, naming `key`.
fn refused(set: &str, key: &str) {
    for command in [&["lint"][..], &["template", "release"][..]] {
        let (ok, text) = helm(set, command, &[set]);
        assert!(!ok, "helm {command:?} --set {set} passed:\n{text}");
        assert!(
            text.contains(key),
            "helm {command:?} --set {set}: {key} not named:\n{text}"
        );
        assert!(
            text.contains("schema"),
            "helm {command:?} --set {set}: not the schema:\n{text}"
        );
    }
}

#[test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
fn the_charts_defaults_pass_lint_and_template_under_its_schema() {
    let (ok, text) = helm("the chart's defaults", &["lint", "--strict"], &[]);
    assert!(ok, "{text}");
    let (ok, text) = helm("the chart's defaults", &["template", "release"], &[]);
    assert!(ok, "{text}");
    assert!(text.contains("kind: Deployment"), "{text}");
}

#[test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
fn a_misspelt_top_level_value_such_as_image_pull_secret_is_refused_naming_it() {
    refused("imagePullSecret[0].name=registry", "imagePullSecret");
}

#[test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
fn a_misspelt_nested_value_such_as_hook_clusterrole_is_refused_naming_it() {
    refused("hook.clusterrole=platform-migrations", "clusterrole");
    refused(
        "operator.job.ttlSecondsAfterFinish=60",
        "ttlSecondsAfterFinish",
    );
}

#[test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
fn a_value_of_the_wrong_type_is_refused_naming_it() {
    refused("operator.replicas=two", "replicas");
    refused("imagePullPolicy=Sometimes", "imagePullPolicy");
}

#[test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
fn the_values_an_umbrella_or_a_platform_sets_pass() {
    let (ok, text) = helm(
        "values a platform sets",
        &["template", "release"],
        &[
            "global.registry=registry.example",
            "hook.clusterRole=platform-migrations",
            "imagePullSecrets[0].name=registry-credentials",
            "nodeSelector.pool=system",
            "operator.replicas=1",
        ],
    );
    assert!(ok, "{text}");
}
