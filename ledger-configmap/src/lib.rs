//! # ledger-configmap
//!
//! The migration ledger stored in a ConfigMap, by default
//! `cozy-system/cozystack-version`: key `version` holds the legacy integer
//! (read, never written, by the engine), one key `m.<slug>` per entry holds
//! its compact JSON, and `a.<slug>` counts started executions (spec §5).
//!
//! Kubernetes API level: k8s-openapi's `v1_33` (the platform's floor).
//!
//! Guarantees, beyond the [`Ledger`] trait's:
//! - Writes are JSON merge patches that name only the `m.*`/`a.*` keys they
//!   write, under the field manager `cozystack-migrate`, carrying the
//!   object's `resourceVersion` as a precondition. Other keys, labels and
//!   annotations are never touched; a concurrent writer causes a 409, a
//!   re-read and a retry, never a lost update.
//! - A kubectl client-side apply of `version` by another manager cannot
//!   prune `m.*` keys, because no `m.*` key is ever in its
//!   last-applied-configuration (tested).
//! - The size budget (1 MiB of `data` plus `binaryData`, keys included, as
//!   the API server counts) is checked before every write: an overflowing
//!   write fails with [`LedgerError::Full`] and writes nothing.
//! - Transient errors (429, 5xx, timeouts, connection resets) are retried
//!   with bounded exponential backoff and jitter; every other error fails
//!   closed with the operation, the object and the key in its message.
//! - The run lock is a `coordination.k8s.io/v1` Lease `<name>-lock` beside
//!   the ConfigMap.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use migration_core::ledger::{ATTEMPT_KEY_PREFIX, AttemptMark};
use migration_core::{
    Clock, Lease, Ledger, LedgerEntry, LedgerError, LedgerSnapshot, Slug, SystemClock, WriteMode,
    WriteReport,
};
use migration_kube::{Class, LeaseLock, RetryPolicy, classify, ledger_error};

/// A ConfigMap holds at most this many bytes of data (keys plus values).
pub const CONFIGMAP_BUDGET_BYTES: u64 = 1024 * 1024;

/// The field manager our writes carry.
pub const FIELD_MANAGER: &str = "cozystack-migrate";

/// Tunables; the defaults suit production.
#[derive(Clone)]
pub struct Options {
    /// Name of the Lease used as the run lock (default `<name>-lock`).
    pub lease_name: Option<String>,
    /// Size budget in bytes.
    pub budget: u64,
    /// Retry policy for transient errors and precondition conflicts.
    pub retry: RetryPolicy,
    /// Clock for lock expiry.
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lease_name: None,
            budget: CONFIGMAP_BUDGET_BYTES,
            retry: RetryPolicy::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// The ConfigMap ledger.
#[derive(Clone)]
pub struct ConfigMapLedger {
    api: Api<ConfigMap>,
    name: String,
    description: String,
    budget: u64,
    retry: RetryPolicy,
    lock: LeaseLock,
}

impl std::fmt::Debug for ConfigMapLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

/// Bytes the API server counts for a ConfigMap's size limit.
pub fn configmap_size(cm: &ConfigMap) -> u64 {
    let data: u64 = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum();
    let binary: u64 = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.len() + v.0.len()) as u64)
        .sum();
    data + binary
}

fn entry_count(cm: &ConfigMap) -> usize {
    cm.data
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(migration_core::slug::LEDGER_KEY_PREFIX))
        .count()
}

impl ConfigMapLedger {
    /// The ledger in ConfigMap `namespace/name`, with default options.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self::with_options(client, namespace, name, Options::default())
    }

    /// The ledger in ConfigMap `namespace/name`.
    pub fn with_options(client: Client, namespace: &str, name: &str, options: Options) -> Self {
        let description = format!("configmap {namespace}/{name}");
        let lease_name = options.lease_name.unwrap_or_else(|| format!("{name}-lock"));
        let lock = LeaseLock::new(
            client.clone(),
            namespace,
            &lease_name,
            &description,
            options.clock,
            options.retry,
        );
        ConfigMapLedger {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            description,
            budget: options.budget,
            retry: options.retry,
            lock,
        }
    }

    fn object(&self) -> String {
        format!("configmap {}", self.name)
    }

    async fn get(
        &self,
        operation: &'static str,
        attempt: &mut u32,
    ) -> Result<Option<ConfigMap>, LedgerError> {
        self.retry
            .get_opt(&self.api, &self.name, attempt)
            .await
            .map_err(|e| ledger_error(&self.description, operation, &self.object(), &e))
    }

    fn full(&self, current: &ConfigMap, would_be: u64) -> LedgerError {
        LedgerError::Full {
            ledger: self.description.clone(),
            current_bytes: configmap_size(current),
            would_be_bytes: would_be,
            budget_bytes: self.budget,
            entry_count: entry_count(current),
        }
    }

    /// The size `current` would have with `writes` applied.
    fn size_after(current: &ConfigMap, writes: &BTreeMap<String, String>) -> u64 {
        let data = current.data.as_ref();
        let mut size = configmap_size(current);
        for (k, v) in writes {
            match data.and_then(|d| d.get(k)) {
                Some(old) => size = size - old.len() as u64 + v.len() as u64,
                None => size += (k.len() + v.len()) as u64,
            }
        }
        size
    }

    /// One conditional merge patch of `writes` on top of `current`.
    async fn patch(
        &self,
        current: &ConfigMap,
        writes: &BTreeMap<String, String>,
    ) -> Result<(), kube::Error> {
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": current.metadata.resource_version },
            "data": writes,
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.api
            .patch(&self.name, &params, &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// Decides whether to loop after a failed patch.
    async fn retry_after(
        &self,
        operation: &'static str,
        e: &kube::Error,
        attempt: u32,
    ) -> Result<(), LedgerError> {
        match classify(e) {
            Class::Conflict | Class::Transient if attempt < self.retry.attempts => {
                tracing::debug!(error = %e, attempt, operation, "ledger write refused; re-reading and retrying");
                self.retry.pause(attempt).await;
                Ok(())
            }
            Class::Conflict => Err(LedgerError::Conflict {
                ledger: self.description.clone(),
                operation,
                attempts: attempt,
            }),
            // The object vanished between our read and our write.
            Class::NotFound => Err(LedgerError::NotFound {
                ledger: self.description.clone(),
                operation,
            }),
            _ => Err(ledger_error(
                &self.description,
                operation,
                &self.object(),
                e,
            )),
        }
    }
}

fn encode(
    ledger: &str,
    operation: &'static str,
    entries: &[(Slug, LedgerEntry)],
) -> Result<Vec<(Slug, String, String)>, LedgerError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (slug, entry) in entries {
        if !seen.insert(slug) {
            return Err(LedgerError::Permanent {
                ledger: ledger.to_owned(),
                operation,
                message: format!("slug '{slug}' appears twice in one write"),
            });
        }
        out.push((slug.clone(), slug.ledger_key(), entry.encode()));
    }
    Ok(out)
}

