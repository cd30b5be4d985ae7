//! The Secret a Kubernetes ledger keeps its failures' output tails in (issue 35, CONTRACT.md
//! §5.2): `<ledger>-output`, data key `m.<slug>` for an entry's tail and `f.<slug>` for a last
//! failure's, owned by the ledger object so it goes with it. Whoever may read the ledger object
//! reads the entry (slug, state, reason, attempts, image, the calls by command, verb and
//! resource) and where its output is; only who may read the Secret (the runner, the operator,
//! admins) reads the output itself.
//!
//! The tail is written before the ledger write that names it; a Secret write that fails does
//! not stop the ledger write: the entry still records the failure, and says that its tail was
//! not kept and why (fail closed: the output never lands in the ledger object instead). A tail
//! the ledger no longer names (the slug's next entry has none, or its last failure was removed
//! with its entry) is removed from the Secret after the ledger write landed; a removal that
//! fails only leaves a key nothing names, with a log warning.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, Patch};
use migration_core::kept_output::{self, KeptAt};
use migration_core::last_failure::LastFailure;
use migration_core::step::FailureNote;
use migration_core::{LedgerEntry, LedgerError, Slug, keys};

use crate::retry::{Attempts, Backoff, RetryPolicy};
use crate::{Class, classify, ledger_error, patch_params, post_params};

/// The Secret of one ledger.
#[derive(Clone)]
pub struct OutputSecret {
    api: Api<Secret>,
    namespace: String,
    name: String,
    /// The ledger, as errors name it.
    ledger: String,
    retry: RetryPolicy,
}

impl std::fmt::Debug for OutputSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret {}/{}", self.namespace, self.name)
    }
}

/// The name of the Secret that keeps the output tails of the ledger object `ledger`.
pub fn secret_name(ledger: &str) -> String {
    format!("{ledger}-output")
}

/// What a write stores in the ledger object once its tails are kept.
#[derive(Debug, Default)]
pub struct Kept {
    /// The records, each message's output replaced by where it is kept.
    pub records: Vec<(Slug, LedgerEntry)>,
    /// The last failure, likewise.
    pub failure: Option<LastFailure>,
    /// Keys of the Secret that the write leaves unnamed: removed after it landed
    /// ([`OutputSecret::forget`]).
    pub unnamed: Vec<String>,
}

impl Kept {
    /// The last failure to store, as a step names it.
    pub fn failure_note<'a>(&'a self, slug: Option<&'a Slug>) -> Option<FailureNote<'a>> {
        Some(FailureNote {
            slug: slug?,
            failure: self.failure.as_ref()?,
        })
    }
}

