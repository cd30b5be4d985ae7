//! Leader election through a Lease.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use migration_core::{Clock, LockKeeper};

/// Leader election: a Lease in the operator's namespace. Only the holder
/// reconciles; a replica that loses it stops acting until it wins it back.
pub struct Leadership {
    lock: migration_kube::LeaseLock,
    identity: String,
    ttl: Duration,
}

impl Leadership {
    /// How often a follower tries to take the lease: as often as the
    /// leader renews it, so a lapsed lease is taken within a period.
    fn campaign_period(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(200))
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
        }
    }

    /// Runs `work` whenever this replica leads, until `work` returns.
    /// Leadership is renewed every third of the lease; when a renewal
    /// fails, `work` is dropped (stopping the controller) and the replica
    /// goes back to campaigning.
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
        loop {
            let acquired = tokio::select! {
                acquired = LockKeeper::acquire(&self.lock, &self.identity, self.ttl) => acquired,
                () = &mut shutdown => return,
            };
            let mut keeper = match acquired {
                Ok(keeper) => keeper,
                Err(e) => {
                    tracing::debug!(error = %e, "not the leader; campaigning");
                    tokio::select! {
                        () = tokio::time::sleep(self.campaign_period()) => continue,
                        () = &mut shutdown => return,
                    }
                }
            };
            tracing::info!(identity = %self.identity, "became the leader");
            let period = keeper.period();
            let end = {
                let keep = async {
                    loop {
                        tokio::time::sleep(period).await;
                        if let Err(e) = keeper.renew().await {
                            tracing::warn!(error = %e, "lost leadership; stopping");
                            return;
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
            match keeper.release().await {
                Ok(()) => tracing::info!(identity = %self.identity, why, "released leadership"),
                Err(e) => {
                    tracing::warn!(error = %e, why, "could not release leadership; it lapses")
                }
            }
            return;
        }
    }
}
