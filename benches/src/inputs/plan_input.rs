//! [`PlanInput`]: a tree, its manifest and a ledger of a given size.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use migration_core::{
    EntryState, LedgerEntry, LedgerSnapshot, Manifest, MigrationsTree, PlanContext, PlanRequest,
    Sha256Digest, Slug, Tier, TreeFiles,
};

use super::{
    BATCH_SIZE, LEGACY, Rng, attempt_mark, epoch, image, ok_entry, release_label, script_bytes,
    slug,
};

/// What one migration of a generated tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Legacy,
    Recorded,
    Revoked,
    Retired,
    Failed,
    Pending,
}

/// A tree whose ledger holds `recorded` entries, with `pending` more
/// migrations not run yet, plus the raw ledger data (as a ConfigMap holds it).
///
/// Layout, all deterministic:
/// - the first [`LEGACY`] slugs are the legacy map (`version` is 57, so all
///   are recorded `legacy`), batch `00000-legacy`;
/// - the other recorded slugs come in release batches of [`BATCH_SIZE`]:
///   every 5th is in the background tier, every 10th requires a slug of an
///   earlier batch, every 100th is revoked (recorded `revoked`), every 50th is
///   retired (script deleted, line flagged, entry kept), every 200th is
///   recorded `failed`; recorded `ok` and `failed` slugs also have their
///   attempt mark (`a.<slug>`), as the runner leaves them;
/// - the `pending` slugs are one final release batch, pre-apply tier, every
///   3rd requiring a recorded slug.
#[derive(Debug, Clone)]
pub struct PlanInput {
    /// Entries in the ledger (legacy ones included).
    pub recorded: usize,
    /// Migrations not yet run.
    pub pending: usize,
    /// The raw tree files (order.d included).
    pub files: TreeFiles,
    /// The validated tree.
    pub tree: MigrationsTree,
    /// The manifest files, `(name, bytes)`.
    pub order_files: Vec<(String, Vec<u8>)>,
    /// The ledger data, `key → value`, sorted by key as a ConfigMap returns it.
    pub ledger_data: Vec<(String, String)>,
}

impl PlanInput {
    /// Builds the input (see the type's documentation).
    ///
    /// # Panics
    /// If `recorded < LEGACY` or the generator produced an invalid tree.
    pub fn build(recorded: usize, pending: usize) -> Self {
        assert!(
            recorded >= LEGACY,
            "the legacy map alone has {LEGACY} slugs"
        );
        let total = recorded + pending;
        let lib_files = vec![(
            "helpers.sh".to_owned(),
            b"# shared helpers\nlog() { echo \"$*\"; }\n".to_vec(),
        )];
        let lib_sha = {
            let mut d = migration_core::digest::LibDigest::new();
            for (p, b) in &lib_files {
                d.add_file(p.clone(), b.clone());
            }
            d.finish()
        };
        let mut kinds = Vec::with_capacity(total);
        let mut batch_of = Vec::with_capacity(total);
        let release_batches = (recorded - LEGACY).div_ceil(BATCH_SIZE);
        for i in 0..total {
            let (kind, batch) = if i < LEGACY {
                (Kind::Legacy, 0)
            } else if i < recorded {
                let j = i - LEGACY;
                let kind = if j % 100 == 7 {
                    Kind::Revoked
                } else if j % 50 == 13 {
                    Kind::Retired
                } else if j % 200 == 99 {
                    Kind::Failed
                } else {
                    Kind::Recorded
                };
                (kind, 1 + j / BATCH_SIZE)
            } else {
                (Kind::Pending, release_batches + 1)
            };
            kinds.push(kind);
            batch_of.push(batch);
        }
        let slugs: Vec<Slug> = (0..total).map(slug).collect();
        let batch_name = |b: usize| {
            if b == 0 {
                "00000-legacy".to_owned()
            } else {
                format!("{b:05}-{}", release_label(b))
            }
        };

        let mut files = TreeFiles {
            lib: lib_files,
            ..TreeFiles::default()
        };
        let mut rng = Rng::new(0xB3AC4);
        let mut ledger: BTreeMap<String, String> = BTreeMap::new();
        ledger.insert("version".into(), (LEGACY + 1).to_string());
        let mut revoked = String::from("# revoked before they ran anywhere\n");
        let mut legacy_map = String::new();
        let mut order: BTreeMap<usize, Vec<(Slug, bool)>> = BTreeMap::new();
        for i in 0..total {
            let s = &slugs[i];
            let kind = kinds[i];
            let batch = batch_of[i];
            let tier = if kind != Kind::Pending && i >= LEGACY && (i - LEGACY) % 5 == 4 {
                Tier::Background
            } else {
                Tier::PreApply
            };
            // requires: a slug of an earlier batch recorded `ok` (so that the
            // runner scenarios never meet an unmet requirement).
            let mut requires = Vec::new();
            let wants = match kind {
                Kind::Pending => (i - recorded).is_multiple_of(3),
                Kind::Legacy => false,
                _ => (i - LEGACY) % 10 == 3 && batch > 1,
            };
            if wants {
                let earlier_end = if kind == Kind::Pending {
                    recorded
                } else {
                    LEGACY + (batch - 1) * BATCH_SIZE
                };
                let mut t = LEGACY + rng.below(earlier_end - LEGACY);
                // A pre-apply script cannot require a background one (a
                // tree error): step back past those too.
                let background =
                    |t: usize| kinds[t] != Kind::Pending && t >= LEGACY && (t - LEGACY) % 5 == 4;
                while matches!(kinds[t], Kind::Revoked | Kind::Retired | Kind::Failed)
                    || (tier == Tier::PreApply && background(t))
                {
                    t -= 1;
                }
                requires.push(slugs[t].clone());
            }
            let on_error = if i % 4 == 0 { "warn" } else { "abort" };
            let bytes = script_bytes(s, tier, on_error, &requires);
            let sha = Sha256Digest::of(&bytes);
            order
                .entry(batch)
                .or_default()
                .push((s.clone(), kind == Kind::Retired));
            if kind != Kind::Retired {
                files.scripts.push((tier, s.to_string(), bytes));
            }
            let at = epoch().plus(std::time::Duration::from_secs(i as u64 * 7));
            let name = batch_name(batch);
            let entry = match kind {
                Kind::Pending => None,
                Kind::Legacy => {
                    legacy_map.push_str(&format!("{} {s}\n", i + 1));
                    Some(LedgerEntry {
                        batch: Some(name),
                        ..LedgerEntry::new(EntryState::Legacy, at)
                    })
                }
                Kind::Revoked => {
                    revoked.push_str(&format!("{s}\n"));
                    Some(LedgerEntry {
                        batch: Some(name),
                        ..LedgerEntry::new(EntryState::Revoked, at)
                    })
                }
                Kind::Failed => Some(LedgerEntry {
                    state: EntryState::Failed,
                    reason: Some("exit-status-1".into()),
                    message: Some(format!(
                        "{s}: error: the server doesn't have a resource type \"widgets\"\n{s}: giving up"
                    )),
                    ..ok_entry(sha, lib_sha, &name, at)
                }),
                Kind::Recorded | Kind::Retired => Some(ok_entry(sha, lib_sha, &name, at)),
            };
            if let Some(entry) = entry {
                if matches!(kind, Kind::Recorded | Kind::Retired | Kind::Failed) {
                    ledger.insert(format!("a.{s}"), attempt_mark(s, at).encode());
                }
                ledger.insert(migration_core::keys::entry_key(s), entry.encode());
            }
        }
        files.revoked = Some(revoked.into_bytes());
        files.legacy_map = Some(legacy_map.into_bytes());
        let order_files: Vec<(String, Vec<u8>)> = order
            .into_iter()
            .map(|(b, mut lines)| {
                // Within a release batch: alphabetical (requires point to
                // earlier batches, so no reordering is needed). The legacy
                // batch keeps integer order.
                if b != 0 {
                    lines.sort();
                }
                let mut text = String::new();
                for (s, retired) in lines {
                    text.push_str(s.as_str());
                    if retired {
                        text.push_str(" retired");
                    }
                    text.push('\n');
                }
                (batch_name(b), text.into_bytes())
            })
            .collect();
        files.order = Some(order_files.clone());
        let tree = MigrationsTree::from_files(PathBuf::from("/bench/migrations"), files.clone())
            .expect("the generated tree is valid");
        PlanInput {
            recorded,
            pending,
            files,
            tree,
            order_files,
            ledger_data: ledger.into_iter().collect(),
        }
    }

