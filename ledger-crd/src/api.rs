//! The requests the ledger sends, and what their errors mean: a 404 naming
//! the object is an absent ledger, any other 404 a missing CRD.

use std::sync::Arc;

use kube::api::Patch;
use migration_core::LedgerError;
use migration_kube::{Attempts, Backoff, Class, classify, ledger_error, patch_params, post_params};
use serde_json::{Value, json};

use crate::CrdLedger;
use crate::resource::{GROUP, PLURAL, VERSION};

fn api_status(e: &kube::Error) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

/// The fields a `fieldValidation=Strict` write was refused for because the
/// installed schema does not declare them: a 422 whose message ends in
/// `strict decoding error: unknown field "status.lock", unknown field …`
/// (kube-apiserver 1.34; the message before it quotes the whole patched
/// object, whose own text may contain anything, so only the part after the
/// last `strict decoding error:` is read). `None` for any other error.
pub(crate) fn pruned_fields(e: &kube::Error) -> Option<Vec<String>> {
    const MARK: &str = "strict decoding error: ";
    let status = api_status(e).filter(|s| s.code == 422)?;
    let tail = &status.message[status.message.rfind(MARK)? + MARK.len()..];
    let fields: Vec<String> = tail
        .split("unknown field \"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(field, _)| field.to_owned()))
        .collect();
    (!fields.is_empty()).then_some(fields)
}

impl CrdLedger {
    /// A 404 that names this object: it does not exist. Any other 404 means
    /// the API server does not serve the resource at all.
    pub(crate) fn is_absent(&self, e: &kube::Error) -> bool {
        api_status(e).is_some_and(|s| {
            s.code == 404 && s.details.as_ref().is_some_and(|d| d.name == self.name)
        })
    }

    /// Maps a final error, telling a missing CRD and an outdated one from
    /// everything else.
    pub(crate) fn error(
        &self,
        operation: &'static str,
        what: &str,
        e: &kube::Error,
    ) -> LedgerError {
        if let Some(fields) = pruned_fields(e) {
            return self.permanent(
                operation,
                format!(
                    "{what}: the installed CustomResourceDefinition {PLURAL}.{GROUP} is older than \
                     this engine: its schema does not declare {}, which this write sets and the API \
                     server would prune (the write was refused, nothing was written); update it \
                     with `migrate crd | kubectl apply -f -`",
                    fields.join(", ")
                ),
            );
        }
        if classify(e) == Class::NotFound && !self.is_absent(e) {
            return self.permanent(
                operation,
                format!(
                    "{what}: the API server does not serve {PLURAL}.{GROUP}/{VERSION} ({e}); \
                     install the CustomResourceDefinition first (`migrate crd | kubectl apply -f -`)"
                ),
            );
        }
        ledger_error(&self.handle.writer.ledger, operation, what, e)
    }

    pub(crate) fn build_error(
        &self,
        operation: &'static str,
        e: impl std::fmt::Display,
    ) -> LedgerError {
        self.permanent(
            operation,
            format!("{}: cannot build the request: {e}", self.object()),
        )
    }

    /// Reads the object as the API server stores it, retrying transient
    /// errors through [`Backoff::retry`]. `attempts` counts tries across the
    /// caller's whole operation (reads and writes share the retry budget).
    /// `None` only for a 404 that names this object. What it read is
    /// remembered as the base of the next conditional write.
    ///
    /// Not `RetryPolicy::get_opt`: that one reads a typed object, which
    /// would make one malformed value fail the whole read, and takes any 404
    /// for an absent object, which would make a missing CRD a fresh install.
    pub(crate) async fn fetch(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
    ) -> Result<Option<Arc<Value>>, LedgerError> {
        let object = self.object();
        // A request that cannot be built is answered as such, untried: the
        // inner `Err`, which the retry loop takes for a success.
        let read = self
            .handle
            .writer
            .retry
            .retry(attempts, operation, &object, || async move {
                let request = match self.request.get(&self.name, &Default::default()) {
                    Ok(request) => request,
                    Err(e) => return Ok(Err(e)),
                };
                match self.client.request::<Value>(request).await {
                    Ok(object) => Ok(Ok(Some(object))),
                    Err(e) if self.is_absent(&e) => Ok(Ok(None)),
                    Err(e) => Err(e),
                }
            })
            .await;
        match read {
            Ok(Ok(object)) => {
                let object = object.map(Arc::new);
                self.handle.remember(object.clone());
                Ok(object)
            }
            Ok(Err(e)) => Err(self.build_error(operation, e)),
            Err(e) => Err(self.error(operation, &object, &e)),
        }
    }

    pub(crate) async fn post(&self, body: &Value) -> Result<Value, kube::Error> {
        let params = post_params();
        let bytes = serde_json::to_vec(body).map_err(kube::Error::SerdeError)?;
        let request = self
            .request
            .create(&params, bytes)
            .map_err(kube::Error::BuildRequest)?;
        self.client.request::<Value>(request).await
    }

    /// Sends a JSON Patch to the status subresource. kube's typed JSON Patch
    /// needs another crate (`json-patch`), so this is kube's merge-patch
    /// request with the body and the content type swapped.
    ///
    /// With `fieldValidation=Strict`: an installed CRD older than this
    /// engine, whose schema lacks a field the write sets (`status.lock`,
    /// `status.failures`), would prune it silently and the ledger would
    /// read back without it (a lock nobody sees, entries naming shared
    /// records that are not there). Strict makes the API server refuse the
    /// whole write instead, naming the field ([`pruned_fields`]), so nothing
    /// is written and the error says to update the CRD.
    pub(crate) async fn patch_status(&self, ops: &[Value]) -> Result<Value, kube::Error> {
        let mut request = self
            .request
            .patch_subresource(
                "status",
                &self.name,
                &patch_params().validation_strict(),
                &Patch::Merge(json!({})),
            )
            .map_err(kube::Error::BuildRequest)?;
        *request.body_mut() = serde_json::to_vec(ops).map_err(kube::Error::SerdeError)?;
        request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json-patch+json"),
        );
        self.client.request::<Value>(request).await
    }
}
