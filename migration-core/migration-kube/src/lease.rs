//! The run lock as a `coordination.k8s.io/v1` Lease.
//!
//! Semantics match every other backend (the conformance suite checks):
//! acquiring succeeds when the Lease is absent, unheld, expired, or already
//! ours; otherwise it answers `LockHeld` naming the holder. Expiry is
//! `renewTime + leaseDurationSeconds`, judged on the acquirer's clock, as
//! client-go's leader election does. Every change carries the Lease's
//! resourceVersion as a precondition, so two acquirers cannot both win.
//!
//! Round trips: the handle remembers the Lease as it last saw it, and every
//! operation is one [`conditional_update`], the loop every Kubernetes write
//! goes through. Acquiring when it does not know the Lease to exist creates
//! it directly (the previous holder deleted it on release, so that is the
//! usual case: one request); renewing and releasing a Lease it holds send
//! the write straight away with the remembered resourceVersion (one request
//! each). A 409 (or an AlreadyExists, or a 404 of a Lease deleted since)
//! means the remembered copy is stale: the handle reads the Lease and
//! decides again, exactly as without the memory.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::{Api, Client};
use migration_core::{Clock, Lease, LedgerError, Timestamp};

use crate::error::{Class, classify, ledger_error};
use crate::retry::{Attempts, Backoff};
use crate::write::{
    Base, ConditionalObject, Step, WriteTarget, Writer, conditional_update, patch_params,
    post_params,
};

/// A Lease used as the ledger's run lock.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<KubeLease>,
    name: String,
    /// The ledger the lock guards, and the retry policy of its writes.
    writer: Writer,
    clock: Arc<dyn Clock>,
    /// What this handle (and its clones) last learned from the API server.
    seen: Arc<Mutex<Seen>>,
}

/// The Lease as this handle last saw it.
#[derive(Debug, Clone, Default)]
enum Seen {
    /// Never looked, or the last write's outcome is unknown.
    #[default]
    Unknown,
    /// Not there.
    Absent,
    /// There, as returned by the last read or write.
    Present(Box<KubeLease>),
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("name", &self.name)
            .field("ledger", &self.writer.ledger)
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

/// One write of the Lease: what a decision on the Lease as read sends.
#[derive(Debug)]
enum LeaseWrite {
    /// Create it (it was absent).
    Create(Box<KubeLease>),
    /// Merge-patch its spec, on the condition that it is still at this
    /// resourceVersion.
    Patch(Option<String>, serde_json::Value),
    /// Delete it, on the same condition.
    Delete(Option<String>),
}

/// The Lease as the target of one operation's conditional writes
/// ([`conditional_update`]): the base of its first try is the Lease as this
/// handle last saw it (no request), every later one a fresh read.
struct Writes<'a> {
    lock: &'a LeaseLock,
    /// What a write stored, for the answer of the operation.
    written: Mutex<Option<KubeLease>>,
}

impl<'a> Writes<'a> {
    fn new(lock: &'a LeaseLock) -> Self {
        Writes {
            lock,
            written: Mutex::new(None),
        }
    }

    /// The Lease the operation's last write stored.
    fn written(&self) -> Option<KubeLease> {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl WriteTarget for Writes<'_> {
    fn writer(&self) -> &Writer {
        &self.lock.writer
    }

    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError {
        self.lock.error(operation, error)
    }

    /// A create that lost the race to another taker (AlreadyExists), and a
    /// write of a Lease deleted since it was read (its holder released it,
    /// NotFound), are conflicts like any other: read again and decide again
    /// (a renewal then answers "lock lost", not "the ledger does not
    /// exist").
    fn class(&self, error: &kube::Error) -> Class {
        match classify(error) {
            Class::AlreadyExists | Class::NotFound => Class::Conflict,
            class => class,
        }
    }
}

impl ConditionalObject for Writes<'_> {
    /// The Lease, `None` when absent.
    type Object = Option<KubeLease>;
    type Write = LeaseWrite;

    /// On the first try, the Lease as last seen: remembered there, or
    /// absent when this handle never saw it or a write's outcome is unknown
    /// (the previous holder deleted it on release, so that is the usual
    /// case, and a create that finds it there is a conflict that reads it).
    async fn base(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
        first: bool,
    ) -> Result<Base<Option<KubeLease>>, LedgerError> {
        if first {
            attempts.count_one();
            let object = match self.lock.seen() {
                Seen::Present(lease) => Some(*lease),
                Seen::Absent | Seen::Unknown => None,
            };
            return Ok(Base {
                object,
                fresh: false,
            });
        }
        let object = self.lock.get(operation, attempts).await?;
        Ok(Base {
            object,
            fresh: true,
        })
    }

