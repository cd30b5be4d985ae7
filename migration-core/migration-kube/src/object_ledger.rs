//! What the two Kubernetes ledgers do alike around their one object: the
//! copy last seen that the next conditional write starts from, the output
//! tails kept in the Secret beside the object before the write that names
//! them (CONTRACT.md §5.2), and the run lock the object holds (taken,
//! renewed and released by conditional writes of the lock alone, or by the
//! step write that carries the records too; CONTRACT.md §5.5).
//!
//! A backend implements [`ObjectLedger`] (its object's shape and how it
//! reads and writes it); the functions here are the
//! [`Ledger`](migration_core::Ledger) and [`Lock`](migration_core::Lock)
//! methods written once over it, and [`object_ledger_impl!`](crate::object_ledger_impl)
//! implements both traits by them.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use migration_core::fence::{LockWrite, ObjectLock, StoredLock, new_token};
use migration_core::last_failure::LastFailure;
use migration_core::step::{AttemptNote, FailureNote, StepMode, StepReport, StepWrite};
use migration_core::{
    Clock, Lease, LedgerEntry, LedgerError, LedgerSnapshot, Slug, WriteMode, WriteReport,
};

use crate::output_secret::{Kept, OutputSecret};
use crate::{Attempts, Base, ConditionalObject, LeaseLock, RetryPolicy, Step, WriteTarget, Writer};

/// What a handle on a ledger kept in one object holds beside the object's
/// address, the same on both backends.
#[derive(Clone)]
pub struct ObjectHandle<T> {
    /// The ledger as errors name it, and the retry policy of its requests.
    pub writer: Writer,
    /// The clock lock expiry (and the custom resource's condition times)
    /// are judged on.
    pub clock: Arc<dyn Clock>,
    /// The Lease runners of older releases lock this ledger through: taking
    /// the lock in the object first checks that no such runner holds it
    /// (CONTRACT.md §5.5).
    pub older_runners: LeaseLock,
    /// The Secret `<name>-output` that keeps the ledger's failures' output
    /// tails (CONTRACT.md §5.2): the entries name it.
    pub output: OutputSecret,
    /// The object this handle (and its clones) last read or wrote: the base
    /// of its next conditional write, so that a write needs no read first.
    /// The `resourceVersion` precondition makes a stale copy harmless.
    last_seen: Arc<Mutex<Option<Arc<T>>>>,
}

impl<T> ObjectHandle<T> {
    /// The handle of the ledger object `name`, named `ledger` in errors,
    /// whose Lease `lease_name` and output Secret live in `namespace`.
    pub fn new(
        client: &kube::Client,
        ledger: String,
        name: &str,
        namespace: &str,
        lease_name: &str,
        retry: RetryPolicy,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let writer = Writer { ledger, retry };
        ObjectHandle {
            older_runners: LeaseLock::new(
                client.clone(),
                namespace,
                lease_name,
                writer.clone(),
                clock.clone(),
            ),
            output: OutputSecret::new(client.clone(), namespace, name, &writer.ledger, retry),
            writer,
            clock,
            last_seen: Arc::default(),
        }
    }

    /// The object last seen, if any.
    pub fn seen(&self) -> Option<Arc<T>> {
        self.last_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Remembers `object` (`None`: absent, or unknown after a failed write).
    pub fn remember(&self, object: Option<Arc<T>>) {
        *self
            .last_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = object;
    }

    /// The base of a conditional write's try ([`crate::ConditionalObject::base`]):
    /// on the `first` try the remembered copy (counted in `attempts`, no
    /// request), otherwise what `read` reads; an absent object is
    /// [`LedgerError::NotFound`].
    pub async fn base(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
        first: bool,
        read: impl AsyncFnOnce(&mut Attempts) -> Result<Option<Arc<T>>, LedgerError>,
    ) -> Result<Base<Arc<T>>, LedgerError> {
        if first && let Some(object) = self.seen() {
            attempts.count_one();
            return Ok(Base {
                object,
                fresh: false,
            });
        }
        match read(attempts).await? {
            Some(object) => Ok(Base {
                object,
                fresh: true,
            }),
            None => Err(LedgerError::NotFound {
                ledger: self.writer.ledger.clone(),
                operation,
            }),
        }
    }
}

/// A ledger kept in one Kubernetes object with its output tails in a Secret
/// beside it and its run lock inside it: what the shared functions of this
/// module need of a backend.
pub trait ObjectLedger: Sync {
    /// The object as read.
    type Object: Send + Sync;
    /// What one conditional write of the object sends.
    type Write: Send + Sync;

