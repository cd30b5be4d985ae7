//! Leader election through a Lease.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use migration_core::Clock;

/// Leader election: a Lease in the operator's namespace. Only the holder
/// reconciles; a replica that loses it stops acting until it wins it back.
pub struct Leadership {
    lock: migration_kube::LeaseLock,
    identity: String,
    ttl: Duration,
}

impl Leadership {
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
            &format!("leader election {namespace}/{name}"),
            clock,
            migration_kube::RetryPolicy::default(),
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
        let period = (self.ttl / 3).max(Duration::from_millis(200));
        loop {
            let lease = match self.lock.acquire(&self.identity, self.ttl).await {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::debug!(error = %e, "not the leader; campaigning");
                    tokio::time::sleep(period).await;
                    continue;
                }
            };
            tracing::info!(identity = %self.identity, "became the leader");
            let mut lease = lease;
            let keep = async {
                loop {
                    tokio::time::sleep(period).await;
                    match self.lock.renew(&lease, self.ttl).await {
                        Ok(renewed) => lease = renewed,
                        Err(e) => {
                            tracing::warn!(error = %e, "lost leadership; stopping");
                            return;
                        }
                    }
                }
            };
            tokio::select! {
                () = work() => return,
                () = keep => {}
            }
        }
    }
}