impl OutputSecret {
    /// The Secret `<ledger_name>-output` in `namespace`; `ledger` names the ledger in errors.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        ledger_name: &str,
        ledger: &str,
        retry: RetryPolicy,
    ) -> Self {
        OutputSecret {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: secret_name(ledger_name),
            ledger: ledger.to_owned(),
            retry,
        }
    }

    fn at(&self, key: String) -> KeptAt {
        KeptAt {
            namespace: self.namespace.clone(),
            secret: self.name.clone(),
            key,
        }
    }

    fn object(&self) -> String {
        format!("Secret {}/{}", self.namespace, self.name)
    }

    /// Moves the output of `records` and `failure` into the Secret (created owned by `owner`
    /// when absent). `stored` answers a ledger key's stored value: a record whose stored entry
    /// or last failure names a kept tail that the write no longer names puts its key in
    /// [`Kept::unnamed`].
    pub async fn keep(
        &self,
        records: &[(Slug, LedgerEntry)],
        failure: Option<FailureNote<'_>>,
        owner: Option<OwnerReference>,
        stored: impl Fn(&str) -> Option<String>,
    ) -> Kept {
        let mut kept = Kept::default();
        let mut tails: BTreeMap<String, String> = BTreeMap::new();
        let mut heads: Vec<(String, String)> = Vec::new();
        let names_tail = |key: &str| stored(key).is_some_and(|v| kept_output::names_kept_tail(&v));
        for (slug, entry) in records {
            let key = keys::entry_key(slug);
            let output = entry.message.as_deref().and_then(|m| {
                kept_output::output_of(Some(entry.state), entry.reason.as_deref(), m)
            });
            match output {
                Some((head, tail)) => {
                    tails.insert(key.clone(), tail.to_owned());
                    heads.push((key, head.to_owned()));
                }
                None if names_tail(&key) => kept.unnamed.push(key),
                None => {}
            }
            // The slug's entry removes its last failure (CONTRACT §5.3), and so its tail.
            let failure_key = keys::failure_key(slug);
            if failure.is_none_or(|f| f.slug != slug) && names_tail(&failure_key) {
                kept.unnamed.push(failure_key);
            }
        }
        let failure_output = failure.and_then(|f| {
            kept_output::output_of(None, Some(&f.failure.reason), &f.failure.message)
                .map(|(head, tail)| (keys::failure_key(f.slug), head.to_owned(), tail.to_owned()))
        });
        if let Some((key, head, tail)) = &failure_output {
            tails.insert(key.clone(), tail.clone());
            heads.push((key.clone(), head.clone()));
        }
        let written = if tails.is_empty() {
            Ok(())
        } else {
            self.put(&tails, owner).await
        };
        let message = |key: &str, head: &str| {
            let at = self.at(key.to_owned());
            match &written {
                Ok(()) => kept_output::stored_message(head, Ok(&at)),
                Err(e) => {
                    tracing::warn!(
                        secret = %self.object(),
                        key,
                        error = %e,
                        "the output tail could not be kept in its Secret; the entry records the failure without it"
                    );
                    kept_output::stored_message(
                        head,
                        Err(&format!("the {} could not be written: {e}", self.object())),
                    )
                }
            }
        };
        let head_of = |key: &str| {
            heads
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, h)| h.as_str())
        };
        kept.records = records
            .iter()
            .map(|(slug, entry)| {
                let key = keys::entry_key(slug);
                let mut entry = entry.clone();
                if let Some(head) = head_of(&key) {
                    entry.message = Some(message(&key, head));
                }
                (slug.clone(), entry)
            })
            .collect();
        kept.failure = failure.map(|f| {
            let mut failure = f.failure.clone();
            if let Some((key, head, _)) = &failure_output {
                failure.message = message(key, head);
            }
            failure
        });
        kept
    }

    /// Stores `tails` under their keys: a merge patch, or a create when the Secret is absent.
    async fn put(
        &self,
        tails: &BTreeMap<String, String>,
        owner: Option<OwnerReference>,
    ) -> Result<(), LedgerError> {
        const OP: &str = "keep output tail";
        let data: BTreeMap<String, ByteString> = tails
            .iter()
            .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
            .collect();
        let patch = serde_json::json!({ "data": data });
        // Not `ledger_error`: its 404 says the ledger does not exist.
        let fail = |e: &kube::Error| LedgerError::Permanent {
            ledger: self.ledger.clone(),
            operation: OP,
            message: format!("{}: {e}", self.object()),
        };
        let (pp, merge, post) = (patch_params(), Patch::Merge(&patch), post_params());
        for _ in 0..3 {
            let patched = self
                .retry
                .retry(&mut Attempts::new(), OP, &self.object(), || {
                    self.api.patch(&self.name, &pp, &merge)
                })
                .await;
            match patched {
                Ok(_) => return Ok(()),
                Err(e) if classify(&e) == Class::NotFound => {}
                Err(e) => return Err(fail(&e)),
            }
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".to_owned(),
                        crate::defaults::FIELD_MANAGER.to_owned(),
                    )])),
                    owner_references: owner.clone().map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".to_owned()),
                data: Some(data.clone()),
                ..Secret::default()
            };
            let created = self
                .retry
                .retry(&mut Attempts::new(), OP, &self.object(), || {
                    self.api.create(&post, &secret)
                })
                .await;
            match created {
                Ok(_) => return Ok(()),
                // Someone created it meanwhile: patch it.
                Err(e) if classify(&e) == Class::AlreadyExists => {}
                Err(e) => return Err(fail(&e)),
            }
        }
        Err(LedgerError::Transient {
            ledger: self.ledger.clone(),
            operation: OP,
            message: format!("{} keeps appearing and disappearing", self.object()),
        })
    }

    /// Removes `keys` from the Secret (tails the ledger no longer names). Best effort: a
    /// failure leaves keys nothing names, with a warning.
    pub async fn forget(&self, keys: &[String]) {
        if keys.is_empty() {
            return;
        }
        let data: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .map(|k| (k.clone(), serde_json::Value::Null))
            .collect();
        let patch = serde_json::json!({ "data": data });
        let (pp, merge) = (patch_params(), Patch::Merge(&patch));
        let removed = self
            .retry
            .retry(
                &mut Attempts::new(),
                "forget output tail",
                &self.object(),
                || self.api.patch(&self.name, &pp, &merge),
            )
            .await;
        match removed {
            Ok(_) => {}
            Err(e) if classify(&e) == Class::NotFound => {}
            Err(e) => tracing::warn!(
                secret = %self.object(),
                keys = %keys.join(","),
                error = %e,
                "output tails the ledger no longer names were not removed from their Secret"
            ),
        }
    }

    /// The tail `message` names, when it names one of this Secret's keys: `Ok(None)` when it
    /// names none (or another Secret: a ledger entry never makes its reader read anything but
    /// the ledger's own Secret) or the Secret no longer holds it.
    pub async fn read(&self, message: &str) -> Result<Option<String>, LedgerError> {
        let Some(at) = KeptAt::find(message) else {
            return Ok(None);
        };
        if at.namespace != self.namespace || at.secret != self.name {
            return Ok(None);
        }
        let secret = self
            .retry
            .get_opt(&self.api, &self.name, &mut Attempts::new())
            .await
            .map_err(|e| ledger_error(&self.ledger, "read output tail", &self.object(), &e))?;
        Ok(secret
            .and_then(|s| s.data)
            .and_then(|mut d| d.remove(&at.key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned()))
    }
}
