//! The `verify` document: whether every manifest slug has the entry it must.

use migration_core::verify::Verification;
use serde::Serialize;

/// The `verify` document.
#[derive(Debug, Serialize)]
pub struct VerifyView {
    /// The ledger described.
    pub ledger: String,
    /// Slugs checked.
    pub checked: usize,
    /// True when nothing was found missing.
    pub ok: bool,
    /// One line per slug without the required entry.
    pub problems: Vec<String>,
}

impl VerifyView {
    /// Builds the document from a verification of `ledger`.
    pub fn new(result: &Verification, ledger: &str) -> Self {
        let problems: Vec<String> = result.problems.iter().map(ToString::to_string).collect();
        VerifyView {
            ledger: ledger.to_owned(),
            checked: result.checked,
            ok: problems.is_empty(),
            problems,
        }
    }

    /// Text for people.
    pub fn text(&self) -> String {
        if self.problems.is_empty() {
            format!(
                "verified {} migration(s): every one has a terminal entry\n",
                self.checked
            )
        } else {
            self.problems
                .iter()
                .map(|p| format!("NOT VERIFIED: {p}\n"))
                .collect()
        }
    }
}
