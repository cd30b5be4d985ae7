//! The inputs of `migrate adopt --helm-history` / `--helm-release`: the
//! platform's Helm release history as a file, stdin, or what `helm history`
//! prints. Only reading happens here; what the history means is
//! migration-core's (`seeding::adoption_with`).

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use migration_core::seeding::{HelmHistory, MAX_INPUT_BYTES};

use super::Failure;
use super::args::ClusterArgs;

/// How long `helm history` may take: it reads a few Secrets.
const HELM_TIMEOUT: Duration = Duration::from_secs(120);

/// Helm keeps at most `--history-max` revisions; ask for all it kept.
const HELM_MAX_REVISIONS: &str = "100000";

/// The history in `file` (`-`: stdin). Unreadable or not `helm history -o
/// json`'s document: bad input naming the file (and the revision).
pub(crate) fn from_file(file: &Path) -> Result<HelmHistory, Failure> {
    let name = file.display().to_string();
    let mut bytes = Vec::new();
    let read = if name == "-" {
        std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
    } else {
        // Through the one reader: a FIFO or a device is refused, not read.
        use migration_core::tree::supplied::{self, Within};
        let refused = |why: String| Failure::bad_input(vec![format!("--helm-history {why}")]);
        let (opened, len) = supplied::open_regular(file, Within::Anywhere)
            .map_err(|e| refused(e.to_string()))?
            .ok_or_else(|| refused(format!("{name}: no such file")))?;
        supplied::read_opened(file, opened, len, MAX_INPUT_BYTES, &mut bytes)
            .map_err(|e| refused(e.to_string()))?;
        Ok(bytes.len())
    };
    read.map_err(|e| Failure::bad_input(vec![format!("--helm-history {name}: {e}")]))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(Failure::bad_input(vec![format!(
            "--helm-history {name}: above the limit of {MAX_INPUT_BYTES} bytes"
        )]));
    }
    let source = if name == "-" {
        "--helm-history - (stdin)".to_owned()
    } else {
        name
    };
    HelmHistory::parse_helm_json(&source, &bytes)
        .map_err(|e| Failure::bad_input(vec![e.to_string()]))
}

/// What `helm history NAME -n NAMESPACE -o json` says of `release`
/// (`NAMESPACE/NAME`), on the command's cluster. `Ok(None)` with a note
/// when Helm has no such release (no history is no refusal: the slots it
/// would answer rerun); any other failure of `helm` is an environment
/// error, since what was asked for could not be read.
pub(crate) async fn from_helm(
    helm: &Path,
    release: &str,
    cluster: &ClusterArgs,
) -> Result<(Option<HelmHistory>, Option<String>), Failure> {
    let Some((namespace, name)) = release
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        return Err(Failure::bad_input(vec![format!(
            "--helm-release {release:?}: expected NAMESPACE/NAME"
        )]));
    };
    let mut command = tokio::process::Command::new(helm);
    command.args([
        "history",
        name,
        "--namespace",
        namespace,
        "--output",
        "json",
        "--max",
        HELM_MAX_REVISIONS,
    ]);
    if let Some(kubeconfig) = &cluster.kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    if let Some(context) = &cluster.context {
        command.arg("--kube-context").arg(context);
    }
    command
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let what = format!("{} history {name} --namespace {namespace}", helm.display());
    let output = tokio::time::timeout(HELM_TIMEOUT, command.output())
        .await
        .map_err(|_| {
            Failure::environment(vec![format!(
                "{what}: no answer in {} s",
                HELM_TIMEOUT.as_secs()
            )])
        })?
        .map_err(|e| Failure::environment(vec![format!("{what}: cannot run: {e}")]))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        // Helm's wording for a release it has no record of.
        if stderr.contains("release: not found") {
            return Ok((
                None,
                Some(format!(
                    "helm history {namespace}/{name}: Helm has no such release; no history answers"
                )),
            ));
        }
        return Err(Failure::environment(vec![format!(
            "{what}: {}: {}",
            output.status,
            stderr.trim()
        )]));
    }
    let source = format!("helm history {namespace}/{name}");
    HelmHistory::parse_helm_json(&source, &output.stdout)
        .map(|h| (Some(h), None))
        .map_err(|e| Failure::bad_input(vec![e.to_string()]))
}