    /// What the handle holds beside the object's address.
    fn handle(&self) -> &ObjectHandle<Self::Object>;

    /// Reads the object, retrying transient errors (`None`: absent), and
    /// remembers it.
    fn read_fresh(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
    ) -> impl Future<Output = Result<Option<Arc<Self::Object>>, LedgerError>> + Send;

    /// Sends `write`, conditioned on `base`'s resourceVersion, and answers
    /// the object as stored.
    fn send_write(
        &self,
        base: &Self::Object,
        write: &Self::Write,
    ) -> impl Future<Output = Result<Self::Object, kube::Error>> + Send;

    /// Maps an error that ends a conditional write, naming the object.
    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError;

    /// The reference to `object` that owns the Secret, so it goes with it.
    fn owner(&self, object: &Self::Object) -> Option<OwnerReference>;

    /// The message `object` stores under ledger key `key` (an entry's, or a
    /// last failure's).
    fn stored_message(object: &Self::Object, key: &str) -> Option<String>;

    /// [`Ledger::read`](migration_core::Ledger::read): the object read
    /// (always a request) as a snapshot, `None` while there is no ledger.
    fn read_object(
        &self,
    ) -> impl Future<Output = Result<Option<LedgerSnapshot>, LedgerError>> + Send;

    /// [`Ledger::note_attempt`](migration_core::Ledger::note_attempt): one
    /// conditional write of `note`'s attempt mark, answering its count.
    fn note_attempt_object(
        &self,
        note: AttemptNote<'_>,
    ) -> impl Future<Output = Result<u32, LedgerError>> + Send;