    /// The ledger data as borrowed pairs.
    pub fn data(&self) -> impl Iterator<Item = (&str, &str)> {
        self.ledger_data
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The ledger snapshot (what a backend's `read` returns).
    pub fn snapshot(&self) -> LedgerSnapshot {
        LedgerSnapshot::from_raw_data(self.data(), Some("4242".into()))
    }

    /// The floor: parsing the manifest files and the ledger values, which
    /// any planner must do. Takes the files by value as `parse_files` does.
    pub fn parse_floor(
        files: Vec<(String, Vec<u8>)>,
        data: &[(String, String)],
    ) -> (Manifest, LedgerSnapshot) {
        let manifest = Manifest::parse_files(files).expect("the generated manifest is valid");
        let snapshot = LedgerSnapshot::from_raw_data(
            data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            Some("4242".into()),
        );
        (manifest, snapshot)
    }

    /// The request the hook runner makes: the pre-apply tier.
    pub fn request() -> PlanRequest {
        PlanRequest::tier(Tier::PreApply)
    }

    /// The context the hook runner plans with.
    pub fn context() -> PlanContext {
        PlanContext {
            image: Some(image()),
            ..PlanContext::at(epoch().plus(std::time::Duration::from_secs(86_400 * 365)))
        }
    }

    /// Writes the tree (scripts, lib, lists, order.d) under `root`.
    ///
    /// # Errors
    /// On any I/O error.
    pub fn write_to(&self, root: &Path) -> std::io::Result<()> {
        for tier in Tier::ALL {
            std::fs::create_dir_all(root.join(tier.as_str()))?;
        }
        std::fs::create_dir_all(root.join("lib"))?;
        std::fs::create_dir_all(root.join("order.d"))?;
        for (tier, name, bytes) in &self.files.scripts {
            std::fs::write(root.join(tier.as_str()).join(name), bytes)?;
        }
        for (name, bytes) in &self.files.lib {
            std::fs::write(root.join("lib").join(name), bytes)?;
        }
        if let Some(b) = &self.files.revoked {
            std::fs::write(root.join("revoked"), b)?;
        }
        if let Some(b) = &self.files.legacy_map {
            std::fs::write(root.join("legacy-map"), b)?;
        }
        for (name, bytes) in &self.order_files {
            std::fs::write(root.join("order.d").join(name), bytes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_input_plans_exactly_the_pending_migrations() {
        let input = PlanInput::build(300, 10);
        let snapshot = input.snapshot();
        let plan = migration_core::plan(
            &input.tree,
            Some(&snapshot),
            &PlanInput::request(),
            &PlanInput::context(),
        )
        .unwrap();
        assert_eq!(plan.pending.len(), 10);
        assert!(plan.seed.is_empty());
        assert!(plan.checksum_mismatches.is_empty());
        assert_eq!(snapshot.records.len(), 300);
        assert!(snapshot.unreadable_keys.is_empty());
    }
}
