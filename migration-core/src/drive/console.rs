//! Where progress and script output go: the console a run writes to (the
//! program implements it; neither the run nor its executor prints by
//! itself).

use crate::slug::Slug;

/// Where progress and script output go.
pub trait Console: Send + Sync {
    /// One line of a script's output.
    fn script_line(&self, slug: &Slug, line: &str);
    /// One line of the run's own progress.
    fn progress(&self, line: &str);
    /// The `n`th of `total` pending scripts starts (`n` counts from 1);
    /// `line` is its progress line. By default printed as progress,
    /// `[n/total]` first.
    fn step(&self, n: usize, total: usize, slug: &Slug, line: &str) {
        let _ = slug;
        self.progress(&format!("[{n}/{total}] {line}"));
    }
}
