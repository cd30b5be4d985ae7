//! `migrate-shim`: the run-time tripwire's small binary, shipped next to
//! `migrate`. The runner links the cluster commands (`kubectl`, `helm`,
//! `flux`, the configured others) and `migrate-tolerate` to it, and starts
//! it once per run as `migrate-supervise`; it dispatches on
//! `argv[0]` ([`migrate_runner::tripwire::dispatch`]).
//!
//! It is a separate binary so that every cluster-command call pays for the
//! start of a small program, not of the whole `migrate` command (its
//! clients, TLS and runtime): it links only the tripwire's own code.

use std::process::ExitCode;

fn main() -> ExitCode {
    let status = migrate_runner::tripwire::dispatch().unwrap_or_else(|| {
        let argv0 = std::env::args().next().unwrap_or_default();
        eprintln!(
            "migrate-shim: started as {argv0:?}, which is neither a cluster command of this run nor migrate-tolerate or migrate-supervise; the runner starts this binary itself"
        );
        127
    });
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}
