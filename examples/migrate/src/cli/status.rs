//! `migrate status`: the ledger, failures first.

use super::args::StatusArgs;
use super::{Failure, Out, open};
use crate::report::StatusView;

/// Reads the ledger and prints every entry.
pub async fn status(args: StatusArgs, out: &Out) -> Result<(), Failure> {
    let ledger = open(&args.ledger).await?;
    let snapshot = ledger.read().await?;
    let view = StatusView::new(snapshot.as_ref(), &ledger.describe());
    out.emit(&view, |c| view.text(c));
    Ok(())
}