    /// Creates the object holding `entries` (their tails already kept).
    fn create_object(
        &self,
        entries: &[(Slug, LedgerEntry)],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Writes `entries` into the object (their tails already kept, their
    /// slugs checked).
    fn write_object(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> impl Future<Output = Result<WriteReport, LedgerError>> + Send;

    /// Stores the last failure of `slug` (its tail already kept).
    fn note_failure_object(
        &self,
        slug: &Slug,
        failure: &LastFailure,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// The step as one conditional write (its tails already kept, its slugs
    /// checked); a [`StepMode::Take`] creates the tenure `take_token`.
    fn write_step_object(
        &self,
        step: &StepWrite<'_>,
        take_token: &str,
    ) -> impl Future<Output = Result<StepReport, LedgerError>> + Send;

    /// One conditional write of the run lock alone: `decide` sees the lock
    /// as the object stores it and answers the lock to store (`None`
    /// removes it) or that nothing changes.
    fn update_lock<T: Send>(
        &self,
        operation: &'static str,
        decide: impl FnMut(ObjectLock<'_>) -> Result<Step<Option<StoredLock>, T>, LedgerError> + Send,
    ) -> impl Future<Output = Result<T, LedgerError>> + Send;
}

/// An [`ObjectLedger`]'s object as the target of its conditional writes:
/// the base of a write is the copy last seen on its first try (no
/// request), a fresh read on every later one; the object a write stores is
/// remembered, and after a failed one nothing is.
pub struct Conditional<'a, L>(pub &'a L);

impl<L: ObjectLedger> WriteTarget for Conditional<'_, L> {
    fn writer(&self) -> &Writer {
        &self.0.handle().writer
    }

    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError {
        self.0.final_error(operation, error)
    }
}

impl<L: ObjectLedger> ConditionalObject for Conditional<'_, L> {
    type Object = Arc<L::Object>;
    type Write = L::Write;

    async fn base(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
        first: bool,
    ) -> Result<Base<Arc<L::Object>>, LedgerError> {
        let ledger = self.0;
        let read = async |attempts: &mut Attempts| ledger.read_fresh(operation, attempts).await;
        ledger.handle().base(operation, attempts, first, read).await
    }

    async fn send(&self, base: &Arc<L::Object>, write: &L::Write) -> Result<(), kube::Error> {
        let stored = self.0.send_write(base, write).await?;
        self.0.handle().remember(Some(Arc::new(stored)));
        Ok(())
    }

    fn forget(&self) {
        self.0.handle().remember(None);
    }
}

/// Moves the output tails of `records` and `failure` into the Secret, owned
/// by the object as last seen.
async fn keep<L: ObjectLedger>(
    ledger: &L,
    records: &[(Slug, LedgerEntry)],
    failure: Option<FailureNote<'_>>,
) -> Kept {
    let seen = ledger.handle().seen();
    let owner = seen.as_deref().and_then(|object| ledger.owner(object));
    let stored = |key: &str| L::stored_message(seen.as_deref()?, key);
    ledger
        .handle()
        .output
        .keep(records, failure, owner, stored)
        .await
}

/// [`Ledger::create`](migration_core::Ledger::create): the tails, then the
/// object.
pub async fn create<L: ObjectLedger>(
    ledger: &L,
    entries: &[(Slug, LedgerEntry)],
) -> Result<(), LedgerError> {
    let kept = keep(ledger, entries, None).await;
    ledger.create_object(&kept.records).await
}

/// [`Ledger::write`](migration_core::Ledger::write): the tails, the write,
/// then the removal of tails it leaves unnamed.
pub async fn write<L: ObjectLedger>(
    ledger: &L,
    entries: &[(Slug, LedgerEntry)],
    mode: WriteMode,
) -> Result<WriteReport, LedgerError> {
    let mut kept = keep(ledger, entries, None).await;
    migration_core::ledger::refuse_repeated_slugs(
        &ledger.handle().writer.ledger,
        "write",
        &kept.records,
    )?;
    if mode == WriteMode::OnlyIfAbsent {
        // An entry already present stays, and so does the tail it names.
        kept.unnamed.clear();
    }
    let report = ledger.write_object(&kept.records, mode).await?;
    ledger.handle().output.forget(&kept.unnamed).await;
    Ok(report)
}

/// [`Ledger::note_failure`](migration_core::Ledger::note_failure): the
/// tail, then the last failure naming it.
pub async fn note_failure<L: ObjectLedger>(
    ledger: &L,
    slug: &Slug,
    failure: &LastFailure,
) -> Result<(), LedgerError> {
    let kept = keep(ledger, &[], Some(FailureNote { slug, failure })).await;
    let failure = kept.failure.as_ref().unwrap_or(failure);
    ledger.note_failure_object(slug, failure).await
}

/// [`Ledger::write_step`](migration_core::Ledger::write_step): the step's
/// tails, then its one conditional write, then the removal of tails it
/// leaves unnamed. A take first checks the Lease of older runners.
pub async fn write_step<L: ObjectLedger>(
    ledger: &L,
    step: &StepWrite<'_>,
) -> Result<StepReport, LedgerError> {
    const OP: &str = "write step";
    let kept = keep(ledger, step.records, step.failure).await;
    migration_core::ledger::refuse_repeated_slugs(
        &ledger.handle().writer.ledger,
        OP,
        &kept.records,
    )?;
    if let StepMode::Take { holder, .. } = step.mode {
        let older_runners = &ledger.handle().older_runners;
        older_runners.refuse_if_held_by_another(holder).await?;
    }
    // Chosen once, so a retry after a lost reply recognises its own take.
    let take_token = new_token(ledger.handle().clock.now());
    let step = StepWrite {
        records: &kept.records,
        failure: kept.failure_note(step.failure.map(|f| f.slug)),
        ..*step
    };
    let report = ledger.write_step_object(&step, &take_token).await?;
    ledger.handle().output.forget(&kept.unnamed).await;
    Ok(report)
}

/// What a step does to the lock `lock` reads ([`ObjectLock::step`]), when
/// the write stores nothing else (`nothing_else`) too: a release whose
/// reply was lost finds the lock gone and every record in place, so this
/// very write landed. An overwrite leaves the lock unread.
pub fn step_lock<'a>(
    mode: &StepMode<'_>,
    take_token: &str,
    nothing_else: bool,
    lock: impl FnOnce() -> Result<ObjectLock<'a>, LedgerError>,
) -> Result<(LockWrite, Option<Lease>), LedgerError> {
    if *mode == StepMode::Overwrite {
        return Ok((None, None));
    }
    match lock()?.step(mode, take_token) {
        Err(LedgerError::LockLost { .. })
            if matches!(mode, StepMode::Release { .. }) && nothing_else =>
        {
            Ok((None, None))
        }
        other => other,
    }
}

/// [`Lock::acquire`](migration_core::Lock::acquire): free, expired or
/// already `holder`'s is taken, after checking the Lease of older runners.
pub async fn acquire<L: ObjectLedger>(
    ledger: &L,
    holder: &str,
    ttl: Duration,
) -> Result<Lease, LedgerError> {
    let older_runners = &ledger.handle().older_runners;
    older_runners.refuse_if_held_by_another(holder).await?;
    let fresh_token = new_token(ledger.handle().clock.now());
    ledger
        .update_lock("acquire lock", |lock| {
            let taken = lock.take(holder, ttl, &fresh_token)?;
            let lease = taken.lease();
            Ok(Step::Write(Some(taken), lease))
        })
        .await
}

/// [`Lock::renew`](migration_core::Lock::renew): only `lease`'s own tenure;
/// a deleted object has lost it.
pub async fn renew<L: ObjectLedger>(
    ledger: &L,
    lease: &Lease,
    ttl: Duration,
) -> Result<Lease, LedgerError> {
    let result = ledger
        .update_lock("renew lock", |lock| {
            let renewed = lock
                .require(lease)?
                .renewed(ledger.handle().clock.now(), ttl);
            let lease = renewed.lease();
            Ok(Step::Write(Some(renewed), lease))
        })
        .await;
    match result {
        Err(LedgerError::NotFound { .. }) => Err(LedgerError::LockLost {
            ledger: ledger.handle().writer.ledger.clone(),
            holder: lease.holder.clone(),
            reason: "the ledger object was deleted".into(),
        }),
        other => other,
    }
}

/// [`Lock::release`](migration_core::Lock::release): a lease no longer
/// ours leaves the holder alone; a deleted object holds no lock.
pub async fn release<L: ObjectLedger>(ledger: &L, lease: &Lease) -> Result<(), LedgerError> {
    let result = ledger
        .update_lock("release lock", |lock| {
            Ok(if lock.stored.as_ref().is_some_and(|l| l.is(lease)) {
                Step::Write(None, ())
            } else {
                Step::Done(())
            })
        })
        .await;
    match result {
        Err(LedgerError::NotFound { .. }) => Ok(()),
        other => other,
    }
}

/// Implements [`migration_core::Ledger`] and [`migration_core::Lock`] for
/// an [`ObjectLedger`] by this module's functions (the traits are core's and
/// the type the backend's, so neither a blanket implementation here nor one
/// in core can).
#[rustfmt::skip]
#[macro_export]
macro_rules! object_ledger_impl {
    ($ledger:ty) => {
        #[async_trait::async_trait]
        impl migration_core::Ledger for $ledger {
            fn describe(&self) -> String { $crate::object_ledger::ObjectLedger::handle(self).writer.ledger.clone() }
            async fn read(&self) -> Result<Option<migration_core::LedgerSnapshot>, migration_core::LedgerError> { $crate::object_ledger::ObjectLedger::read_object(self).await }
            async fn create(&self, entries: &[(migration_core::Slug, migration_core::LedgerEntry)]) -> Result<(), migration_core::LedgerError> { $crate::object_ledger::create(self, entries).await }
            async fn write(&self, entries: &[(migration_core::Slug, migration_core::LedgerEntry)], mode: migration_core::WriteMode) -> Result<migration_core::WriteReport, migration_core::LedgerError> { $crate::object_ledger::write(self, entries, mode).await }
            async fn note_attempt(&self, slug: &migration_core::Slug, token: &str, floor: u32) -> Result<u32, migration_core::LedgerError> { $crate::object_ledger::ObjectLedger::note_attempt_object(self, migration_core::step::AttemptNote { slug, token, floor }).await }
            async fn note_failure(&self, slug: &migration_core::Slug, failure: &migration_core::last_failure::LastFailure) -> Result<(), migration_core::LedgerError> { $crate::object_ledger::note_failure(self, slug, failure).await }
            async fn kept_output(&self, message: &str) -> Result<Option<String>, migration_core::LedgerError> { $crate::object_ledger::ObjectLedger::handle(self).output.read(message).await }
            async fn write_step(&self, step: &migration_core::step::StepWrite<'_>) -> Result<migration_core::step::StepReport, migration_core::LedgerError> { $crate::object_ledger::write_step(self, step).await }
        }

        #[async_trait::async_trait]
        impl migration_core::Lock for $ledger {
            async fn acquire(&self, holder: &str, ttl: std::time::Duration) -> Result<migration_core::Lease, migration_core::LedgerError> { $crate::object_ledger::acquire(self, holder, ttl).await }
            async fn renew(&self, lease: &migration_core::Lease, ttl: std::time::Duration) -> Result<migration_core::Lease, migration_core::LedgerError> { $crate::object_ledger::renew(self, lease, ttl).await }
            async fn release(&self, lease: &migration_core::Lease) -> Result<(), migration_core::LedgerError> { $crate::object_ledger::release(self, lease).await }
        }
    };
}
