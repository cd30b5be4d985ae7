//! A failed command: its exit code, the kind of failure and what to tell
//! the user. Every error a command can meet converts into one, so that exit
//! codes are decided here and nowhere else.

use std::sync::Arc;

use migration_core::{LedgerError, LockedLedger, MigrateError, TreeError};

use migrate_repo::git::GitError;

use super::args::ClusterArgs;
use migrate_shared::exit;
use migrate_shared::{KubeOptions, LedgerSpec, OpenOptions};

/// A failed command.
#[derive(Debug)]
pub struct Failure {
    /// The process exit code (see [`migrate_shared::exit`]).
    pub code: u8,
    /// `bad-input`, `refused`, `environment`, `migration-failed`; empty when
    /// the command already printed the details as its output.
    pub kind: &'static str,
    /// One line per problem.
    pub problems: Vec<String>,
}

impl Failure {
    /// A failure to report.
    pub fn new(code: u8, kind: &'static str, problems: Vec<String>) -> Self {
        Failure {
            code,
            kind,
            problems,
        }
    }

    /// Bad input: usage, a tree that does not load, a bad argument.
    pub fn bad_input(problems: Vec<String>) -> Self {
        Failure::new(exit::BAD_INPUT, "bad-input", problems)
    }

    /// The ledger or the environment failed.
    pub fn environment(problems: Vec<String>) -> Self {
        Failure::new(exit::ENVIRONMENT, "environment", problems)
    }

    /// A failure whose details were already printed as the command's output.
    pub fn quiet(code: u8) -> Self {
        Failure {
            code,
            kind: "",
            problems: Vec::new(),
        }
    }
}

impl From<TreeError> for Failure {
    fn from(e: TreeError) -> Self {
        match e {
            TreeError::Invalid { root, problems } => Failure::bad_input(
                problems
                    .iter()
                    .map(|p| format!("{}: {p}", root.display()))
                    .collect(),
            ),
            other => Failure::bad_input(vec![other.to_string()]),
        }
    }
}

impl From<GitError> for Failure {
    fn from(e: GitError) -> Self {
        match e {
            GitError::Spawn { .. } => Failure::environment(vec![e.to_string()]),
            _ => Failure::bad_input(vec![e.to_string()]),
        }
    }
}

impl From<MigrateError> for Failure {
    fn from(e: MigrateError) -> Self {
        let (code, kind) = exit::of_migrate(&e);
        let problems = match e {
            MigrateError::Refused(plan) => plan.problems.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        };
        Failure::new(code, kind, problems)
    }
}

impl From<LedgerError> for Failure {
    fn from(e: LedgerError) -> Self {
        Failure::environment(vec![e.to_string()])
    }
}

/// Opens the ledger `spec` names, on the cluster `cluster` chooses (for the
/// `configmap:` and `crd:` ledgers); failing to is an environment failure,
/// but a spec that cannot name a ledger (a file ledger path that is a
/// device or a FIFO) is bad input.
pub async fn open(
    spec: &LedgerSpec,
    cluster: &ClusterArgs,
) -> Result<Arc<dyn LockedLedger>, Failure> {
    spec.check().map_err(|e| Failure::bad_input(vec![e]))?;
    let kube = KubeOptions {
        kubeconfig: cluster.kubeconfig.clone(),
        context: cluster.context.clone(),
    };
    let options = OpenOptions::for_spec(spec, kube).map_err(|e| Failure::environment(vec![e]))?;
    spec.open(&options)
        .await
        .map_err(|e| Failure::environment(vec![e]))
}
