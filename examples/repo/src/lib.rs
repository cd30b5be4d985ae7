//! # migrate-repo
//!
//! What a platform's release job and its maintainers run on the
//! repository (its files and its history) rather than a cluster: the [`git`] adapter (tags,
//! blobs, the history of a migrations path), [`convert`] (numbered scripts
//! to a slug tree with a legacy map) and [`scaffold`] (a new migration's
//! file and test). Manifest generation itself is core's
//! ([`migration_core::generate()`]); this crate feeds it the history.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod convert;
pub mod git;
pub mod scaffold;
