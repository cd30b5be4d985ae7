//! What a caller asks the planner for, and the facts it plans with.

use std::fmt;

use crate::header::Tier;
use crate::slug::Slug;
use crate::time::Timestamp;

/// Which tier(s) a run covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TierSelection {
    /// One tier.
    One(Tier),
    /// Both tiers (planning and verification; a runner runs one tier).
    All,
}

impl TierSelection {
    /// True when `tier` is selected.
    pub fn includes(self, tier: Tier) -> bool {
        match self {
            TierSelection::One(t) => t == tier,
            TierSelection::All => true,
        }
    }
}

impl fmt::Display for TierSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TierSelection::One(t) => t.fmt(f),
            TierSelection::All => f.write_str("all"),
        }
    }
}

/// What the caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRequest {
    /// The tier(s) being run.
    pub tiers: TierSelection,
    /// `ONLY=<slug>`: run exactly this slug, even if recorded.
    pub only: Option<Slug>,
}

impl PlanRequest {
    /// A normal run of one tier.
    pub fn tier(tier: Tier) -> Self {
        PlanRequest {
            tiers: TierSelection::One(tier),
            only: None,
        }
    }
}

/// Facts from outside the tree and the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// Timestamp for seeded entries.
    pub now: Timestamp,
    /// The image the run executes from, recorded in seeded entries.
    pub image: Option<String>,
    /// Shebang lines (without `#!`) a script may use, compared exactly.
    pub allowed_interpreters: Vec<String>,
}

impl PlanContext {
    /// The default allowed shebangs: `/bin/sh` and `/bin/bash`.
    pub fn default_interpreters() -> Vec<String> {
        vec!["/bin/sh".to_owned(), "/bin/bash".to_owned()]
    }

    /// A context at `now` with default interpreters and no image.
    pub fn at(now: Timestamp) -> Self {
        PlanContext {
            now,
            image: None,
            allowed_interpreters: Self::default_interpreters(),
        }
    }
}
