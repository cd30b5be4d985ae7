//! The reader of cluster command lines: a flag's value is never the verb.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use migrate_lint::command_line::{self, Arity, Flag};

fn words(line: &str) -> Vec<String> {
    line.split(' ').map(str::to_owned).collect()
}

/// The verb and the next positional word of `line` (its first word the
/// command), as the reader finds them.
fn verb_and_object(line: &str) -> (Option<String>, Option<String>) {
    let argv = words(line);
    let (name, args) = argv.split_first().unwrap();
    let r = command_line::read(name, args);
    let at = |n: usize| r.positionals.get(n).map(|&i| args[i].clone());
    (at(0), at(1))
}

fn verb(line: &str) -> Option<String> {
    verb_and_object(line).0
}

/// kubectl 1.34.12's value-taking global flags as `kubectl options` prints
/// them (written out here, not taken from the table under test).
const KUBECTL_VALUE_FLAGS: &str = "\
--as --as-group --as-uid --cache-dir --certificate-authority --client-certificate \
--client-key --cluster --context --kubeconfig --kuberc --log-flush-frequency -n \
--namespace --password --profile --profile-output --request-timeout -s --server \
--tls-server-name --token --user --username -v --v --vmodule";

/// helm v3.19.5's value-taking global flags (`helm --help`).
const HELM_VALUE_FLAGS: &str = "\
--burst-limit --kube-apiserver --kube-as-group --kube-as-user --kube-ca-file \
--kube-context --kube-tls-server-name --kube-token --kubeconfig -n --namespace --qps \
--registry-config --repository-cache --repository-config";

/// flux's value-taking global flags (`flux --help`).
const FLUX_VALUE_FLAGS: &str = "\
--as --as-group --as-uid --cache-dir --certificate-authority --client-certificate \
--client-key --cluster --context --kube-api-burst --kube-api-qps --kubeconfig -n \
--namespace --server --timeout --tls-server-name --token --user";

/// `flags`: the flags separated by white space.
fn assert_no_value_is_the_verb(command: &str, flags: &str, verb_word: &str) {
    let switch = if command == "helm" {
        "--kube-insecure-skip-tls-verify"
    } else {
        "--insecure-skip-tls-verify"
    };
    for flag in flags.split_whitespace() {
        for line in [
            format!("{command} {flag} hunter2 {verb_word} pods"),
            format!("{command} {flag}=hunter2 {verb_word} pods"),
            format!("{command} {switch} {flag} hunter2 {verb_word} pods"),
            // An unknown flag does not swallow the flag after it.
            format!("{command} --made-up {flag} hunter2 {verb_word} pods"),
            format!("{command} {verb_word} {flag} hunter2 pods"),
        ] {
            assert_eq!(
                verb_and_object(&line),
                (Some(verb_word.to_owned()), Some("pods".to_owned())),
                "{line}"
            );
        }
        if let Some(short) = flag.strip_prefix('-').filter(|f| f.len() == 1) {
            let line = format!("{command} -{short}hunter2 {verb_word} pods");
            assert_eq!(verb(&line).as_deref(), Some(verb_word), "{line}");
        }
    }
}

#[test]
fn no_value_of_a_kubectl_global_flag_is_read_as_the_verb() {
    assert_no_value_is_the_verb("kubectl", KUBECTL_VALUE_FLAGS, "get");
    assert_no_value_is_the_verb("/usr/local/bin/kubectl", KUBECTL_VALUE_FLAGS, "delete");
    assert_no_value_is_the_verb("oc", KUBECTL_VALUE_FLAGS, "get");
}

#[test]
fn no_value_of_a_helm_global_flag_is_read_as_the_verb() {
    assert_no_value_is_the_verb("helm", HELM_VALUE_FLAGS, "uninstall");
}

#[test]
fn no_value_of_a_flux_global_flag_is_read_as_the_verb() {
    assert_no_value_is_the_verb("flux", FLUX_VALUE_FLAGS, "reconcile");
}

#[test]
fn switches_before_the_verb_take_no_word_with_them() {
    for line in [
        "kubectl --insecure-skip-tls-verify get pods",
        "kubectl --warnings-as-errors --match-server-version get pods",
        "kubectl --disable-compression=true get pods",
        "helm --debug --kube-insecure-skip-tls-verify get pods",
        "flux --verbose get pods",
    ] {
        assert_eq!(verb(line).as_deref(), Some("get"), "{line}");
    }
}

#[test]
fn an_unknown_flag_before_the_verb_takes_the_next_word_as_cobra_does() {
    // `--made-up` is not kubectl's: cobra would take `secret` as its value
    // (and kubectl then refuse the flag); the reader never calls it a verb.
    assert_eq!(
        verb("kubectl --made-up secret get pods").as_deref(),
        Some("get")
    );
    assert_eq!(verb("mycli -x secret login").as_deref(), Some("login"));
    assert_eq!(verb("kubectl -- get pods"), None);
}

