//! One cluster for the whole run: `--kubeconfig`, `--context` and
//! `KUBECONFIG` choose the ledger's cluster (the options its ledger is
//! opened with, [`migrate_shared::OpenOptions`]) and, here, the cluster every
//! script's `kubectl`, `helm` and `flux` talk to. Without this the flags
//! reached the ledger only: a `--context staging` run wrote its ledger on
//! staging while its scripts changed the kubeconfig's current context
//! (issue 38).
//!
//! The scripts get `KUBECONFIG`: the `--kubeconfig` file (or the files
//! kubectl would read), preceded, when a context is chosen, by a generated
//! file that sets only `current-context`. Every client-go reader (kubectl,
//! helm, flux) merges a `KUBECONFIG` list and takes `current-context` from
//! the first file that sets it, so the scripts see the kubeconfig's
//! clusters and users with the chosen context current, without the
//! kubeconfig being copied or rewritten.

use std::ffi::OsString;
use std::path::PathBuf;

use super::Failure;
use super::args::ClusterArgs;

/// The scripts' cluster: the `KUBECONFIG` they get, and the generated file
/// it names first (removed when this is dropped, at the end of the run).
#[derive(Debug)]
pub struct ScriptCluster {
    kubeconfig: OsString,
    _chosen: Option<tempfile::NamedTempFile>,
}

impl ScriptCluster {
    /// The environment every script gets for it.
    pub fn env(&self) -> Vec<(String, OsString)> {
        vec![("KUBECONFIG".to_owned(), self.kubeconfig.clone())]
    }
}

/// The scripts' cluster for `cluster`, or `None` when neither flag is
/// given (the scripts inherit `KUBECONFIG` as the ledger reads it). Refuses
/// what it cannot honour, before anything runs: a `--kubeconfig` that
/// cannot be read, a context no kubeconfig file has (named with the ones it
/// has), a path a `KUBECONFIG` list cannot hold.
pub fn for_scripts(cluster: &ClusterArgs) -> Result<Option<ScriptCluster>, Failure> {
    let refuse = |problem: String| Failure::bad_input(vec![problem]);
    if cluster.kubeconfig.is_none() && cluster.context.is_none() {
        return Ok(None);
    }
    let files: Vec<PathBuf> = match &cluster.kubeconfig {
        Some(path) => vec![
            std::path::absolute(path)
                .map_err(|e| refuse(format!("--kubeconfig {}: {e}", path.display())))?,
        ],
        None => kubectl_files(),
    };
    let mut contexts: Vec<String> = Vec::new();
    for file in &files {
        // kubectl skips a missing file of a KUBECONFIG list; --kubeconfig
        // must exist.
        if cluster.kubeconfig.is_none() && !file.exists() {
            continue;
        }
        let read = kube::config::Kubeconfig::read_from(file).map_err(|e| {
            refuse(match &cluster.kubeconfig {
                Some(_) => format!("--kubeconfig {}: {e}", file.display()),
                None => format!("kubeconfig {} (for --context): {e}", file.display()),
            })
        })?;
        contexts.extend(read.contexts.into_iter().map(|c| c.name));
    }
    let joined = |files: &[PathBuf]| {
        std::env::join_paths(files).map_err(|e| {
            refuse(format!(
                "a KUBECONFIG list cannot name {}: {e}",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    };
    let Some(context) = &cluster.context else {
        return Ok(Some(ScriptCluster {
            kubeconfig: joined(&files)?,
            _chosen: None,
        }));
    };
    if !contexts.contains(context) {
        let read = files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        let has = if contexts.is_empty() {
            "it has none".to_owned()
        } else {
            format!("its contexts: {}", contexts.join(", "))
        };
        return Err(refuse(format!(
            "--context {context}: no such context in the kubeconfig {read} ({has}); the run would \
             write its ledger and run its scripts on a cluster it cannot name"
        )));
    }
    let chosen = chosen_context_file(context)
        .map_err(|e| Failure::environment(vec![format!("--context {context}: {e}")]))?;
    let mut list = vec![chosen.path().to_owned()];
    list.extend(files);
    Ok(Some(ScriptCluster {
        kubeconfig: joined(&list)?,
        _chosen: Some(chosen),
    }))
}

/// The files kubectl reads without `--kubeconfig`: the `KUBECONFIG` list,
/// else `~/.kube/config`.
fn kubectl_files() -> Vec<PathBuf> {
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        None => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".kube/config"))
            .into_iter()
            .collect(),
    }
}

/// A private kubeconfig that sets only `current-context` (the name quoted
/// as a JSON string, which YAML reads as written).
fn chosen_context_file(context: &str) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let mut file = tempfile::Builder::new()
        .prefix("migrate-context-")
        .suffix(".kubeconfig")
        .tempfile()?;
    let name = serde_json::to_string(context).map_err(std::io::Error::other)?;
    writeln!(
        file,
        "apiVersion: v1\nkind: Config\npreferences: {{}}\ncurrent-context: {name}"
    )?;
    file.flush()?;
    Ok(file)
}
