//! The run lock as a `coordination.k8s.io/v1` Lease.
//!
//! Semantics match every other backend (the conformance suite checks):
//! acquiring succeeds when the Lease is absent, unheld, expired, or already
//! ours; otherwise it answers `LockHeld` naming the holder. Expiry is
//! `renewTime + leaseDurationSeconds`, judged on the acquirer's clock, as
//! client-go's leader election does. Every change carries the Lease's
//! resourceVersion as a precondition, so two acquirers cannot both win.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use migration_core::{Clock, Lease, LedgerError, Timestamp};

use crate::error::{Class, classify, ledger_error};
use crate::retry::RetryPolicy;

/// The field manager for our writes to Leases.
const FIELD_MANAGER: &str = "cozystack-migrate";

/// A Lease used as the ledger's run lock.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<KubeLease>,
    name: String,
    ledger: String,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("name", &self.name)
            .field("ledger", &self.ledger)
            .finish()
    }
}

fn micro(ts: Timestamp) -> MicroTime {
    let micros = i32::try_from(ts.subsec_nanos() / 1000 * 1000).unwrap_or(0);
    let jiff = k8s_openapi::jiff::Timestamp::new(ts.unix_seconds(), micros)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    MicroTime(jiff)
}

fn from_micro(t: &MicroTime) -> Timestamp {
    let nanos = u32::try_from(t.0.subsec_nanosecond()).unwrap_or(0);
    Timestamp::from_unix_parts(t.0.as_second(), nanos)
        .unwrap_or(Timestamp::from_unix(t.0.as_second()))
}

/// What a Lease says about its holder.
struct Holding {
    holder: Option<String>,
    token: String,
    acquired: Timestamp,
    expires: Timestamp,
    transitions: i32,
    resource_version: Option<String>,
}

fn holding(lease: &KubeLease) -> Holding {
    let spec = lease.spec.clone().unwrap_or_default();
    let renewed = spec
        .renew_time
        .as_ref()
        .map(from_micro)
        .unwrap_or(Timestamp::from_unix(0));
    let duration = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    let acquired = spec
        .acquire_time
        .as_ref()
        .map(from_micro)
        .unwrap_or(renewed);
    Holding {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        token: acquired.to_string(),
        acquired,
        expires: renewed.plus(Duration::from_secs(duration)),
        transitions: spec.lease_transitions.unwrap_or(0),
        resource_version: lease.metadata.resource_version.clone(),
    }
}

