//! Reading a tier directory's scripts: each file read into a reused buffer,
//! validated (header, digest) and dropped, so only the parsed [`Script`]s
//! are ever held, never every script's bytes at once; large directories on
//! a few threads, each reading a contiguous run of the sorted names, the
//! results joined in name order so what is found, and in which order, does
//! not depend on the number of threads.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::files::{ScriptSet, validate_script};
use super::reader::{Reader, Resolved};
use super::{PLACEHOLDER_FILES, Script, TreeError, TreeProblem};
use crate::header::Tier;

/// Fewest entries each thread is given: below this a thread costs more to
/// start than it saves.
const MIN_ENTRIES_PER_THREAD: usize = 256;

/// Most threads one tier directory is read on.
const MAX_THREADS: usize = 4;

/// The first read buffer of each thread, in bytes; it grows for larger
/// scripts (up to the size cap) and is reused for every file.
const BUFFER_BYTES: usize = 64 * 1024;

/// What one directory entry came to.
enum Found {
    /// A placeholder (`.gitkeep`), ignored.
    Nothing,
    /// Refused while reading (a bad name, a symlink leaving the tree, too
    /// large, a directory): a reading problem.
    Unreadable(TreeProblem),
    /// Read and checked: the script, or the problems in it.
    Checked(Result<Script, Vec<TreeProblem>>),
}

/// Reads every entry of the tier directory `dir` (its sorted listing
/// `entries`), adding reading problems to `problems` and scripts (or their
/// problems) to `scripts`, in name order. The first file that cannot be
/// read at all is the error, naming it.
pub(super) fn read_scripts(
    reader: &Reader<'_>,
    tier: Tier,
    dir: &Path,
    entries: &[(OsString, bool)],
    problems: &mut Vec<TreeProblem>,
    scripts: &mut ScriptSet,
) -> Result<(), TreeError> {
    let threads = thread_count(entries.len());
    let mut add = |found: Found| match found {
        Found::Nothing => {}
        Found::Unreadable(problem) => problems.push(problem),
        Found::Checked(checked) => scripts.add_checked(checked),
    };
    if threads <= 1 {
        return read_run(reader, tier, dir, entries, &mut add);
    }
    let run_len = entries.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut runs = entries.chunks(run_len);
        let first = runs.next().unwrap_or_default();
        let later: Vec<_> = runs
            .map(|run| {
                scope.spawn(move || {
                    let mut found = Vec::with_capacity(run.len());
                    read_run(reader, tier, dir, run, &mut |f| found.push(f)).map(|()| found)
                })
            })
            .collect();
        // The first run goes straight into the set while the later ones
        // are read: only theirs are held until it is their turn.
        read_run(reader, tier, dir, first, &mut add)?;
        for handle in later {
            // A reader thread only panics on a bug; carry the panic over.
            let found = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            found.into_iter().for_each(&mut add);
        }
        Ok(())
    })
}

/// How many threads read `entries` entries: one per
/// [`MIN_ENTRIES_PER_THREAD`], at most the CPUs there are and
/// [`MAX_THREADS`].
fn thread_count(entries: usize) -> usize {
    crate::threads::for_items(entries, MIN_ENTRIES_PER_THREAD, MAX_THREADS)
}

/// Reads a contiguous run of a tier directory's sorted entries into `add`,
/// stopping at the first file that cannot be read at all.
fn read_run(
    reader: &Reader<'_>,
    tier: Tier,
    dir: &Path,
    entries: &[(OsString, bool)],
    add: &mut dyn FnMut(Found),
) -> Result<(), TreeError> {
    let mut buffer = Vec::with_capacity(BUFFER_BYTES);
    // One path, its last component replaced for each entry.
    let mut path = dir.to_path_buf();
    for (name, regular) in entries {
        path.push(name);
        let found = read_entry(reader, tier, &path, name, *regular, &mut buffer);
        path.pop();
        add(found?);
    }
    Ok(())
}

/// Reads and checks one tier-directory entry, `name` at `path`.
fn read_entry(
    reader: &Reader<'_>,
    tier: Tier,
    path: &Path,
    name: &OsString,
    regular: bool,
    buffer: &mut Vec<u8>,
) -> Result<Found, TreeError> {
    let Some(name) = name.to_str() else {
        return Ok(Found::Unreadable(TreeProblem::NonUtf8Name {
            path: reader.relative(path),
        }));
    };
    if PLACEHOLDER_FILES.contains(&name) {
        return Ok(Found::Nothing);
    }
    if regular {
        // The common case, at two system calls beyond reading (open,
        // close); symlinks and the rest are resolved below.
        return Ok(match reader.read_listed_file(path, buffer)? {
            Ok(()) => Found::Checked(validate_script(tier, name, buffer, reader.marker)),
            Err(problem) => Found::Unreadable(problem),
        });
    }
    Ok(match reader.resolve(path)? {
        Resolved::File(target, len) => match reader.read_capped(path, &target, len)? {
            Ok(bytes) => Found::Checked(validate_script(tier, name, &bytes, reader.marker)),
            Err(problem) => Found::Unreadable(problem),
        },
        Resolved::Dir(_) => Found::Unreadable(TreeProblem::UnexpectedEntry {
            path: PathBuf::from(tier.as_str()).join(name),
            reason: "a directory where a script belongs; tier directories are flat",
        }),
        Resolved::Rejected(problem) => Found::Unreadable(problem),
    })
}
