//! The integration tests of this crate, one test binary (a binary each costs a link on 2 cores).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adopt;
mod adopt_history;
mod bad_input;
mod bytes_executed;
mod chart;
mod chart_schema;
mod chart_settings;
mod cli_examples;
mod cli_fail_closed;
mod cli_habits;
mod cli_interrupt;
mod cli_lint;
mod cli_output;
mod cluster_choice;
mod commands;
mod common;
mod configmap_lock;
mod convert_baseline;
mod convert_behaviour;
mod convert_handled;
mod convert_legacy_map;
mod convert_paths;
mod convert_patterns;
mod convert_prereleases;
mod convert_probe;
mod convert_report;
mod convert_slug_map;
mod convert_stamps;
mod convert_upgrade;
mod first_week;
mod fresh_install_guard;
mod image_recipe;
mod kube_ledgers;
mod last_failure;
mod ledger_replaced;
mod legacy_guard;
mod lint;
mod manifest;
mod manifest_paths;
mod not_yet;
mod one_reader;
mod output_tail_real;
mod plan_read;
mod real_cluster;
mod release_lines;
mod release_tags;
mod reliability;
mod repair;
mod run_after_read;
mod runner;
mod same_refusals;
mod settings_file;
mod shell_lint;
mod shipped_edits;
mod supplied_files;
mod test_real_cluster;
mod test_sandbox;
mod through_engine;
mod tolerate;
mod tolerate_real;
#[cfg(feature = "failpoints")]
mod tripwire;
#[cfg(feature = "failpoints")]
mod tripwire_bypasses;
#[cfg(feature = "failpoints")]
mod tripwire_masking;
#[cfg(feature = "failpoints")]
mod tripwire_secrets;
mod tripwire_supervision;
mod upgrade_paths;
