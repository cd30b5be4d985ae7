//! The one way this project builds a [`kube::Client`]: without kube's own
//! retry layer.
//!
//! kube's [`Config`](kube::Config) turns `default_retry` on, which stacks a
//! tower retry of 429/503/504 (up to 15 tries each) under every request.
//! The ledger backends already retry transient errors themselves, bounded by
//! their [`RetryPolicy`](crate::RetryPolicy) and counted against it, and a
//! second layer below would multiply one write into many requests and hide
//! the count the policy promises. So transient retries have one owner, the
//! backend, and every client here is built with `default_retry` off.

/// A client for `config`, with kube's retry layer off (see the module).
///
/// # Errors
/// What [`kube::Client::try_from`] reports (an unusable TLS or auth setting).
pub fn from_config(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    kube::Client::try_from(config)
}

/// A client for the cluster kube finds the usual way (`KUBECONFIG`,
/// `~/.kube/config`, in-cluster), as [`kube::Client::try_default`] would
/// build it but with kube's retry layer off (see the module).
///
/// # Errors
/// No configuration found or unusable ([`kube::Error::InferConfig`]), or
/// what [`from_config`] reports.
pub async fn infer() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    from_config(config)
}
