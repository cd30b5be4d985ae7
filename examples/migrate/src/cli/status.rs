//! `migrate status`: the ledger, failures first; or one entry whole.

use super::args::StatusArgs;
use super::{Failure, Out, open};
use crate::report::StatusView;

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
        out.emit(entry, |_| entry.text());
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
