//! # migrate-lint
//!
//! Static analysis of migration scripts: the shell rules over a real parser
//! ([`shell`]), which follow every cluster command's exit status into the
//! `lib/` helpers a script sources; the tree's structural rules; shellcheck
//! when installed; inline waivers. The `migrate lint` command and the
//! runner's pre-run scan both call it. This is the only crate that links the
//! shell parser.
//!
//! Modules import downwards only: [`finding`] (what is reported),
//! [`cluster_commands`] (which commands talk to the cluster) and [`answers`]
//! (the failures a migration may accept, which the runner's tripwire and
//! `migrate convert` read too) are used by [`shell`], which the lint driver
//! uses.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod answers;
pub mod cluster_commands;
pub mod command_line;
pub mod finding;
mod lint;
pub mod shell;
mod supplied;

pub use finding::{Finding, Level};
pub use lint::{
    BLOCKING_RULES, DEFAULT_LEDGER_NAME, LintConfig, LintReport, RULES, baselined_pending, is_rule,
    lint, lint_pending, lint_pending_with, lint_script, lint_tree,
};
