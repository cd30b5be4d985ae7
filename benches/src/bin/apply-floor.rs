//! The floors of `benches/peers.sh`'s "apply N" job that a shell loop cannot
//! show: what any Rust program pays to do the job's irreducible parts, with
//! nothing else (no ledger format, no tripwire, no plan).
//!
//! ```sh
//! apply-floor spawn DIR          # run every file of DIR, in name order, as `/bin/sh -e FILE`
//! apply-floor spawn-sync DIR F   # the same, one durable append to F before each
//! apply-floor sync F N           # N durable appends to F, nothing spawned
//! ```
//!
//! Each script is started the way the runner starts one (std's `Command`,
//! which uses glibc's `posix_spawn`: its own process group, stdin from
//! `/dev/null`, the tree as its working directory) and waited for. A
//! durable append is a 256-byte `pwrite` into space that is already
//! allocated and on disk, then `fdatasync`: what the file ledger's step
//! costs at the least (its record is about that long, and it writes into a
//! preallocated tail too). `F` is created (or truncated) and preallocated
//! first, outside the loop. Any failure exits non-zero, naming what failed.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The bytes of one append: about one step record of the file ledger.
const RECORD: usize = 256;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["spawn", dir] => Scripts::list(Path::new(dir)).and_then(|s| s.run(None)),
        ["spawn-sync", dir, file] => Scripts::list(Path::new(dir)).and_then(|s| {
            let mut log = Appends::create(Path::new(file), s.files.len())?;
            s.run(Some(&mut log))
        }),
        ["sync", file, n] => n
            .parse::<usize>()
            .map_err(|e| format!("N = {n:?}: {e}"))
            .and_then(|n| {
                let mut log = Appends::create(Path::new(file), n)?;
                (0..n).try_for_each(|_| log.append())
            }),
        _ => Err("usage: apply-floor spawn DIR | spawn-sync DIR FILE | sync FILE N".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("apply-floor: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The scripts of a tier directory and the tree they run in.
struct Scripts {
    /// The tree: the tier directory's parent, the scripts' working directory.
    root: PathBuf,
    /// Every file of the tier directory, absolute, in name order.
    files: Vec<PathBuf>,
}

impl Scripts {
    /// The files of the tier directory `dir`.
    fn list(dir: &Path) -> Result<Scripts, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", dir.display());
        let dir = std::path::absolute(dir).map_err(fail)?;
        let mut files = std::fs::read_dir(&dir)
            .and_then(|entries| {
                entries
                    .map(|e| e.map(|e| e.path()))
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .map_err(fail)?;
        files.sort();
        let root = dir.parent().map_or_else(|| dir.clone(), Path::to_path_buf);
        Ok(Scripts { root, files })
    }

    /// Runs each script in turn, after its append when `log` is given.
    fn run(&self, mut log: Option<&mut Appends>) -> Result<(), String> {
        for script in &self.files {
            if let Some(log) = log.as_deref_mut() {
                log.append()?;
            }
            let status = Command::new("/bin/sh")
                .arg("-e")
                .arg(script)
                .current_dir(&self.root)
                .stdin(Stdio::null())
                .process_group(0)
                .status()
                .map_err(|e| format!("{}: {e}", script.display()))?;
            if !status.success() {
                return Err(format!("{}: {status}", script.display()));
            }
        }
        Ok(())
    }
}

/// A file with room for `n` appends, written one record at a time.
struct Appends {
    file: File,
    path: PathBuf,
    next: u64,
}

impl Appends {
    /// Creates `path` with `n` records of zeros, written and synced, so no
    /// append grows the file or allocates a block.
    fn create(path: &Path, n: usize) -> Result<Appends, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(fail)?;
        file.write_all_at(&vec![0; n.max(1) * RECORD], 0)
            .and_then(|()| file.sync_all())
            .map_err(fail)?;
        Ok(Appends {
            file,
            path: path.to_owned(),
            next: 0,
        })
    }

    /// One record, durable when this returns.
    fn append(&mut self) -> Result<(), String> {
        let mut record = [b'x'; RECORD];
        record[RECORD - 1] = b'\n';
        self.file
            .write_all_at(&record, self.next)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.next += RECORD as u64;
        Ok(())
    }
}
