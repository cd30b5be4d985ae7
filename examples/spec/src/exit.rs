//! Process exit codes, part of the command's stable interface.

/// Everything asked for was done.
pub const SUCCESS: u8 = 0;
/// The ledger or the environment failed (I/O, API server, lock not obtained).
pub const ENVIRONMENT: u8 = 1;
/// Usage error or bad input: arguments, a tree that does not load, lint errors.
pub const BAD_INPUT: u8 = 2;
/// The plan refused before anything ran (a fatal plan condition).
pub const REFUSED: u8 = 3;
/// A migration failed (`on-error=abort`), or was interrupted.
pub const MIGRATION_FAILED: u8 = 4;
/// `verify` found migrations without the required entry.
pub const VERIFY_FAILED: u8 = 5;