#[async_trait]
impl Ledger for ConfigMapLedger {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        let mut attempt = 0;
        let Some(cm) = self.get("read", &mut attempt).await? else {
            return Ok(None);
        };
        let data = cm.data.unwrap_or_default();
        Ok(Some(LedgerSnapshot::from_raw_data(
            data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            cm.metadata.resource_version,
        )))
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        const OP: &str = "create";
        let encoded = encode(&self.description, OP, entries)?;
        let data: BTreeMap<String, String> = encoded.into_iter().map(|(_, k, v)| (k, v)).collect();
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        let size = configmap_size(&cm);
        if size > self.budget {
            return Err(self.full(&ConfigMap::default(), size));
        }
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.api.create(&params, &cm).await {
                Ok(_) => return Ok(()),
                // A retry after a lost reply lands here too: the object exists
                // (maybe ours); the caller re-reads, and nothing is overwritten.
                Err(e) if classify(&e) == Class::AlreadyExists => {
                    return Err(LedgerError::AlreadyExists {
                        ledger: self.description.clone(),
                    });
                }
                Err(e) if classify(&e) == Class::Transient && attempt < self.retry.attempts => {
                    self.retry.pause(attempt).await;
                }
                Err(e) => return Err(ledger_error(&self.description, OP, &self.object(), &e)),
            }
        }
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        const OP: &str = "write";
        let encoded = encode(&self.description, OP, entries)?;
        let mut attempt = 0;
        loop {
            let Some(current) = self.get(OP, &mut attempt).await? else {
                return Err(LedgerError::NotFound {
                    ledger: self.description.clone(),
                    operation: OP,
                });
            };
            let existing = current.data.as_ref();
            let mut report = WriteReport::default();
            let mut writes = BTreeMap::new();
            for (slug, key, value) in &encoded {
                if mode == WriteMode::OnlyIfAbsent && existing.is_some_and(|d| d.contains_key(key))
                {
                    report.already_present.push(slug.clone());
                } else {
                    writes.insert(key.clone(), value.clone());
                    report.written.push(slug.clone());
                }
            }
            if writes.is_empty() {
                return Ok(report);
            }
            let would_be = Self::size_after(&current, &writes);
            if would_be > self.budget {
                return Err(self.full(&current, would_be));
            }
            match self.patch(&current, &writes).await {
                Ok(()) => return Ok(report),
                Err(e) => self.retry_after(OP, &e, attempt).await?,
            }
        }
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        const OP: &str = "note attempt";
        let key = format!("{ATTEMPT_KEY_PREFIX}{slug}");
        let mut attempt = 0;
        loop {
            let Some(current) = self.get(OP, &mut attempt).await? else {
                return Err(LedgerError::NotFound {
                    ledger: self.description.clone(),
                    operation: OP,
                });
            };
            let stored =
                match current.data.as_ref().and_then(|d| d.get(&key)) {
                    Some(raw) => Some(AttemptMark::decode(&key, raw).map_err(|c| {
                        LedgerError::Permanent {
                            ledger: self.description.clone(),
                            operation: OP,
                            message: c.to_string(),
                        }
                    })?),
                    None => None,
                };
            let next = AttemptMark::next(stored.as_ref(), token, floor);
            if stored.as_ref() == Some(&next) {
                return Ok(next.count);
            }
            let writes = BTreeMap::from([(key.clone(), next.encode())]);
            let would_be = Self::size_after(&current, &writes);
            if would_be > self.budget {
                return Err(self.full(&current, would_be));
            }
            match self.patch(&current, &writes).await {
                Ok(()) => return Ok(next.count),
                Err(e) => self.retry_after(OP, &e, attempt).await?,
            }
        }
    }

    async fn acquire_lock(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        self.lock.acquire(holder, ttl).await
    }

    async fn renew_lock(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        self.lock.renew(lease, ttl).await
    }

    async fn release_lock(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.lock.release(lease).await
    }
}
