//! The run lock as a `coordination.k8s.io/v1` Lease.
//!
//! Semantics match every other backend (the conformance suite checks):
//! acquiring succeeds when the Lease is absent, unheld, expired, or already
//! ours; otherwise it answers `LockHeld` naming the holder. Expiry is
//! `renewTime + leaseDurationSeconds`, judged on the acquirer's clock, as
//! client-go's leader election does. Every change carries the Lease's
//! resourceVersion as a precondition, so two acquirers cannot both win.
//!
//! Round trips: the handle remembers the Lease as it last saw it. Acquiring
//! when it does not know the Lease to exist creates it directly (the
//! previous holder deleted it on release, so that is the usual case: one
//! request); renewing and releasing a Lease it holds send the write straight
//! away with the remembered resourceVersion (one request each). A 409 means
//! the remembered copy is stale: the handle reads the Lease and decides
//! again, exactly as without the memory.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::{Api, Client};
use migration_core::{Clock, Lease, LedgerError, Timestamp};

use crate::error::{Class, classify, ledger_error};
use crate::retry::{Attempts, Backoff};
use crate::write::{WriteTarget, Writer, patch_params, post_params};

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

/// The Lease as the target of the lock's writes.
struct Writes<'a>(&'a LeaseLock);

impl WriteTarget for Writes<'_> {
    fn writer(&self) -> &Writer {
        &self.0.writer
    }

    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError {
        self.0.error(operation, error)
    }

    /// A create that lost the race to another taker (AlreadyExists) is a
    /// conflict like any other: read again and decide again.
    fn class(&self, error: &kube::Error) -> Class {
        match classify(error) {
            Class::AlreadyExists => Class::Conflict,
            class => class,
        }
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

    /// The remembered Lease, if it is `lease`'s tenure.
    fn remembered_tenure(&self, lease: &Lease) -> Option<Holding> {
        match self.seen() {
            Seen::Present(current) => {
                let h = holding(&current);
                (h.holder.as_deref() == Some(lease.holder.as_str()) && h.token == lease.token)
                    .then_some(h)
            }
            Seen::Unknown | Seen::Absent => None,
        }
    }

    /// A failed write on a remembered copy: forget it, and back off unless
    /// the 409 only says the copy was stale (then read at once).
    async fn after_remembered_write(
        &self,
        operation: &'static str,
        e: &kube::Error,
        attempts: Attempts,
    ) -> Result<(), LedgerError> {
        self.remember(Seen::Unknown);
        // 409: changed since; 404: deleted since (its holder released it).
        // Either way the remembered copy is stale: read it and decide again
        // (a renewal then answers "lock lost", not "the ledger does not
        // exist").
        if matches!(classify(e), Class::Conflict | Class::NotFound) {
            return Ok(());
        }
        Writes(self).retry_after(operation, e, attempts).await
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
        spec: serde_json::Value,
    ) -> Result<KubeLease, kube::Error> {
        let patch = serde_json::json!({ "metadata": { "resourceVersion": rv }, "spec": spec });
        let result = self
            .api
            .patch(&self.name, &patch_params(), &Patch::Merge(&patch))
            .await;
        self.remember_write(&result);
        result
    }

    /// Creates the Lease held by `holder` from `now`.
    async fn create(
        &self,
        operation: &'static str,
        holder: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Result<KubeLease, kube::Error>, LedgerError> {
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
            ledger: self.writer.ledger.clone(),
            operation,
            message: e.to_string(),
        })?;
        let result = self.api.create(&post_params(), &lease).await;
        self.remember_write(&result);
        Ok(result)
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

/// The run lock's three operations on the Lease; the ledger backends that keep
/// their lock here reach them through [`lock_by_lease!`](crate::lock_by_lease).
#[async_trait::async_trait]
impl migration_core::Lock for LeaseLock {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "acquire lock";
        let mut attempts = Attempts::new();
        // Not known to exist: create it directly, without reading first. If
        // it does exist, read it and decide below.
        if !matches!(self.seen(), Seen::Present(_)) {
            attempts.count_one();
            match self.create(OP, holder, ttl, self.clock.now()).await? {
                Ok(stored) => return Ok(Self::held(holder, &stored)),
                Err(e) if classify(&e) == Class::AlreadyExists => {}
                Err(e) => Writes(self).retry_after(OP, &e, attempts).await?,
            }
        }
        loop {
            let now = self.clock.now();
            let result = match self.get(OP, &mut attempts).await? {
                None => self.create(OP, holder, ttl, now).await?,
                Some(current) => {
                    let h = holding(&current);
                    if let Some(held) = self.held_by_another(&h, holder, now) {
                        return Err(held);
                    }
                    let ours = h.holder.as_deref() == Some(holder);
                    let spec = if ours {
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
                    self.set(h.resource_version, spec).await
                }
            };
            match result {
                Ok(stored) => return Ok(Self::held(holder, &stored)),
                Err(e) => Writes(self).retry_after(OP, &e, attempts).await?,
            }
        }
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "renew lock";
        let mut attempts = Attempts::new();
        // Still ours as last seen: write straight away; the resourceVersion
        // precondition fails if anything changed since.
        if let Some(h) = self.remembered_tenure(lease) {
            attempts.count_one();
            let spec = Self::extension(ttl, self.clock.now());
            match self.set(h.resource_version, spec).await {
                Ok(updated) => return Ok(Self::held(&lease.holder, &updated)),
                Err(e) => self.after_remembered_write(OP, &e, attempts).await?,
            }
        }
        loop {
            let Some(current) = self.get(OP, &mut attempts).await? else {
                return Err(self.lost(lease, "the lease was released".into()));
            };
            let h = holding(&current);
            if h.holder.as_deref() != Some(lease.holder.as_str()) || h.token != lease.token {
                let now_held = h.holder.unwrap_or_else(|| "nobody".into());
                return Err(self.lost(lease, format!("now held by {now_held}")));
            }
            let now = self.clock.now();
            let spec = Self::extension(ttl, now);
            match self.set(h.resource_version, spec).await {
                Ok(updated) => return Ok(Self::held(&lease.holder, &updated)),
                Err(e) => Writes(self).retry_after(OP, &e, attempts).await?,
            }
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        const OP: &str = "release lock";
        let mut attempts = Attempts::new();
        // Still ours as last seen: delete straight away, on the condition
        // that nothing changed since.
        if let Some(h) = self.remembered_tenure(lease) {
            attempts.count_one();
            match self.delete(h.resource_version).await {
                Ok(()) => return Ok(()),
                Err(e) => self.after_remembered_write(OP, &e, attempts).await?,
            }
        }
        loop {
            let Some(current) = self.get(OP, &mut attempts).await? else {
                return Ok(());
            };
            let h = holding(&current);
            if h.holder.as_deref() != Some(lease.holder.as_str()) || h.token != lease.token {
                return Ok(());
            }
            match self.delete(h.resource_version).await {
                Ok(()) => return Ok(()),
                Err(e) => Writes(self).retry_after(OP, &e, attempts).await?,
            }
        }
    }
}

/// Implements [`migration_core::Lock`] for a ledger type that keeps its run lock in a
/// [`LeaseLock`] field: every call goes to the Lease, so each Kubernetes backend states once
/// where its lock lives instead of repeating the three forwarding methods.
///
/// ```ignore
/// migration_kube::lock_by_lease!(ConfigMapLedger, lock);
/// ```
#[macro_export]
macro_rules! lock_by_lease {
    ($ledger:ty, $field:ident) => {
        $crate::lock_by_lease!(@forward $ledger, $field;
            acquire(holder: &str, ttl: ::std::time::Duration) -> ::migration_core::Lease;
            renew(lease: &::migration_core::Lease, ttl: ::std::time::Duration) -> ::migration_core::Lease;
            release(lease: &::migration_core::Lease) -> ();
        );
    };
    // Each method of the trait, forwarded once: the list above is the trait's signatures.
    (@forward $ledger:ty, $field:ident; $($method:ident($($arg:ident: $type:ty),*) -> $answer:ty;)*) => {
        #[::async_trait::async_trait]
        impl ::migration_core::Lock for $ledger {
            $(
                async fn $method(
                    &self,
                    $($arg: $type),*
                ) -> ::std::result::Result<$answer, ::migration_core::LedgerError> {
                    ::migration_core::Lock::$method(&self.$field, $($arg),*).await
                }
            )*
        }
    };
}
