//! # migrate-shared
//!
//! What the programs share and nothing else, so that the operator needs
//! neither the CLI nor the shell parser: the `--ledger SPEC` grammar and how
//! each spec opens its backend ([`LedgerSpec`]), the background [`index`]
//! ConfigMap the CLI renders and the operator reads, and the process
//! [`exit`] codes both programs answer with.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod exit;
pub mod index;
mod ledger;

pub use ledger::{
    FILE_BUDGET_ENV, KubeOptions, LedgerSpec, OpenOptions, SpecError, is_dns_label,
    is_dns_subdomain,
};
