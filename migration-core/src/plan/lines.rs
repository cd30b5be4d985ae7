//! The manifest's lines joined with what the tree and the ledger hold for
//! each, computed once per plan.

use crate::ledger::{LedgerSnapshot, Record};
use crate::manifest::Manifest;
use crate::slug::Slug;
use crate::tree::{MigrationsTree, Script};

/// What the tree and the ledger hold for each manifest line, by the line's
/// index in manifest order.
///
/// Built once with one hash lookup per script, record and revoked slug, so
/// that the walks over the manifest read these vectors in order instead of
/// searching the tree's and the snapshot's sorted maps for every line (which
/// made planning grow as N log N with a cache miss per level).
pub(super) struct Lines<'a> {
    /// The script on disk, if any.
    pub(super) scripts: Vec<Option<&'a Script>>,
    /// The ledger record, if any (always `None` without a ledger).
    pub(super) records: Vec<Option<&'a Record>>,
    /// The slug is listed in `revoked`.
    pub(super) revoked: Vec<bool>,
    /// Scripts on disk that no manifest line lists, in slug order.
    pub(super) unlisted: Vec<&'a Script>,
}

impl<'a> Lines<'a> {
    pub(super) fn index(
        tree: &'a MigrationsTree,
        manifest: &Manifest,
        ledger: Option<&'a LedgerSnapshot>,
    ) -> Self {
        let mut offsets = Vec::with_capacity(manifest.batches().len());
        let mut total = 0;
        for batch in manifest.batches() {
            offsets.push(total);
            total += batch.entries.len();
        }
        let line_of = |slug: &Slug| manifest.position(slug).map(|p| offsets[p.batch] + p.index);
        let mut lines = Lines {
            scripts: vec![None; total],
            records: vec![None; total],
            revoked: vec![false; total],
            unlisted: Vec::new(),
        };
        // Scripts and records are both sorted by slug: walk them together,
        // so that a slug with both costs one lookup, not two.
        let mut scripts = tree.scripts().iter().peekable();
        let mut records = ledger
            .into_iter()
            .flat_map(|snapshot| snapshot.records.iter())
            .peekable();
        loop {
            let (slug, script, record) = match (scripts.peek(), records.peek()) {
                (None, None) => break,
                (Some((s, _)), Some((r, _))) if s == r => {
                    let (slug, script) = scripts.next().unzip();
                    let record = records.next().map(|(_, record)| record);
                    (slug, script, record)
                }
                (Some((s, _)), Some((r, _))) if r < s => {
                    let (slug, record) = records.next().unzip();
                    (slug, None, record)
                }
                (Some(_), _) => {
                    let (slug, script) = scripts.next().unzip();
                    (slug, script, None)
                }
                (None, Some(_)) => {
                    let (slug, record) = records.next().unzip();
                    (slug, None, record)
                }
            };
            let Some(slug) = slug else { break };
            match line_of(slug) {
                Some(i) => {
                    lines.scripts[i] = script;
                    lines.records[i] = record;
                }
                None => lines.unlisted.extend(script),
            }
        }
        for revoked in tree.revoked() {
            if let Some(i) = line_of(&revoked.slug) {
                lines.revoked[i] = true;
            }
        }
        lines
    }
}
