//! The integration tests of this crate, one test binary (a binary each costs a link on 2 cores).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adoption_history;
mod common;
mod diverged_legacy;
mod drive;
mod header_near_miss;
mod hostile_input;
mod last_failure;
mod ledger_format;
mod migrator;
mod not_yet;
mod planning;
mod properties;
mod redaction;
mod release_lines;
mod requirement_tiers;
mod retention_floor;
mod retired_reuse;
mod run_budget;
mod shell_quoting;
mod tree_loading;
mod upgrade_paths;
mod write_step;
