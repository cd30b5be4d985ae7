//! The values of the `tier` and `on-error` directives.

use std::fmt;
use std::str::FromStr;

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

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names neither tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier {0:?}; expected 'pre-apply' or 'background'")]
pub struct UnknownTier(pub String);

impl FromStr for Tier {
    type Err = UnknownTier;
    /// The inverse of [`Tier::as_str`], so that each spelling is written once.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tier::ALL
            .into_iter()
            .find(|tier| tier.as_str() == s)
            .ok_or_else(|| UnknownTier(s.to_owned()))
    }
}

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

impl fmt::Display for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnError {
    type Err = String;
    /// The inverse of [`OnError::as_str`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OnError::ALL
            .into_iter()
            .find(|policy| policy.as_str() == s)
            .ok_or_else(|| format!("unknown on-error {s:?}; expected 'abort' or 'warn'"))
    }
}
