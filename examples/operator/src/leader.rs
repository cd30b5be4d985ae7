//! Leader election through a Lease.
//!
//! Kept on the [`Lock`] trait itself rather than on core's lock keeper: the
//! keeper treats one failed renewal as a lost lock, which is right for a
//! run that writes, but a leader that only decides can keep leading while
//! its Lease is still valid, and must not give up over one API server blip.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use kube::Client;
use migration_core::{Clock, LedgerError, Lock};
use tokio::time::Instant;

/// Called with the API server's words when it refuses a leader-election
/// request for want of a right, once per distinct refusal.
pub type Refusal = Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// Leader election: a Lease in the operator's namespace. Only the holder
/// reconciles; a replica that loses it stops acting until it wins it back.
pub struct Leadership {
    lock: migration_kube::LeaseLock,
    identity: String,
    ttl: Duration,
    refused: Option<Refusal>,
}

/// Whether a lock error is the API server refusing the request for want of
/// a right (its message names the verb and the resource).
fn is_refusal(e: &LedgerError) -> bool {
    let text = e.to_string();
    text.contains("forbidden") || text.contains("403")
}

impl Leadership {
    /// How often a follower tries to take the lease: as often as the
    /// leader renews it, so a lapsed lease is taken within a period.
    fn campaign_period(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(200))
    }

    /// How often the leader renews: a third of the lease.
    fn renew_period(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(100))
    }

    /// How long before the Lease could lapse the leader stops acting when
    /// it could not renew: a tenth of the lease, for the clocks and the
    /// last request's round trip.
    fn margin(&self) -> Duration {
        self.ttl / 10
    }

    /// Leader election through Lease `name` in `namespace`.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        clock: Arc<dyn Clock>,
        ttl: Duration,
    ) -> Self {
        let lock = migration_kube::LeaseLock::new(
            client,
            namespace,
            name,
            migration_kube::Writer {
                ledger: format!("leader election {namespace}/{name}"),
                retry: migration_kube::RetryPolicy::default(),
            },
            clock,
        );
        Leadership {
            lock,
            identity: identity.to_owned(),
            ttl,
            refused: None,
        }
    }

    /// Calls `refused` whenever the API server refuses a leader-election
    /// request for want of a right (besides the warning always logged).
    pub fn on_refusal(mut self, refused: Refusal) -> Self {
        self.refused = Some(refused);
        self
    }

    /// Says a refused request: a warning naming what was refused, and the
    /// [`Refusal`] callback, once per distinct refusal (`said` keeps them).
    async fn refusal(&self, what: &str, e: &LedgerError, said: &mut Option<String>) {
        let text = format!("{what} the leader Lease was refused: {e}");
        if said.as_deref() == Some(text.as_str()) {
            return;
        }
        tracing::warn!("missing right: {text}");
        if let Some(f) = &self.refused {
            f(text.clone()).await;
        }
        *said = Some(text);
    }

    /// Runs `work` whenever this replica leads, until `work` returns.
    /// Leadership is renewed every third of the lease; when renewals fail,
    /// `work` is kept until the Lease could have lapsed, then dropped
    /// (stopping the controller) and the replica goes back to campaigning.
    pub async fn run<F, Fut>(&self, work: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.run_until(work, std::future::pending()).await;
    }

    /// As [`Leadership::run`], until `shutdown` completes (SIGTERM): then
    /// `work` is dropped and a held Lease is released, so that another
    /// replica takes over at its next campaign instead of waiting for the
    /// Lease to lapse.
    pub async fn run_until<F, Fut, S>(&self, work: F, shutdown: S)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ()>,
        S: std::future::Future<Output = ()>,
    {
        tokio::pin!(shutdown);
        let mut said = None;
        loop {
            let sent = Instant::now();
            let acquired = tokio::select! {
                acquired = self.lock.acquire(&self.identity, self.ttl) => acquired,
                () = &mut shutdown => return,
            };
            let lease = match acquired {
                Ok(lease) => lease,
                Err(e) => {
                    match &e {
                        LedgerError::LockHeld { .. } => {
                            tracing::debug!(error = %e, "not the leader; campaigning");
                        }
                        e if is_refusal(e) => {
                            self.refusal("taking", e, &mut said).await;
                        }
                        e => {
                            tracing::warn!(error = %e, "campaigning for leadership failed; trying again")
                        }
                    }
                    tokio::select! {
                        () = tokio::time::sleep(self.campaign_period()) => continue,
                        () = &mut shutdown => return,
                    }
                }
            };
            said = None;
            tracing::info!(identity = %self.identity, "became the leader");
            let mut lease = lease;
            let end = {
                let keep = async {
                    // The Lease is valid until `ttl` after the request that
                    // last took or renewed it was sent.
                    let mut valid_until = sent + self.ttl;
                    let mut next = Instant::now() + self.renew_period();
                    loop {
                        let stop_at = valid_until - self.margin();
                        tokio::time::sleep_until(next.min(stop_at)).await;
                        if Instant::now() >= stop_at {
                            tracing::warn!(
                                "could not renew the leader Lease before it could lapse; stopping"
                            );
                            return;
                        }
                        let sent = Instant::now();
                        match tokio::time::timeout_at(stop_at, self.lock.renew(&lease, self.ttl))
                            .await
                        {
                            Ok(Ok(renewed)) => {
                                lease = renewed;
                                valid_until = sent + self.ttl;
                                next = sent + self.renew_period();
                            }
                            Ok(Err(e @ LedgerError::LockLost { .. })) => {
                                tracing::warn!(error = %e, "lost leadership; stopping");
                                return;
                            }
                            Ok(Err(e)) => {
                                if is_refusal(&e) {
                                    let mut said = None;
                                    self.refusal("renewing", &e, &mut said).await;
                                }
                                let left = valid_until.saturating_duration_since(Instant::now());
                                tracing::warn!(
                                    error = %e,
                                    lease_left_ms = left.as_millis() as u64,
                                    "renewing the leader Lease failed; still leading while it is valid, trying again"
                                );
                                // Sooner than a period: the Lease is running out.
                                next = Instant::now() + (self.renew_period() / 3);
                            }
                            Err(_elapsed) => {}
                        }
                    }
                };
                tokio::select! {
                    () = work() => Some("work ended"),
                    () = keep => None,
                    () = &mut shutdown => Some("shutting down"),
                }
            };
            let Some(why) = end else {
                continue;
            };
            match self.lock.release(&lease).await {
                Ok(()) => tracing::info!(identity = %self.identity, why, "released leadership"),
                Err(e) => {
                    tracing::warn!(error = %e, why, "could not release leadership; it lapses")
                }
            }
            return;
        }
    }
}
