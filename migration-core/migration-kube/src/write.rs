//! How the backends write: under one field manager, and conditionally on
//! the resourceVersion that was read, re-reading and recomputing on a 409 a
//! bounded number of times.

use std::future::Future;

use kube::api::{PatchParams, PostParams};
use migration_core::LedgerError;

use crate::defaults::FIELD_MANAGER;
use crate::error::{Class, classify};
use crate::retry::{Attempts, Backoff, RetryPolicy};

/// Parameters of a patch under our field manager.
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Parameters of a create under our field manager.
pub fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// What a handle that writes keeps about its writes: the ledger they belong
/// to and how patiently they are tried. Every [`WriteTarget`] answers with
/// its handle's, so the backends and the Lease state it once.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The ledger, as errors name it.
    pub ledger: String,
    /// How often and how patiently to try.
    pub retry: RetryPolicy,
}

/// An object the backends write conditionally, as a failed write sees it:
/// the ledger it belongs to, the retry budget, and how a final error names
/// it. [`WriteTarget::retry_after`] is the one decision of whether a failed
/// write is tried again.
pub trait WriteTarget: Sync {
    /// The ledger the object belongs to and its retry policy.
    fn writer(&self) -> &Writer;

    /// Maps an error that ends the write (not a conflict, or no tries left
    /// for a transient error), naming the object.
    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError;

    /// What `error` means for this object's writes. [`classify`] unless an
    /// object gives some answer another meaning (a create that lost the
    /// race to another creator is a conflict for the Lease).
    fn class(&self, error: &kube::Error) -> Class {
        classify(error)
    }

    /// Decides what follows a write of `operation` that failed with `error`
    /// after the `attempts` the operation has made (the failed one
    /// included).
    ///
    /// A precondition conflict (409) or a transient error while
    /// the [`Writer::retry`] policy has tries left: waits [`RetryPolicy::delay`]
    /// and answers `Ok(())`, meaning "read again, recompute, write again". A
    /// conflict on the last try is [`LedgerError::Conflict`] naming the
    /// tries; anything else is final and mapped by
    /// [`WriteTarget::final_error`].
    ///
    /// Why a failed conditional write is not simply sent again by
    /// [`Backoff::retry`]: its outcome is unknown (it may have landed), so
    /// the next try starts from a fresh read, and the request counts the
    /// contract states depend on that. Its tries still count in the one
    /// [`Attempts`] budget the reads use.
    fn retry_after(
        &self,
        operation: &'static str,
        error: &kube::Error,
        attempts: Attempts,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send {
        async move {
            let retry = &self.writer().retry;
            let attempt = attempts.made();
            match self.class(error) {
                Class::Conflict | Class::Transient if attempts.left(retry) => {
                    tracing::debug!(%error, attempt, operation, "ledger write refused; re-reading and retrying");
                    retry.pause(attempt).await;
                    Ok(())
                }
                Class::Conflict => Err(LedgerError::Conflict {
                    ledger: self.writer().ledger.clone(),
                    operation,
                    attempts: attempt,
                }),
                _ => Err(self.final_error(operation, error)),
            }
        }
    }
}

/// The object a conditional write starts from.
#[derive(Debug)]
pub struct Base<O> {
    /// The object.
    pub object: O,
    /// Whether it was just read. `false` for a copy the handle remembered
    /// from an earlier request, which may be stale.
    pub fresh: bool,
}

/// What a conditional update decided on the object it read.
#[derive(Debug)]
pub enum Step<W, T> {
    /// Nothing to write: answer `T`.
    Done(T),
    /// Send `W`, and answer `T` once it has landed.
    Write(W, T),
}

/// An object a backend changes by conditional writes: the write carries the
/// resourceVersion of the object it was computed from, so a concurrent
/// change makes it fail with 409 instead of being overwritten.
pub trait ConditionalObject: WriteTarget {
    /// The object as read or remembered.
    type Object: Send + Sync;
    /// What one write sends.
    type Write: Send + Sync;

    /// The object the next try starts from. On the first try of an update
    /// (`first`) a remembered copy may serve (not fresh); on every later try
    /// it must be read (fresh), or the update could loop on a stale copy.
    /// Each read, and each use of a remembered copy, counts in `attempts`.
    fn base(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
        first: bool,
    ) -> impl Future<Output = Result<Base<Self::Object>, LedgerError>> + Send;

    /// Sends `write`, conditioned on `base`'s resourceVersion.
    fn send(
        &self,
        base: &Self::Object,
        write: &Self::Write,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Forgets any remembered copy after a failed write: the write's outcome
    /// is unknown, so the copy may no longer be the stored object.
    fn forget(&self) {}
}

/// One conditional update of `object`: take a base, let `decide` compute
/// what to write from it, write that on the condition that the object is
/// still as it was, and on a conflict or a transient error do it all again,
/// at most [`RetryPolicy::attempts`] tries in all.
///
/// An answer that sends nothing (nothing to write, or a refusal from
/// `decide`) is only given on a fresh read: on a remembered copy it reads
/// again first. A 409 on a remembered copy only says the copy was stale: it
/// reads again at once, without backing off.
pub async fn conditional_update<C, T>(
    object: &C,
    operation: &'static str,
    mut decide: impl FnMut(&C::Object) -> Result<Step<C::Write, T>, LedgerError>,
) -> Result<T, LedgerError>
where
    C: ConditionalObject,
{
    let mut attempts = Attempts::new();
    let mut first = true;
    loop {
        let base = object
            .base(operation, &mut attempts, std::mem::take(&mut first))
            .await?;
        let (write, answer) = match decide(&base.object) {
            Ok(Step::Write(write, answer)) => (write, answer),
            _ if !base.fresh => continue,
            Ok(Step::Done(answer)) => return Ok(answer),
            Err(e) => return Err(e),
        };
        match object.send(&base.object, &write).await {
            Ok(()) => return Ok(answer),
            Err(e) => {
                object.forget();
                if !base.fresh && object.class(&e) == Class::Conflict {
                    tracing::debug!(
                        operation,
                        "the remembered ledger object was stale; re-reading"
                    );
                    continue;
                }
                object.retry_after(operation, &e, attempts).await?;
            }
        }
    }
}