    async fn send(&self, _base: &Option<KubeLease>, write: &LeaseWrite) -> Result<(), kube::Error> {
        let stored = match write {
            LeaseWrite::Create(lease) => self.lock.create(lease).await?,
            LeaseWrite::Patch(rv, spec) => self.lock.set(rv.clone(), spec).await?,
            LeaseWrite::Delete(rv) => return self.lock.delete(rv.clone()).await,
        };
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) = Some(stored);
        Ok(())
    }

    fn forget(&self) {
        self.lock.remember(Seen::Unknown);
    }
}

impl LeaseLock {
    /// The Lease `name` in `namespace`; `writer` names the ledger in errors
    /// and says how patiently the Lease's requests are tried.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        writer: Writer,
        clock: Arc<dyn Clock>,
    ) -> Self {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            writer,
            clock,
            seen: Arc::new(Mutex::new(Seen::Unknown)),
        }
    }

    fn seen(&self) -> Seen {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn remember(&self, seen: Seen) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = seen;
    }

    /// Remembers what a write left: the Lease as stored, or, when it failed,
    /// that its outcome is unknown (it may have landed).
    fn remember_write(&self, result: &Result<KubeLease, kube::Error>) {
        self.remember(match result {
            Ok(l) => Seen::Present(Box::new(l.clone())),
            Err(_) => Seen::Unknown,
        });
    }

    fn error(&self, operation: &'static str, e: &kube::Error) -> LedgerError {
        ledger_error(
            &self.writer.ledger,
            operation,
            &format!("lease {}", self.name),
            e,
        )
    }

    fn seconds(ttl: Duration) -> i32 {
        i32::try_from(ttl.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// The spec fields that extend the current holder's tenure to `ttl` from
    /// `now` (a renewal, or the holder taking its own lock again): holder,
    /// acquire time and transitions stay as they are.
    fn extension(ttl: Duration, now: Timestamp) -> serde_json::Value {
        serde_json::json!({ "leaseDurationSeconds": Self::seconds(ttl), "renewTime": micro(now) })
    }

    async fn get(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
    ) -> Result<Option<KubeLease>, LedgerError> {
        let lease = self
            .writer
            .retry
            .get_opt(&self.api, &self.name, attempts)
            .await
            .map_err(|e| self.error(operation, &e))?;
        self.remember(match &lease {
            Some(l) => Seen::Present(Box::new(l.clone())),
            None => Seen::Absent,
        });
        Ok(lease)
    }

    async fn set(
        &self,
        rv: Option<String>,
        spec: &serde_json::Value,
    ) -> Result<KubeLease, kube::Error> {
        let patch = serde_json::json!({ "metadata": { "resourceVersion": rv }, "spec": spec });
        let result = self
            .api
            .patch(&self.name, &patch_params(), &Patch::Merge(&patch))
            .await;
        self.remember_write(&result);
        result
    }

    /// The Lease held by `holder` from `now` for `ttl`, to create.
    fn new_lease(
        &self,
        operation: &'static str,
        holder: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<KubeLease, LedgerError> {
        serde_json::from_value(serde_json::json!({
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
            ledger: self.writer.ledger.clone(),
            operation,
            message: e.to_string(),
        })
    }

    async fn create(&self, lease: &KubeLease) -> Result<KubeLease, kube::Error> {
        let result = self.api.create(&post_params(), lease).await;
        self.remember_write(&result);
        result
    }

    /// Whether `h` is `lease`'s tenure.
    fn is_tenure(h: &Holding, lease: &Lease) -> bool {
        h.holder.as_deref() == Some(lease.holder.as_str()) && h.token == lease.token
    }

    /// The lease the operation's write left, as the API server stored it.
    fn stored_lease(
        &self,
        operation: &'static str,
        holder: &str,
        writes: &Writes<'_>,
    ) -> Result<Lease, LedgerError> {
        match writes.written() {
            Some(stored) => Ok(Self::held(holder, &stored)),
            None => Err(LedgerError::Permanent {
                ledger: self.writer.ledger.clone(),
                operation,
                message: format!("lease {}: the write stored nothing", self.name),
            }),
        }
    }

    fn held(holder: &str, stored: &KubeLease) -> Lease {
        let h = holding(stored);
        Lease {
            holder: holder.to_owned(),
            token: h.token,
            acquired_at: h.acquired,
            expires_at: h.expires,
        }
    }

    /// Refuses, as [`LedgerError::LockHeld`], while someone other than
    /// `holder` holds this Lease unexpired; absent, unheld, expired or ours
    /// is `Ok`. One read; it writes nothing. For a lock that moved
    /// elsewhere (the ConfigMap ledger's, into the ConfigMap itself): a
    /// runner of an older release still locks through this Lease, and a
    /// newer runner must not start while that one runs.
    pub async fn refuse_if_held_by_another(&self, holder: &str) -> Result<(), LedgerError> {
        const OP: &str = "check the older runners' lock";
        let mut attempts = Attempts::new();
        let Some(current) = self.get(OP, &mut attempts).await? else {
            return Ok(());
        };
        match self.held_by_another(&holding(&current), holder, self.clock.now()) {
            Some(held) => Err(held),
            None => Ok(()),
        }
    }

    /// [`LedgerError::LockHeld`] when `h` is an unexpired tenure of someone
    /// other than `holder` at `now`.
    fn held_by_another(&self, h: &Holding, holder: &str, now: Timestamp) -> Option<LedgerError> {
        match &h.holder {
            Some(other) if other != holder && now < h.expires => Some(LedgerError::LockHeld {
                ledger: self.writer.ledger.clone(),
                holder: other.clone(),
                expires_at: h.expires,
            }),
            _ => None,
        }
    }

    fn lost(&self, lease: &Lease, reason: String) -> LedgerError {
        LedgerError::LockLost {
            ledger: self.writer.ledger.clone(),
            holder: lease.holder.clone(),
            reason,
        }
    }

    /// Deletes the Lease if its resourceVersion is still `rv`; a Lease
    /// already gone counts as deleted.
    async fn delete(&self, rv: Option<String>) -> Result<(), kube::Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: rv,
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let result = match self.api.delete(&self.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if classify(&e) == Class::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        self.remember(match &result {
            Ok(()) => Seen::Absent,
            Err(_) => Seen::Unknown,
        });
        result
    }
}

/// The run lock's three operations on the Lease, each one
/// [`conditional_update`]: decided on the Lease as last seen, written on the
/// condition that it is still so, decided again on a fresh read when not.
#[async_trait::async_trait]
impl migration_core::Lock for LeaseLock {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "acquire lock";
        let writes = Writes::new(self);
        conditional_update(&writes, OP, |current| {
            let now = self.clock.now();
            let Some(current) = current else {
                let lease = self.new_lease(OP, holder, ttl, now)?;
                return Ok(Step::Write(LeaseWrite::Create(Box::new(lease)), ()));
            };
            let h = holding(current);
            if let Some(held) = self.held_by_another(&h, holder, now) {
                return Err(held);
            }
            let spec = if h.holder.as_deref() == Some(holder) {
                Self::extension(ttl, now)
            } else {
                serde_json::json!({
                    "holderIdentity": holder,
                    "leaseDurationSeconds": Self::seconds(ttl),
                    "acquireTime": micro(now),
                    "renewTime": micro(now),
                    "leaseTransitions": h.transitions.saturating_add(1),
                })
            };
            Ok(Step::Write(LeaseWrite::Patch(h.resource_version, spec), ()))
        })
        .await?;
        self.stored_lease(OP, holder, &writes)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "renew lock";
        let writes = Writes::new(self);
        conditional_update(&writes, OP, |current| {
            let Some(current) = current else {
                return Err(self.lost(lease, "the lease was released".into()));
            };
            let h = holding(current);
            if !Self::is_tenure(&h, lease) {
                let now_held = h.holder.unwrap_or_else(|| "nobody".into());
                return Err(self.lost(lease, format!("now held by {now_held}")));
            }
            let spec = Self::extension(ttl, self.clock.now());
            Ok(Step::Write(LeaseWrite::Patch(h.resource_version, spec), ()))
        })
        .await?;
        self.stored_lease(OP, &lease.holder, &writes)
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        const OP: &str = "release lock";
        conditional_update(&Writes::new(self), OP, |current| {
            Ok(match current {
                Some(current) if Self::is_tenure(&holding(current), lease) => Step::Write(
                    LeaseWrite::Delete(current.metadata.resource_version.clone()),
                    (),
                ),
                // Absent, or another tenure: not ours to release.
                _ => Step::Done(()),
            })
        })
        .await
    }
}
