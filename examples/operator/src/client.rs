//! The operator's API client: the project's client (kube's retry layer off,
//! `migration_kube::client`) with every request naming the program and its
//! version in its User-Agent, and its URI without the `?&` kube's request
//! builder leaves when a query starts empty.

use http::header::{HeaderValue, USER_AGENT};
use kube::client::ClientBuilder;

/// The User-Agent of every request: program and version, as the API
/// server's audit log and its `managedFields` name the writer.
pub const AGENT: &str = concat!("migrate-operator/", env!("CARGO_PKG_VERSION"));

/// `uri` with a `?&` (an empty first query pair) and an empty trailing `?`
/// removed; any other URI unchanged.
pub fn tidy_uri(uri: &http::Uri) -> Option<http::Uri> {
    let text = uri.to_string();
    let tidy = if let Some(rest) = text.strip_suffix('?') {
        rest.to_owned()
    } else {
        text.replacen("?&", "?", 1)
    };
    (tidy != text).then(|| tidy.parse().ok()).flatten()
}

/// A request as the operator sends it: its URI tidied ([`tidy_uri`]).
pub fn tidy<B>(mut request: http::Request<B>) -> http::Request<B> {
    if let Some(uri) = tidy_uri(request.uri()) {
        *request.uri_mut() = uri;
    }
    request
}

/// A client for `config`, built as [`migration_kube::client::from_config`]
/// builds it, sending [`AGENT`] and tidy URIs.
///
/// # Errors
/// What kube reports for an unusable TLS or auth setting.
pub fn from_config(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    config
        .headers
        .push((USER_AGENT, HeaderValue::from_static(AGENT)));
    let builder = ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&tower::util::MapRequestLayer::new(tidy))
        .build())
}

/// A client for the cluster kube finds the usual way (`KUBECONFIG`,
/// `~/.kube/config`, in-cluster), as [`from_config`] builds it.
///
/// # Errors
/// No configuration found or unusable.
pub async fn infer() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    from_config(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_first_query_pair_and_an_empty_query_are_removed_and_nothing_else() {
        let t =
            |s: &str| tidy_uri(&s.parse().unwrap()).map_or_else(|| s.to_owned(), |u| u.to_string());
        assert_eq!(
            t("/api/v1/namespaces/ns/pods?&watch=true&resourceVersion=0"),
            "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=0"
        );
        assert_eq!(
            t("/api/v1/namespaces/ns/configmaps/x?"),
            "/api/v1/namespaces/ns/configmaps/x"
        );
        assert_eq!(t("/api/v1/pods?limit=1&x=2"), "/api/v1/pods?limit=1&x=2");
        assert_eq!(t("/api/v1/pods"), "/api/v1/pods");
        assert!(AGENT.starts_with("migrate-operator/0."), "{AGENT}");
    }
}