impl LeaseLock {
    /// The Lease `name` in `namespace`; `ledger` names the ledger in errors.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        ledger: &str,
        clock: Arc<dyn Clock>,
        retry: RetryPolicy,
    ) -> Self {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            ledger: ledger.to_owned(),
            clock,
            retry,
        }
    }

    fn error(&self, operation: &'static str, e: &kube::Error) -> LedgerError {
        ledger_error(&self.ledger, operation, &format!("lease {}", self.name), e)
    }

    fn seconds(ttl: Duration) -> i32 {
        i32::try_from(ttl.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    async fn get(
        &self,
        operation: &'static str,
        attempt: &mut u32,
    ) -> Result<Option<KubeLease>, LedgerError> {
        self.retry
            .get_opt(&self.api, &self.name, attempt)
            .await
            .map_err(|e| self.error(operation, &e))
    }

    /// Decides whether to retry after a failed write: conflicts and
    /// transient errors loop (re-reading first), anything else is final.
    async fn retry_after(
        &self,
        operation: &'static str,
        e: &kube::Error,
        attempt: u32,
    ) -> Result<(), LedgerError> {
        match classify(e) {
            Class::Conflict | Class::AlreadyExists | Class::Transient
                if attempt < self.retry.attempts =>
            {
                self.retry.pause(attempt).await;
                Ok(())
            }
            Class::Conflict | Class::AlreadyExists => Err(LedgerError::Conflict {
                ledger: self.ledger.clone(),
                operation,
                attempts: attempt,
            }),
            _ => Err(self.error(operation, e)),
        }
    }

    async fn set(
        &self,
        rv: Option<String>,
        spec: serde_json::Value,
    ) -> Result<KubeLease, kube::Error> {
        let patch = serde_json::json!({ "metadata": { "resourceVersion": rv }, "spec": spec });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.api
            .patch(&self.name, &params, &Patch::Merge(&patch))
            .await
    }

    /// Takes the lock for `holder`; see [`migration_core::Ledger::acquire_lock`].
    pub async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "acquire lock";
        let mut attempt = 0;
        loop {
            let now = self.clock.now();
            let result = match self.get(OP, &mut attempt).await? {
                None => {
                    let lease: KubeLease = serde_json::from_value(serde_json::json!({
                        "metadata": { "name": self.name },
                        "spec": {
                            "holderIdentity": holder,
                            "leaseDurationSeconds": Self::seconds(ttl),
                            "acquireTime": micro(now),
                            "renewTime": micro(now),
                            "leaseTransitions": 0,
                        }
                    }))
                    .map_err(|e| LedgerError::Permanent {
                        ledger: self.ledger.clone(),
                        operation: OP,
                        message: e.to_string(),
                    })?;
                    let params = PostParams {
                        field_manager: Some(FIELD_MANAGER.to_owned()),
                        ..PostParams::default()
                    };
                    self.api.create(&params, &lease).await
                }
                Some(current) => {
                    let h = holding(&current);
                    let ours = h.holder.as_deref() == Some(holder);
                    if !ours && h.holder.is_some() && now < h.expires {
                        return Err(LedgerError::LockHeld {
                            ledger: self.ledger.clone(),
                            holder: h.holder.unwrap_or_default(),
                            expires_at: h.expires,
                        });
                    }
                    let spec = if ours {
                        serde_json::json!({ "leaseDurationSeconds": Self::seconds(ttl), "renewTime": micro(now) })
                    } else {
                        serde_json::json!({
                            "holderIdentity": holder,
                            "leaseDurationSeconds": Self::seconds(ttl),
                            "acquireTime": micro(now),
                            "renewTime": micro(now),
                            "leaseTransitions": h.transitions.saturating_add(1),
                        })
                    };
                    self.set(h.resource_version, spec).await
                }
            };
            match result {
                Ok(lease) => {
                    let h = holding(&lease);
                    return Ok(Lease {
                        holder: holder.to_owned(),
                        token: h.token,
                        acquired_at: h.acquired,
                        expires_at: h.expires,
                    });
                }
                Err(e) => self.retry_after(OP, &e, attempt).await?,
            }
        }
    }

    fn lost(&self, lease: &Lease, reason: String) -> LedgerError {
        LedgerError::LockLost {
            ledger: self.ledger.clone(),
            holder: lease.holder.clone(),
            reason,
        }
    }

    /// Extends a held lock; see [`migration_core::Ledger::renew_lock`].
    pub async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "renew lock";
        let mut attempt = 0;
        loop {
            let Some(current) = self.get(OP, &mut attempt).await? else {
                return Err(self.lost(lease, "the lease was released".into()));
            };
            let h = holding(&current);
            if h.holder.as_deref() != Some(lease.holder.as_str()) || h.token != lease.token {
                let now_held = h.holder.unwrap_or_else(|| "nobody".into());
                return Err(self.lost(lease, format!("now held by {now_held}")));
            }
            let now = self.clock.now();
            let spec = serde_json::json!({ "leaseDurationSeconds": Self::seconds(ttl), "renewTime": micro(now) });
            match self.set(h.resource_version, spec).await {
                Ok(updated) => {
                    let h = holding(&updated);
                    return Ok(Lease {
                        holder: lease.holder.clone(),
                        token: h.token,
                        acquired_at: h.acquired,
                        expires_at: h.expires,
                    });
                }
                Err(e) => self.retry_after(OP, &e, attempt).await?,
            }
        }
    }

    /// Releases a held lock; see [`migration_core::Ledger::release_lock`].
    pub async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        const OP: &str = "release lock";
        let mut attempt = 0;
        loop {
            let Some(current) = self.get(OP, &mut attempt).await? else {
                return Ok(());
            };
            let h = holding(&current);
            if h.holder.as_deref() != Some(lease.holder.as_str()) || h.token != lease.token {
                return Ok(());
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: h.resource_version,
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.api.delete(&self.name, &params).await {
                Ok(_) => return Ok(()),
                Err(e) if classify(&e) == Class::NotFound => return Ok(()),
                Err(e) => self.retry_after(OP, &e, attempt).await?,
            }
        }
    }
}
