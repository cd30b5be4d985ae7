//! `migrate status`: the ledger, failures first; or one entry whole.

use super::args::StatusArgs;
use super::{Failure, Out, open};
use crate::report::StatusView;
use migration_core::Ledger;
use migration_core::kept_output::{KeptAt, with_tail};

/// `message` with the output tail it names put back, read from where the ledger keeps it (the
/// Kubernetes ledgers' Secret, CONTRACT.md §5.2); a reader who may not read it is told where
/// it is and why it is not shown.
async fn with_kept_output(ledger: &dyn Ledger, message: String) -> String {
    let Some(at) = KeptAt::find(&message) else {
        return message;
    };
    match ledger.kept_output(&message).await {
        Ok(Some(tail)) => with_tail(&message, &tail),
        Ok(None) => format!(
            "{message}\n(the Secret {}/{} no longer holds key {})",
            at.namespace, at.secret, at.key
        ),
        Err(e) => format!(
            "{message}\n(not shown: {e}; whoever may read the Secret {}/{} sees it)",
            at.namespace, at.secret
        ),
    }
}

/// Reads the ledger and prints every entry, or (given a slug) that one
/// entry with its failure output; a slug the ledger does not know is an
/// error naming it.
pub async fn status(args: StatusArgs, out: &Out) -> Result<(), Failure> {
    let ledger = open(&args.ledger, &args.cluster).await?;
    let snapshot = ledger.read().await?;
    let view = StatusView::new(snapshot.as_ref(), &ledger.describe());
    let Some(slug) = args.slug else {
        out.emit(&view, |c| view.text(c));
        return Ok(());
    };
    if let Some(entry) = view.entry(slug.as_str()) {
        let mut entry = entry.clone();
        if let Some(message) = entry.message.take() {
            entry.message = Some(with_kept_output(&*ledger, message).await);
        }
        if let Some(failure) = entry.last_failure.as_mut() {
            let message = std::mem::take(&mut failure.message);
            failure.message = with_kept_output(&*ledger, message).await;
        }
        out.emit(&entry, |_| entry.text());
        return Ok(());
    }
    let key = format!("m.{slug}");
    if let Some(c) = view.corrupt.iter().find(|c| c.key == key) {
        return Err(Failure::bad_input(vec![format!(
            "{}: ledger key '{}' is corrupt: {}",
            view.ledger, c.key, c.reason
        )]));
    }
    let known = snapshot
        .iter()
        .flat_map(|s| s.records.keys())
        .map(|s| s.as_str());
    let hint = super::suggest::did_you_mean(slug.as_str(), known);
    Err(Failure::bad_input(vec![format!(
        "{}: no entry for '{slug}'{hint}",
        view.ledger
    )]))
}
