//! The pure decision: what the operator does next, from the index, the
//! ledger and the Jobs that exist.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use migration_core::give_up::FailedAttempt;
use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::{EntryState, Slug, Timestamp};

use crate::*;

/// What a Job says about its run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Still running (or pending).
    Active,
    /// Completed successfully at the given time.
    Succeeded(Timestamp),
    /// Failed at the given time, with the controller's message.
    Failed(Timestamp, String),
}

/// The part of a Job the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    /// The Job's name.
    pub name: String,
    /// The slug it runs.
    pub slug: Slug,
    /// Its attempt number.
    pub attempt: u32,
    /// Its state.
    pub state: JobState,
    /// The image its container ran.
    pub image: Option<String>,
    /// The end of its output, when the operator could read it (the failed
    /// container's termination message).
    pub output_tail: Option<String>,
}

impl JobView {
    /// Reads a Job created by the operator (`None` for a Job without our labels).
    pub fn from_job(job: &Job) -> Option<JobView> {
        let labels = job.metadata.labels.as_ref()?;
        let slug = Slug::parse(labels.get(SLUG_LABEL)?).ok()?;
        let attempt = labels
            .get(ATTEMPT_LABEL)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1);
        let status = job.status.clone().unwrap_or_default();
        let conditions = status.conditions.unwrap_or_default();
        let finished = |kind: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == kind && c.status == "True")
                .map(|c| {
                    let at = c
                        .last_transition_time
                        .as_ref()
                        .map(|t| Timestamp::from_unix(t.0.as_second()))
                        .unwrap_or(Timestamp::from_unix(0));
                    // "DeadlineExceeded: Job was active longer than ...":
                    // the reason tells a hung script from a failed one.
                    let said = match (c.reason.as_deref(), c.message.as_deref()) {
                        (Some(r), Some(m)) if !r.is_empty() && !m.is_empty() => {
                            format!("{r}: {m}")
                        }
                        (Some(r), _) if !r.is_empty() => r.to_owned(),
                        (_, m) => m.unwrap_or_default().to_owned(),
                    };
                    (at, said)
                })
        };
        let state = if let Some((at, _)) = finished("Complete") {
            JobState::Succeeded(at)
        } else if let Some((at, message)) = finished("Failed") {
            JobState::Failed(at, message)
        } else {
            JobState::Active
        };
        let image = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers.first())
            .and_then(|c| c.image.clone());
        Some(JobView {
            name: job.name_any(),
            slug,
            attempt,
            state,
            image,
            output_tail: None,
        })
    }
}

/// Retry settings for failed Jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// Jobs tried per slug before giving up.
    pub limit: u32,
    /// Wait after the first failure; doubles after each further one.
    pub base: Duration,
    /// Longest wait.
    pub cap: Duration,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            limit: 3,
            base: Duration::from_secs(30),
            cap: Duration::from_secs(600),
        }
    }
}

