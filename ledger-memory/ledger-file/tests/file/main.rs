//! The integration tests of this crate, one test binary (a binary each costs a link on 2 cores).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod conformance;
mod file_journal;
mod file_ledger;
mod replaced;
