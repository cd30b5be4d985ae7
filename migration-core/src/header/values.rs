//! The values of the `tier` and `on-error` directives.

use serde::{Deserialize, Serialize};

/// The execution tier of a migration, which is also its directory name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Blocking: runs before the platform chart applies.
    PreApply,
    /// Runs later, one at a time, driven by the operator.
    Background,
}

impl Tier {
    /// Both tiers, in the order an upgrade runs them.
    pub const ALL: [Tier; 2] = [Tier::PreApply, Tier::Background];

    /// The directory and header spelling: `pre-apply` or `background`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Tier::PreApply => "pre-apply",
            Tier::Background => "background",
        }
    }
}

/// A string that names neither tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier {0:?}; expected 'pre-apply' or 'background'")]
pub struct UnknownTier(pub String);

spelled!(Tier, UnknownTier, |s: &str| UnknownTier(s.to_owned()));

/// What a failure of the script means for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Record nothing, stop the run, exit non-zero.
    Abort,
    /// Record `failed` with reason and message, continue with the next one.
    Warn,
}

impl OnError {
    /// Both policies.
    pub const ALL: [OnError; 2] = [OnError::Abort, OnError::Warn];

    /// The header spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            OnError::Abort => "abort",
            OnError::Warn => "warn",
        }
    }
}

spelled!(OnError, String, |s: &str| format!(
    "unknown on-error {s:?}; expected 'abort' or 'warn'"
));
