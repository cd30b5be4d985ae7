//! The background-tier operator (CONTRACT.md §7): runs background migrations one
//! at a time, each in a Job, from the image the index ConfigMap names.
//!
//! The decision of what to do next is a pure function ([`decide()`]) of the
//! index, the ledger and the Jobs that exist (as a kube-runtime reflector
//! keeps them, [`OwnedJobs`]: no LIST per reconcile); the reconciler only
//! carries it out. The Job itself is built from typed k8s-openapi structs
//! ([`job_for`]). That keeps every rule testable without a cluster:
//!
//! - pending work is the index order minus recorded minus revoked;
//! - strictly one Job at a time, in index order; while any of its Jobs is
//!   active no other starts, whatever the index or the ledger says; a
//!   running Job (even one created before a restart) is adopted, never
//!   duplicated;
//! - a failed Job is retried with exponential backoff up to a limit, then a
//!   `failed` entry is ensured and the slug is not retried again (only a
//!   manual `ONLY=<slug>` run re-runs it);
//! - a corrupt ledger entry stops the queue at that slug: the operator does
//!   not guess; it watches the ledger, so a repair resumes the queue at once;
//! - Jobs are owned by nothing (a label finds them), bounded in time and
//!   resources, and the attempts they made are remembered in the status
//!   ConfigMap, so neither the garbage collector nor a Job's TTL resets a
//!   slug's count;
//! - what it does is said: an Event per Job and outcome, a condition (in
//!   the status ConfigMap, and on a `MigrationLedger`), metrics.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cache;
pub mod client;
pub mod conditions;
pub mod controller;
pub mod decide;
pub mod job;
pub mod leader;
pub mod metrics;
pub mod reconcile;
pub mod rights;
pub mod status;

pub use cache::{CacheError, OwnedJobs, owned_selector};
pub use conditions::{ConditionReporter, CrdConditions, OPERATOR_CONDITION};
pub use controller::run_controller;
pub use decide::{Decision, JobState, JobView, Retries, decide};
pub use job::{
    JobBounds, JobError, JobPod, LedgerObject, OperatorConfig, STATUS_NAME, default_resources,
    job_for, job_name, parse_job_pod, parse_resources,
};
pub use leader::{Leadership, Refusal};
pub use metrics::{Metrics, Summary};
pub use migrate_shared::index::{Index, IndexError, index_configmap, index_keys};
pub use reconcile::{
    Context, OperatorError, error_policy, failed, index_missing, is_forbidden, missing_rights,
    reconcile, summarize,
};
pub use status::StatusStore;

/// The operator's name: the manager its Jobs are labelled with, the
/// reporter of its Events, and the default name of its leader Lease.
pub const OPERATOR_NAME: &str = "cozystack-migrations-operator";

/// Label on every Job the operator creates.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", OPERATOR_NAME);
/// Label naming the slug a Job runs.
pub const SLUG_LABEL: &str = "migrations.cozystack.io/slug";
/// Label with the attempt number of a Job.
pub const ATTEMPT_LABEL: &str = "migrations.cozystack.io/attempt";