#[test]
fn the_idempotency_helpers_example_finds_delete_wherever_the_namespace_stands() {
    for line in [
        "kubectl -n acme delete secret old-token --ignore-not-found",
        "kubectl delete -n acme secret old-token --ignore-not-found",
        "kubectl delete secret old-token -n acme --ignore-not-found",
        "kubectl --namespace=acme delete --ignore-not-found secret old-token",
        "kubectl -nacme delete secret old-token",
    ] {
        assert_eq!(
            verb_and_object(line),
            (Some("delete".into()), Some("secret".into())),
            "{line}"
        );
    }
}

#[test]
fn subcommand_flags_past_the_verb_are_read_by_their_own_table() {
    assert_eq!(
        verb_and_object("kubectl get -A -l app=x pods"),
        (Some("get".into()), Some("pods".into()))
    );
    assert_eq!(
        verb_and_object("kubectl get -Al app=x pods"),
        (Some("get".into()), Some("pods".into()))
    );
    assert_eq!(
        verb_and_object("helm upgrade --install --username u --password hunter2 rel ./chart"),
        (Some("upgrade".into()), Some("rel".into()))
    );
    assert_eq!(
        verb_and_object("kubectl apply --dry-run=server -f x.yaml"),
        (Some("apply".into()), None)
    );
}

#[test]
fn an_unknown_flag_past_the_verb_stops_the_reading() {
    let argv = words("kubectl get --made-up hunter2 pods");
    let r = command_line::read("kubectl", &argv[1..]);
    assert!(!r.complete);
    assert_eq!(r.positionals, [0], "only the verb is certain");
    assert!(command_line::read("kubectl", &words("get pods")).complete);
}

/// The value flags and switches `help` prints: pflag's usage lines
/// (`  -n, --namespace string   ...`, a switch has no type word) or
/// kubectl's (`    -n, --namespace='':`, a switch defaults to true/false).
fn flags_from_help(help: &str) -> Vec<(String, Arity)> {
    let mut out = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        // `-n, --namespace`: the shorthand first (a description may hold
        // ", " too).
        let t = match t.as_bytes() {
            [b'-', c, b',', b' ', ..] if c.is_ascii_alphabetic() => &t[4..],
            _ => t,
        };
        let Some(t) = t.strip_prefix("--") else {
            continue;
        };
        if let Some((name, rest)) = t.split_once('=') {
            let default = rest.split(':').next().unwrap_or("");
            let arity = if matches!(default, "true" | "false") {
                Arity::Switch
            } else {
                Arity::Value
            };
            out.push((name.to_owned(), arity));
        } else {
            let mut parts = t.split_whitespace();
            let name = parts.next().unwrap_or("");
            let typed = parts
                .next()
                .is_some_and(|w| w.chars().all(|c| c.is_ascii_alphanumeric()) && w.len() < 14);
            // A description word right after the name (`--debug   enable`)
            // is at least two spaces away; a type is one space away.
            let one_space = t[name.len()..].starts_with(' ') && !t[name.len()..].starts_with("  ");
            let arity = if typed && one_space {
                Arity::Value
            } else {
                Arity::Switch
            };
            out.push((name.to_owned(), arity));
        }
    }
    out
}

fn table_matches_help(table: &[Flag], help: &str, what: &str) {
    let listed = flags_from_help(help);
    assert!(listed.len() > 10, "{what}: no flags read from {help}");
    for (name, arity) in &listed {
        let f = table
            .iter()
            .find(|f| f.long == name)
            .unwrap_or_else(|| panic!("{what}: --{name} is missing from the table"));
        let takes = f.arity == Arity::Value;
        assert_eq!(takes, *arity == Arity::Value, "{what}: --{name}");
    }
    for f in table {
        assert!(
            listed.iter().any(|(n, _)| n == f.long),
            "{what}: --{} is not the binary's",
            f.long
        );
    }
}

/// The binaries examples/kube-testenv builds, when built.
fn built(name: &str) -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME")?;
    let cache = std::path::Path::new(&home).join(".cache/migrate-kube-testenv");
    std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .find(|p| p.is_file())
}

fn run(bin: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(bin).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_global_tables_are_the_flags_the_built_kubectl_and_helm_print() {
    let mut checked = 0;
    if let Some(kubectl) = built("kubectl") {
        let help = run(&kubectl, &["options"]);
        table_matches_help(
            command_line::KUBECTL_GLOBAL_FLAGS
                .iter()
                .filter(|f| f.long != "help")
                .copied()
                .collect::<Vec<_>>()
                .as_slice(),
            &help,
            "kubectl options",
        );
        checked += 1;
    }
    if let Some(helm) = built("helm") {
        let help = run(&helm, &["--help"]);
        let flags = help.split("Flags:").nth(1).unwrap_or(&help);
        let flags = flags.split("Use \"").next().unwrap_or(flags);
        table_matches_help(command_line::HELM_GLOBAL_FLAGS, flags, "helm --help");
        checked += 1;
    }
    if checked == 0 {
        eprintln!("skipped: no kubectl or helm built under ~/.cache/migrate-kube-testenv");
    }
}
