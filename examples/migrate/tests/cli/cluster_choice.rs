//! `--kubeconfig`, `--context` and `KUBECONFIG` choose one cluster for the
//! whole run: the ledger's and the scripts' (`kubectl`, `helm`, `flux`),
//! or the run refuses before anything runs (issue 38).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::common::tripwire::Scratch;
use crate::common::{assert_contains_all, parse, shells};

/// A fake cluster command that records its name, the `KUBECONFIG` it was
/// given and a copy of that list's files as they were when it ran (the
/// run removes what it generated), one line per call.
const RECORDER: &str = r#"#!/bin/sh
name=$(basename "$0")
copies= n=0
IFS=:
for f in ${KUBECONFIG:-}; do
    n=$((n + 1))
    cp "$f" "$SCRATCH/seen-$name-$n" 2>/dev/null && copies="$copies${copies:+:}$SCRATCH/seen-$name-$n"
done
printf '%s %s %s\n' "$name" "${KUBECONFIG:-<unset>}" "$copies" >> "$SCRATCH/calls"
"#;

/// A kubeconfig with two contexts, `prod` current and `staging`.
fn two_contexts(dir: &Path) -> PathBuf {
    let path = dir.join("two-contexts.kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\n\
         clusters:\n- name: prod\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         - name: staging\n  cluster: {server: 'https://127.0.0.1:2'}\n\
         users:\n- name: u\n  user: {}\n\
         contexts:\n- name: prod\n  context: {cluster: prod, user: u}\n\
         - name: staging\n  context: {cluster: staging, user: u}\n\
         current-context: prod\n",
    )
    .unwrap();
    path
}

/// The context kubectl picks under `kubeconfig` (a `KUBECONFIG` list): the
/// real kubectl's answer when one is installed, else the merge rule it
/// follows (the first file that sets `current-context` wins).
fn current_context(kubeconfig: &str) -> String {
    if let Ok(out) = std::process::Command::new("kubectl")
        .args(["config", "current-context"])
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        && out.status.success()
    {
        return String::from_utf8(out.stdout).unwrap().trim().to_owned();
    }
    kubeconfig
        .split(':')
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .find_map(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("current-context:"))
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
        })
        .unwrap_or_default()
}

/// A world whose one migration calls kubectl, helm and flux, each a
/// recorder.
fn world() -> (shells::Shell, Scratch) {
    let (shell, s) = Scratch::dash(
        "abort",
        &[("calls-all", "kubectl get ns\nhelm list\nflux get all")],
    );
    for name in ["kubectl", "helm", "flux"] {
        s.write_exec(&s.bin().join(name), RECORDER);
    }
    (shell, s)
}

/// The `KUBECONFIG` each of kubectl, helm and flux was given, with the
/// copies of its files.
fn given(s: &Scratch) -> Vec<(String, String, String)> {
    s.calls()
        .iter()
        .map(|l| {
            let mut words = l.splitn(3, ' ').map(str::to_owned);
            let mut next = || words.next().unwrap_or_default();
            (next(), next(), next())
        })
        .collect()
}

#[test]
fn the_context_flag_reaches_every_cluster_command_of_the_scripts() {
    let (shell, s) = world();
    let kubeconfig = two_contexts(s.path());
    for (how, flags, env) in [
        (
            "--kubeconfig --context",
            vec![
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--context",
                "staging",
            ],
            None,
        ),
        (
            "KUBECONFIG and --context",
            vec!["--context", "staging"],
            Some(&kubeconfig),
        ),
    ] {
        std::fs::remove_file(s.path().join("calls")).ok();
        crate::common::empty_file_ledger(&s.ledger_path());
        let mut cmd = s.command(&shell, "ok", "connection-refused");
        cmd.args(&flags).env_remove("KUBECONFIG");
        if let Some(k) = env {
            cmd.env("KUBECONFIG", k);
        }
        let (code, doc, stderr) = parse(cmd.output().unwrap());
        assert_eq!(code, 0, "{how}: {doc:#} {stderr}");
        let given = given(&s);
        let names: Vec<&str> = given.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["kubectl", "helm", "flux"], "{how}");
        for (name, k, copies) in &given {
            assert_eq!(
                current_context(copies),
                "staging",
                "{how}: {name} was given {k}"
            );
            assert!(
                k.split(':').any(|f| Path::new(f) == kubeconfig),
                "{how}: {name} was given {k}, without the kubeconfig's clusters"
            );
        }
    }
}

#[test]
fn the_kubeconfig_flag_alone_reaches_the_scripts_with_its_own_current_context() {
    let (shell, s) = world();
    let kubeconfig = two_contexts(s.path());
    let mut cmd = s.command(&shell, "ok", "connection-refused");
    cmd.args(["--kubeconfig", kubeconfig.to_str().unwrap()])
        .env("KUBECONFIG", "/nonexistent/other.kubeconfig");
    let (code, doc, stderr) = parse(cmd.output().unwrap());
    assert_eq!(code, 0, "{doc:#} {stderr}");
    for (name, k, copies) in given(&s) {
        assert_eq!(k, kubeconfig.to_str().unwrap(), "{name}");
        assert_eq!(current_context(&copies), "prod", "{name}");
    }
}

#[test]
fn a_context_the_kubeconfig_does_not_have_is_refused_before_any_script_runs() {
    let (shell, s) = world();
    let kubeconfig = two_contexts(s.path());
    for (flags, env, needles) in [
        (
            vec![
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--context",
                "stagign",
            ],
            None,
            vec!["--context stagign", "no such context", "prod, staging"],
        ),
        (
            vec!["--context", "stagign"],
            Some(kubeconfig.clone()),
            vec!["--context stagign", "no such context"],
        ),
        (
            vec!["--kubeconfig", "/nonexistent/k.yaml"],
            None,
            vec!["--kubeconfig /nonexistent/k.yaml"],
        ),
    ] {
        let mut cmd = s.command(&shell, "ok", "connection-refused");
        cmd.args(&flags).env_remove("KUBECONFIG");
        if let Some(k) = &env {
            cmd.env("KUBECONFIG", k);
        }
        let (code, doc, stderr) = parse(cmd.output().unwrap());
        assert_eq!(code, 2, "{flags:?}: {doc:#} {stderr}");
        assert_contains_all(&doc.to_string(), &needles);
        assert!(
            s.calls().is_empty(),
            "{flags:?}: a script ran: {:?}",
            s.calls()
        );
        assert!(s.entries().is_empty(), "{flags:?}");
    }
}