impl Retries {
    /// The wait after `failures` failures.
    pub fn backoff(&self, failures: u32) -> Duration {
        self.base
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(self.cap)
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing is pending.
    Idle,
    /// A Job is running for this slug; wait for it (adopting it if it
    /// predates this process).
    Wait {
        /// The slug.
        slug: Slug,
        /// The running Job.
        job: String,
    },
    /// Create the Job for this attempt.
    Create {
        /// The slug.
        slug: Slug,
        /// The attempt number (1-based).
        attempt: u32,
    },
    /// The last attempt failed; wait until the backoff has passed.
    Backoff {
        /// The slug.
        slug: Slug,
        /// The last failed Job.
        job: String,
        /// When the next attempt may start.
        until: Timestamp,
        /// Failures so far.
        failures: u32,
        /// Why the last attempt counts as failed: the Job's own reason,
        /// or that it succeeded without recording anything.
        cause: String,
    },
    /// The retry limit is reached: ensure a `failed` entry, then move on.
    GiveUp {
        /// The slug.
        slug: Slug,
        /// Failed attempts.
        failures: u32,
        /// The last failed attempt: what it ran and why it failed.
        last: FailedAttempt,
    },
    /// The ledger entry for this slug cannot be read: stop, do not guess.
    Blocked {
        /// The slug.
        slug: Slug,
        /// Why.
        reason: String,
    },
}

/// Decides the next step. Pure: same inputs, same decision.
///
/// Serial means serial: while any Job of the operator is active, the only
/// decision is to wait for it, whatever the index says now (its slug
/// revoked, moved or gone) and whatever the ledger says (the runner records
/// its entry before its pod ends: the next Job starts when the previous one
/// has finished, not on its record).
pub fn decide(
    index: &Index,
    ledger: Option<&LedgerSnapshot>,
    jobs: &[JobView],
    now: Timestamp,
    retries: &Retries,
) -> Decision {
    // The oldest attempt first, so the answer does not depend on list order.
    if let Some(active) = jobs
        .iter()
        .filter(|j| j.state == JobState::Active)
        .min_by(|a, b| a.name.cmp(&b.name))
    {
        return Decision::Wait {
            slug: active.slug.clone(),
            job: active.name.clone(),
        };
    }
    for slug in &index.slugs {
        if index.revoked.contains(slug) {
            continue;
        }
        // A `not-yet` answer asks to run again next time: here, once the index
        // names another release's image than the one that answered. Jobs that
        // ended before that answer belong to it, not to the new attempt.
        let mut answered_at = None;
        match ledger.and_then(|l| l.record(slug)) {
            Some(Record::Entry(e))
                if e.state == EntryState::NotYet
                    && e.image.as_deref().is_some_and(|i| i != index.image) =>
            {
                answered_at = Some(e.at);
            }
            Some(Record::Entry(_)) => continue,
            Some(Record::Corrupt(c)) => {
                return Decision::Blocked {
                    slug: slug.clone(),
                    reason: c.to_string(),
                };
            }
            None => {}
        }
        let mine: Vec<&JobView> = jobs
            .iter()
            .filter(|j| &j.slug == slug)
            .filter(|j| match (&j.state, answered_at) {
                (JobState::Failed(at, _) | JobState::Succeeded(at), Some(answer)) => *at > answer,
                _ => true,
            })
            .collect();
        if let Some(active) = mine.iter().find(|j| j.state == JobState::Active) {
            return Decision::Wait {
                slug: slug.clone(),
                job: active.name.clone(),
            };
        }
        // A Job that succeeded without the runner recording anything did not
        // do the work as far as anyone can prove: it counts as a failure.
        let failures: Vec<(Timestamp, u32, FailedAttempt)> = mine
            .iter()
            .filter_map(|j| {
                let (at, reason) = match &j.state {
                    JobState::Failed(at, message) => (*at, message.clone()),
                    JobState::Succeeded(at) => (*at, "succeeded but recorded nothing".to_owned()),
                    JobState::Active => return None,
                };
                let attempt = FailedAttempt {
                    job: j.name.clone(),
                    image: j.image.clone(),
                    reason,
                    output_tail: j.output_tail.clone(),
                };
                Some((at, j.attempt, attempt))
            })
            .collect();
        let count = u32::try_from(failures.len()).unwrap_or(u32::MAX);
        // The latest by time, then by attempt (Jobs finished in one second).
        let last = failures
            .iter()
            .max_by_key(|(at, attempt, _)| (*at, *attempt))
            .cloned();
        // Over every Job of the slug, the earlier answer's too: a Job name
        // holds the attempt number and must not be reused.
        let next_attempt = jobs
            .iter()
            .filter(|j| &j.slug == slug)
            .map(|j| j.attempt)
            .max()
            .unwrap_or(0)
            + 1;
        return match last {
            None => Decision::Create {
                slug: slug.clone(),
                attempt: next_attempt,
            },
            Some((_, _, last)) if count >= retries.limit => Decision::GiveUp {
                slug: slug.clone(),
                failures: count,
                last,
            },
            Some((at, _, last)) => {
                let until = at.plus(retries.backoff(count));
                if now < until {
                    Decision::Backoff {
                        slug: slug.clone(),
                        job: last.job,
                        until,
                        failures: count,
                        cause: last.reason,
                    }
                } else {
                    Decision::Create {
                        slug: slug.clone(),
                        attempt: next_attempt,
                    }
                }
            }
        };
    }
    Decision::Idle
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::LedgerEntry;
    use migration_core::testing::fixtures::{s, snapshot_of};

    fn index(slugs: &[&str], revoked: &[&str]) -> Index {
        Index {
            image: "img".into(),
            tree: "/migrations".into(),
            slugs: slugs.iter().map(|x| s(x)).collect(),
            revoked: revoked.iter().map(|x| s(x)).collect(),
            batches: Default::default(),
        }
    }

    fn job(slug: &str, attempt: u32, state: JobState) -> JobView {
        JobView {
            name: job_name(&s(slug), attempt),
            slug: s(slug),
            attempt,
            state,
            image: Some(format!("img-{attempt}")),
            output_tail: None,
        }
    }

    const NOW: Timestamp = Timestamp::from_unix(10_000);

    fn not_yet_by(image: &str, at: i64) -> LedgerSnapshot {
        let mut e = LedgerEntry::new(EntryState::NotYet, Timestamp::from_unix(at));
        e.reason = Some(migration_core::run::NOT_YET.into());
        e.message = Some("not ready".into());
        e.image = Some(image.into());
        let data = [("m.a".to_owned(), e.encode())];
        LedgerSnapshot::from_raw_data(data.iter().map(|(k, v)| (k.as_str(), v.as_str())), None)
    }

    #[test]
    fn a_not_yet_answer_waits_for_the_next_release_and_then_runs_again() {
        let answered = not_yet_by("img", 500);
        let old_job = job("a", 1, JobState::Succeeded(Timestamp::from_unix(499)));
        let same_release = decide(
            &index(&["a"], &[]),
            Some(&answered),
            std::slice::from_ref(&old_job),
            NOW,
            &Retries::default(),
        );
        assert_eq!(
            same_release,
            Decision::Idle,
            "not again under the image that answered"
        );
        let mut next = index(&["a"], &[]);
        next.image = "img-next".into();
        let d = decide(&next, Some(&answered), &[old_job], NOW, &Retries::default());
        assert_eq!(
            d,
            Decision::Create {
                slug: s("a"),
                attempt: 2
            },
            "a new release runs it again; the Job that answered is no failure of this attempt"
        );
    }

    #[test]
    fn the_first_pending_slug_in_index_order_gets_the_only_job() {
        let d = decide(
            &index(&["b", "a", "c"], &[]),
            Some(&snapshot_of(&[("b", EntryState::Ok)])),
            &[],
            NOW,
            &Retries::default(),
        );
        assert_eq!(
            d,
            Decision::Create {
                slug: s("a"),
                attempt: 1
            }
        );
    }

    #[test]
    fn revoked_and_recorded_slugs_never_get_a_job() {
        let l = snapshot_of(&[("a", EntryState::Failed), ("b", EntryState::Revoked)]);
        assert_eq!(
            decide(
                &index(&["a", "b", "bad"], &["bad"]),
                Some(&l),
                &[],
                NOW,
                &Retries::default()
            ),
            Decision::Idle
        );
    }

    #[test]
    fn a_running_job_is_waited_for_not_duplicated() {
        let d = decide(
            &index(&["a", "b"], &[]),
            None,
            &[job("a", 1, JobState::Active)],
            NOW,
            &Retries::default(),
        );
        assert_eq!(
            d,
            Decision::Wait {
                slug: s("a"),
                job: "migrate-a-1".into()
            }
        );
    }

    #[test]
    fn a_failure_backs_off_exponentially_then_retries_then_gives_up() {
        let r = Retries {
            limit: 3,
            base: Duration::from_secs(30),
            cap: Duration::from_secs(600),
        };
        let i = index(&["a", "b"], &[]);
        let f1 = job("a", 1, JobState::Failed(NOW, "boom".into()));
        assert_eq!(
            decide(&i, None, std::slice::from_ref(&f1), NOW, &r),
            Decision::Backoff {
                slug: s("a"),
                job: "migrate-a-1".into(),
                until: NOW.plus(Duration::from_secs(30)),
                failures: 1,
                cause: "boom".into(),
            }
        );
        let later = NOW.plus(Duration::from_secs(31));
        assert_eq!(
            decide(&i, None, std::slice::from_ref(&f1), later, &r),
            Decision::Create {
                slug: s("a"),
                attempt: 2
            }
        );
        let f2 = job("a", 2, JobState::Failed(later, "boom".into()));
        assert_eq!(
            decide(&i, None, &[f1.clone(), f2.clone()], later, &r),
            Decision::Backoff {
                slug: s("a"),
                job: "migrate-a-2".into(),
                until: later.plus(Duration::from_secs(60)),
                failures: 2,
                cause: "boom".into(),
            }
        );
        let mut f3 = job("a", 3, JobState::Failed(later, "last words".into()));
        f3.output_tail = Some("kubectl: boom".into());
        assert_eq!(
            decide(&i, None, &[f1, f2, f3], later, &r),
            Decision::GiveUp {
                slug: s("a"),
                failures: 3,
                last: FailedAttempt {
                    job: "migrate-a-3".into(),
                    image: Some("img-3".into()),
                    reason: "last words".into(),
                    output_tail: Some("kubectl: boom".into()),
                }
            },
            "the last attempt is the one given up on, with the image it ran"
        );
    }

    #[test]
    fn a_job_that_succeeded_without_a_record_counts_as_a_failure_and_says_so() {
        let d = decide(
            &index(&["a"], &[]),
            None,
            &[job("a", 1, JobState::Succeeded(NOW))],
            NOW,
            &Retries::default(),
        );
        assert!(
            matches!(&d, Decision::Backoff { failures: 1, cause, .. } if cause == "succeeded but recorded nothing"),
            "{d:?}"
        );
    }

    #[test]
    fn no_job_starts_while_another_is_active_whatever_the_index_and_the_ledger_say() {
        let running = [job("a", 1, JobState::Active)];
        let wait = Decision::Wait {
            slug: s("a"),
            job: "migrate-a-1".into(),
        };
        // Revoked, moved behind another slug, gone from the index, already recorded ok.
        for (i, ledger) in [
            (index(&["a", "b"], &["a"]), None),
            (index(&["b", "a"], &[]), None),
            (index(&["b"], &[]), None),
            (
                index(&["a", "b"], &[]),
                Some(snapshot_of(&[("a", EntryState::Ok)])),
            ),
        ] {
            assert_eq!(
                decide(&i, ledger.as_ref(), &running, NOW, &Retries::default()),
                wait,
                "{i:?}"
            );
        }
    }

    #[test]
    fn a_corrupt_entry_blocks_the_queue() {
        let l = LedgerSnapshot::from_raw_data([("m.a", "{")], None);
        assert!(matches!(
            decide(
                &index(&["a", "b"], &[]),
                Some(&l),
                &[],
                NOW,
                &Retries::default()
            ),
            Decision::Blocked { .. }
        ));
    }
}
