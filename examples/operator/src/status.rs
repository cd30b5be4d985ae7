//! The status ConfigMap: what the operator says about itself (a condition
//! and the queue's figures, for either ledger) and the history of finished
//! attempts its retries count.
//!
//! The history lives here rather than only in the Jobs because Jobs do not
//! last: `ttlSecondsAfterFinished` deletes them, and so may a person. Were
//! the failed Jobs the only count, a slug whose Jobs were deleted would be
//! retried from attempt 1 for ever. The ConfigMap is owned by nothing (no
//! garbage collection), created by the operator on its first write, and
//! outlives `helm uninstall` as the ledger does.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use migration_core::{Slug, Timestamp};
use serde_json::{Value, json};

use crate::{JobState, JobView, MANAGED_BY};

/// The key of the operator's condition and figures.
pub const STATUS_KEY: &str = "status";
/// The prefix of a finished attempt's key: `j.<job name>`.
pub const JOB_PREFIX: &str = "j.";

/// The status ConfigMap of one operator, with what this process last read
/// or wrote of it, so that an unchanged status costs no request.
pub struct StatusStore {
    api: Api<ConfigMap>,
    name: String,
    known: Mutex<Option<BTreeMap<String, String>>>,
}

impl std::fmt::Debug for StatusStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StatusStore {
    /// The ConfigMap `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        StatusStore {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            known: Mutex::new(None),
        }
    }

    fn known(&self) -> Option<BTreeMap<String, String>> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn remember(&self, data: BTreeMap<String, String>) {
        *self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(data);
    }

    /// Forgets what was read, so the next [`StatusStore::data`] reads
    /// again (a new leadership term must not trust an older one's view).
    pub fn forget(&self) {
        *self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// The ConfigMap's data: read once, then as this process wrote it (it
    /// is the only writer while it leads). Absent: empty.
    pub async fn data(&self) -> Result<BTreeMap<String, String>, kube::Error> {
        if let Some(data) = self.known() {
            return Ok(data);
        }
        let data = match self.api.get_opt(&self.name).await? {
            Some(cm) => cm.data.unwrap_or_default(),
            None => BTreeMap::new(),
        };
        self.remember(data.clone());
        Ok(data)
    }

    /// Sets (`Some`) or removes (`None`) keys, writing only when something
    /// changes; creates the ConfigMap when it is absent.
    pub async fn update(
        &self,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<bool, kube::Error> {
        let mut data = self.data().await?;
        let before = data.clone();
        for (key, value) in changes {
            match value {
                Some(v) => data.insert(key.clone(), v.clone()),
                None => data.remove(key),
            };
        }
        if data == before {
            return Ok(false);
        }
        let patch = json!({ "data": changes });
        let written = match self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        labels: Some(BTreeMap::from([(
                            MANAGED_BY.0.to_owned(),
                            MANAGED_BY.1.to_owned(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    data: Some(data.clone()),
                    ..ConfigMap::default()
                };
                self.api.create(&PostParams::default(), &cm).await
            }
            other => other,
        };
        match written {
            Ok(cm) => {
                self.remember(cm.data.unwrap_or_default());
                Ok(true)
            }
            Err(e) => {
                self.forget();
                Err(e)
            }
        }
    }
}

/// A finished attempt as the history keeps it.
pub fn encode_attempt(job: &JobView) -> Option<String> {
    let (state, at, message) = match &job.state {
        JobState::Active => return None,
        JobState::Succeeded(at) => ("succeeded", at, None),
        JobState::Failed(at, message) => ("failed", at, Some(message.clone())),
    };
    let mut v = json!({
        "slug": job.slug.as_str(),
        "attempt": job.attempt,
        "state": state,
        "at": at.to_string(),
    });
    let mut put = |k: &str, x: &Option<String>| {
        if let Some(x) = x {
            v[k] = Value::String(x.clone());
        }
    };
    put("message", &message);
    put("image", &job.image);
    put("tail", &job.output_tail);
    Some(v.to_string())
}

/// Reads back a history record; `None` for one this version cannot read,
/// which the caller reports (a lost record would under-count attempts).
pub fn decode_attempt(key: &str, raw: &str) -> Option<JobView> {
    let name = key.strip_prefix(JOB_PREFIX)?;
    let v: Value = serde_json::from_str(raw).ok()?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let slug = Slug::parse(&text("slug")?).ok()?;
    let attempt = u32::try_from(v.get("attempt")?.as_u64()?).ok()?;
    let at = Timestamp::parse(&text("at")?).ok()?;
    let state = match text("state")?.as_str() {
        "succeeded" => JobState::Succeeded(at),
        "failed" => JobState::Failed(at, text("message").unwrap_or_default()),
        _ => return None,
    };
    Some(JobView {
        name: name.to_owned(),
        slug,
        attempt,
        state,
        image: text("image"),
        output_tail: text("tail"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::testing::fixtures::s;

    #[test]
    fn a_finished_attempt_reads_back_as_recorded_and_a_running_one_is_not_recorded() {
        let failed = JobView {
            name: "migrate-a-2".into(),
            slug: s("a"),
            attempt: 2,
            state: JobState::Failed(
                Timestamp::from_unix(1_786_529_040),
                "DeadlineExceeded".into(),
            ),
            image: Some("img@sha256:1".into()),
            output_tail: Some("last line".into()),
        };
        let raw = encode_attempt(&failed).unwrap();
        assert_eq!(decode_attempt("j.migrate-a-2", &raw), Some(failed.clone()));
        let running = JobView {
            state: JobState::Active,
            ..failed
        };
        assert_eq!(encode_attempt(&running), None);
        assert_eq!(decode_attempt("j.x", "{\"slug\":\"a\"}"), None);
    }
}
