//! The `verify` document: whether every manifest slug has the entry it must,
//! and whether any recorded script changed since it ran.

use migration_core::plan::ChecksumMismatch;
use migration_core::verify::Verification;
use serde::Serialize;

/// The `verify` document.
#[derive(Debug, Serialize)]
pub struct VerifyView {
    /// The ledger described.
    pub ledger: String,
    /// Slugs checked.
    pub checked: usize,
    /// True when nothing was found missing (and no checksum mismatch,
    /// unless they are allowed).
    pub ok: bool,
    /// One line per problem: a slug without the required entry, or a
    /// script changed since it was recorded (unless allowed).
    pub problems: Vec<String>,
    /// Recorded scripts whose checksum on disk differs from the ledger's.
    pub checksum_mismatches: Vec<ChecksumMismatch>,
    /// `--allow-checksum-mismatch`: mismatches are warnings.
    pub checksum_mismatch_allowed: bool,
}

impl VerifyView {
    /// Builds the document from a verification of `ledger` and the
    /// checksum mismatches found.
    pub fn new(
        result: &Verification,
        ledger: &str,
        checksum_mismatches: Vec<ChecksumMismatch>,
        allow_mismatch: bool,
    ) -> Self {
        let mut problems: Vec<String> = result.problems.iter().map(ToString::to_string).collect();
        if !allow_mismatch {
            problems.extend(checksum_mismatches.iter().map(|m| {
                format!(
                    "'{}' changed on disk since it was recorded (recorded {}, now {}); restore it, or pass --allow-checksum-mismatch",
                    m.slug, m.recorded, m.on_disk
                )
            }));
        }
        VerifyView {
            ledger: ledger.to_owned(),
            checked: result.checked,
            ok: problems.is_empty(),
            problems,
            checksum_mismatches,
            checksum_mismatch_allowed: allow_mismatch,
        }
    }

    /// Text for people.
    pub fn text(&self) -> String {
        let mut out: String = self
            .problems
            .iter()
            .map(|p| format!("NOT VERIFIED: {p}\n"))
            .collect();
        if self.checksum_mismatch_allowed {
            for m in &self.checksum_mismatches {
                out.push_str(&format!(
                    "warning: '{}' changed on disk since it was recorded (allowed)\n",
                    m.slug
                ));
            }
        }
        if self.problems.is_empty() {
            out.push_str(&format!(
                "verified {} migration(s): every one has a terminal entry\n",
                self.checked
            ));
        }
        out
    }
}
