//! The `manifest` document: the generated batches, or where they went.

use std::fmt::Write as _;

use serde::Serialize;

/// One batch in the `manifest` document.
#[derive(Debug, Serialize)]
pub struct BatchView {
    /// The file name.
    pub name: String,
    /// The lines.
    pub entries: Vec<BatchLineView>,
}

/// One manifest line.
#[derive(Debug, Serialize)]
pub struct BatchLineView {
    /// The slug.
    pub slug: String,
    /// Whether its script was deleted after shipping.
    pub retired: bool,
}

/// The `manifest` document.
#[derive(Debug, Serialize)]
pub struct ManifestView {
    /// The batches in order.
    pub batches: Vec<BatchView>,
    /// Where the files were written, if `--out` was given.
    pub written_to: Option<String>,
    /// Tags merged into HEAD but left off its release line (CONTRACT.md
    /// §4.1): they ship no batch, the immutability guard still reads them.
    pub off_line: Vec<migrate_repo::git::OffLine>,
}

impl ManifestView {
    /// Builds the document.
    pub fn new(manifest: &migration_core::Manifest, written_to: Option<String>) -> Self {
        ManifestView {
            batches: manifest
                .batches()
                .iter()
                .map(|b| BatchView {
                    name: b.name.to_string(),
                    entries: b
                        .entries
                        .iter()
                        .map(|e| BatchLineView {
                            slug: e.slug.to_string(),
                            retired: e.retired,
                        })
                        .collect(),
                })
                .collect(),
            written_to,
            off_line: Vec::new(),
        }
    }

    /// Text: the files themselves, or a summary when they were written.
    pub fn text(&self, manifest: &migration_core::Manifest) -> String {
        let mut out = String::new();
        match &self.written_to {
            Some(_) if !self.off_line.is_empty() => {
                let tags: Vec<String> = self
                    .off_line
                    .iter()
                    .map(|o| format!("{} (not in ancestry order with {})", o.tag, o.against))
                    .collect();
                let _ = writeln!(out, "off the release line, guard only: {}", tags.join(", "));
            }
            _ => {}
        }
        match &self.written_to {
            Some(dir) => {
                let lines: usize = self.batches.iter().map(|b| b.entries.len()).sum();
                let _ = writeln!(
                    out,
                    "wrote {} batch file(s), {lines} line(s), to {dir}",
                    self.batches.len()
                );
            }
            None => {
                for (name, contents) in manifest.render() {
                    let _ = writeln!(out, "==> {name} <==");
                    out.push_str(&contents);
                }
            }
        }
        out
    }
}
