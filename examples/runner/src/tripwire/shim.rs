//! The shim: the migrate binary invoked as `kubectl` (or any cluster
//! command) through the runner's symlink. It records the call, runs the
//! real command and records how it ended, then exits with its status.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::arm::REAL_FILE;
use super::exec::{self, Input};
use super::ledger_guard;
use super::record::{self, CallOutcome, ENV_REAL_PREFIX, ENV_REPORT, Record};
use migrate_lint::cluster_commands::env_key;

/// Where the real command is, for a call made under the runner.
pub(crate) enum Real {
    /// Here.
    At(PathBuf),
    /// Not installed (the runner found none on its PATH).
    Missing,
}

/// The real command for `name`: in a run, what the runner wrote in the
/// report's directory ([`REAL_FILE`]); else (outside a run, or that file
/// gone) `MIGRATE_TRIPWIRE_REAL_<KEY>` when it names something other than
/// the shim, else the first `name` on PATH that is not the migrate binary
/// itself.
pub(crate) fn real_command(name: &str, report: Option<&Path>) -> Real {
    let exe = std::env::current_exe().ok();
    if let Some(dir) = report.and_then(Path::parent)
        && let Ok(bytes) = std::fs::read(dir.join(REAL_FILE))
    {
        let real: HashMap<String, String> = serde_json::from_slice(&bytes).unwrap_or_default();
        return match real.get(name) {
            Some(p) if !p.is_empty() => Real::At(PathBuf::from(p)),
            _ => Real::Missing,
        };
    }
    let search = || {
        std::env::var("PATH")
            .ok()
            .and_then(|p| exec::search_path(name, &p, exe.as_deref()))
    };
    let found = match std::env::var_os(format!("{ENV_REAL_PREFIX}{}", env_key(name))) {
        Some(v) if v.is_empty() => None,
        Some(v)
            if exe
                .as_deref()
                .is_some_and(|e| exec::same_file(Path::new(&v), e)) =>
        {
            search()
        }
        Some(v) => Some(PathBuf::from(v)),
        None => search(),
    };
    match found {
        // Never run ourselves: that would loop.
        Some(p) if exe.as_deref().is_some_and(|e| exec::same_file(&p, e)) => Real::Missing,
        Some(p) => Real::At(p),
        None => Real::Missing,
    }
}

/// The shim's main: returns the exit status.
pub fn main(name: &str, argv: Vec<String>) -> i32 {
    let Some(report) = record::report_path() else {
        eprintln!(
            "{name}: this is the migrate tripwire shim, run without the runner's environment ({ENV_REPORT} is unset); refusing to run {name}"
        );
        return 127;
    };
    let id = record::call_id();
    let start = Record::Start {
        id: id.clone(),
        argv: record::call_words(&argv),
        via: "shim".into(),
        pid: std::process::id(),
    };
    if let Err(e) = record::append(&report, &start) {
        eprintln!(
            "{name}: migrate tripwire: cannot record this call in {} ({e}); refusing to run it",
            report.display()
        );
        return 126;
    }
    let guarded = match guard(name, &argv, &report) {
        Ok(input) => input,
        Err(ran) => {
            let end = end_record(id, &ran, CallOutcome::Failed, 0, &[LEDGER_WRITE.to_owned()]);
            if let Err(e) = record::append(&report, &end) {
                eprintln!(
                    "{name}: migrate tripwire: cannot record how this call ended ({e}); the runner counts it as failed"
                );
            }
            return ran.shell_status();
        }
    };
    let ran = match (
        super::lease::in_run(&report),
        real_command(name, Some(&report)),
    ) {
        (Err(lapsed), _) => exec::Ran::refused(126, format!("{name}: refused: {}", lapsed.0)),
        (Ok(()), Real::Missing) => {
            let message = format!(
                "{name}: not found (the runner found no real {name} on its PATH; it is a cluster command, so this call fails)"
            );
            exec::Ran::refused(127, message)
        }
        (Ok(()), Real::At(path)) => exec::run(
            &path,
            &argv,
            guarded.as_deref().map_or(Input::Inherit, Input::Bytes),
        )
        .unwrap_or_else(|e| {
            exec::Ran::refused(126, format!("{name}: cannot run {}: {e}", path.display()))
        }),
    };
    let end = end_record(
        id,
        &ran,
        if ran.success() {
            CallOutcome::Ok
        } else {
            CallOutcome::Failed
        },
        1,
        &[],
    );
    if let Err(e) = record::append(&report, &end) {
        eprintln!(
            "{name}: migrate tripwire: cannot record how this call ended ({e}); the runner counts it as failed"
        );
    }
    ran.shell_status()
}

/// The class recorded for a call the ledger guard refused.
pub const LEDGER_WRITE: &str = "ledger-write";

/// The ledger guard for one call of `name` (kubectl only): `Ok` with the
/// stdin it read for the real command, or the refused call, its message
/// naming the script (`MIGRATION_SLUG`) and the call.
pub(crate) fn guard(
    name: &str,
    argv: &[String],
    report: &Path,
) -> Result<Option<Vec<u8>>, exec::Ran> {
    let Some(ledger) = ledger_guard::ledger_of(report) else {
        return Ok(None);
    };
    if name != "kubectl" {
        return Ok(None);
    }
    match ledger_guard::check(&ledger, argv, &mut std::io::stdin()) {
        ledger_guard::GuardDecision::Pass { stdin } => Ok(stdin),
        ledger_guard::GuardDecision::Refuse(why) => {
            let script = std::env::var("MIGRATION_SLUG").unwrap_or_else(|_| "?".into());
            Err(exec::Ran::refused(
                1,
                format!(
                    "{name}: migrate tripwire: refused in script {script}: {}: {why}; only the engine writes the ledger (move the write to the chart)",
                    record::call_words(argv).join(" ")
                ),
            ))
        }
    }
}

/// The `end` line for a finished call.
pub(crate) fn end_record(
    id: String,
    ran: &exec::Ran,
    outcome: CallOutcome,
    attempts: u32,
    classes: &[String],
) -> Record {
    let failed = !ran.success();
    Record::End {
        id,
        outcome,
        status: ran.status,
        signal: ran.signal,
        classes: if failed && classes.is_empty() {
            super::classify::classify(&ran.stderr)
                .classes
                .iter()
                .map(|c| c.name().to_owned())
                .collect()
        } else {
            classes.to_vec()
        },
        attempts,
        stderr: if failed {
            record::stderr_head(&ran.stderr)
        } else {
            Vec::new()
        },
    }
}
