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

/// Kinds of failure as the JSON error document names them, beside their
/// codes.
const KIND_REFUSED: &str = "refused";
const KIND_ENVIRONMENT: &str = "environment";
const KIND_MIGRATION_FAILED: &str = "migration-failed";

/// The exit code, and the word the JSON error document uses, of a
/// preparation or recording that failed with `e`: a refused plan and a
/// missing ledger that must exist refuse; the rest is the environment's.
pub fn of_migrate(e: &migration_core::MigrateError) -> (u8, &'static str) {
    use migration_core::MigrateError;
    match e {
        MigrateError::Refused(_) | MigrateError::Absent { .. } => (REFUSED, KIND_REFUSED),
        _ => (ENVIRONMENT, KIND_ENVIRONMENT),
    }
}

/// The exit code, and its word, of a run that stopped with `e`: the one
/// place a run's errors become exit codes. Refusals before anything ran
/// (the plan, the pre-run scan, no room, no ledger) refuse; a migration
/// that failed under `on-error=abort`, or an interrupted run, is a failed
/// migration; everything else (the ledger, the lock, a script that could
/// not start) is the environment's.
pub fn of_run(e: &migration_core::drive::RunError) -> (u8, &'static str) {
    use migration_core::drive::RunError;
    match e {
        RunError::Refused(_)
        | RunError::Unsafe { .. }
        | RunError::NoRoom(_)
        | RunError::NoLedger(_) => (REFUSED, KIND_REFUSED),
        RunError::MigrationFailed { .. } | RunError::Interrupted { .. } => {
            (MIGRATION_FAILED, KIND_MIGRATION_FAILED)
        }
        RunError::Migrate(m) => of_migrate(m),
        _ => (ENVIRONMENT, KIND_ENVIRONMENT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::MigrateError;
    use migration_core::drive::RunError;

    #[test]
    fn each_run_error_has_one_exit_code() {
        let absent = || MigrateError::Absent {
            ledger: "file:x".into(),
        };
        assert_eq!(of_run(&RunError::NoLedger(absent())), (REFUSED, "refused"));
        assert_eq!(of_run(&RunError::Migrate(absent())), (REFUSED, "refused"));
        let exists = MigrateError::Exists {
            ledger: "file:x".into(),
        };
        assert_eq!(of_run(&RunError::Migrate(exists.clone())).0, ENVIRONMENT);
        assert_eq!(of_migrate(&exists), (ENVIRONMENT, "environment"));
        let spawn = RunError::Spawn {
            slug: "a".parse().unwrap(),
            message: "no such interpreter".into(),
        };
        assert_eq!(of_run(&spawn), (ENVIRONMENT, "environment"));
    }
}
