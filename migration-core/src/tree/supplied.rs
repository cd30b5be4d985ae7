//! The one way a file the tree or a flag supplies is read (CONTRACT.md
//! §3.2): `migrate.toml`, `cluster-commands`, `revoked`, `legacy-map`,
//! `legacy-releases`, `lint-baseline`, the `order.d/` batches, the scripts
//! and `lib/`, and the files named by flags (slug maps, release targets,
//! an adoption history). Every such read goes through [`open_regular`]
//! (or [`read_file`] on top of it), so the rules hold for each:
//!
//! - a regular file only: the file is opened without blocking
//!   (`O_NONBLOCK`, so a FIFO with no writer does not hang the open) and
//!   the opened file is then checked (`fstat`), never a path checked and
//!   then opened, so a FIFO, a device (`/dev/zero` reads forever) or a
//!   directory is refused, naming what it is;
//! - a size bound: a file larger than the limit is refused, and one that
//!   grows while it is read is read one byte past the limit and refused;
//! - one rule for symlinks: a symlink is followed; inside a tree, only to a
//!   target inside the tree ([`Within`]);
//! - a dangling symlink is an error naming the path, never "no file"
//!   (that read as an absent `cluster-commands`, so the commands it named
//!   were neither scanned nor shimmed). Only a path where nothing at all is
//!   is absent (`Ok(None)`).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest file read by default, in bytes (the tree loader's limit,
/// [`super::LoadOptions::max_file_bytes`]).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Why a supplied file was refused. Each names the path as the caller
/// named it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A symlink whose target does not exist.
    #[error("{}: a dangling symlink (to {}): the file it names does not exist", path.display(), target.display())]
    Dangling {
        /// The symlink.
        path: PathBuf,
        /// What it points to.
        target: PathBuf,
    },
    /// Something other than a regular file (after symlinks).
    #[error("{}: {kind}, not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is: `a FIFO`, `a character device`, `a directory`...
        kind: &'static str,
    },
    /// A symlink inside a tree that leads out of it.
    #[error("{}: symlink points outside the migrations tree (to {})", path.display(), target.display())]
    Escapes {
        /// The symlink.
        path: PathBuf,
        /// Where it resolves.
        target: PathBuf,
    },
    /// Larger than the limit; not read (or not kept).
    #[error("{}: {size} bytes is above the {limit}-byte limit", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least; a file still growing was not read to its end).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The system refused the open or the read.
    #[error("{}: cannot be read: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl FileError {
    /// The path the error names.
    pub fn path(&self) -> &Path {
        match self {
            FileError::Dangling { path, .. }
            | FileError::NotRegular { path, .. }
            | FileError::Escapes { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::Io { path, .. } => path,
        }
    }

    /// The same error naming `path` instead (a tree names its files
    /// relative to its root).
    pub fn named(mut self, shown: PathBuf) -> Self {
        match &mut self {
            FileError::Dangling { path, .. }
            | FileError::NotRegular { path, .. }
            | FileError::Escapes { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::Io { path, .. } => *path = shown,
        }
        self
    }
}

/// Where a symlink may lead: anywhere (a file a flag names: whoever typed
/// the flag chose it), or only inside a tree (a tree's own file: a tree
/// checked out or unpacked must not reach the rest of the machine).
#[derive(Debug, Clone, Copy)]
pub enum Within<'a> {
    /// A file named on the command line.
    Anywhere,
    /// A tree's file: symlinks only to targets below this canonical root.
    Tree(&'a Path),
}

/// Opens `path` for reading if it is a regular file: the file and its
/// size, or `Ok(None)` when nothing is at `path` (a dangling symlink is an
/// error, see the module). The open never blocks and the check is made on
/// the opened file.
pub fn open_regular(path: &Path, within: Within<'_>) -> Result<Option<(File, u64)>, FileError> {
    let io = |source: std::io::Error| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Within::Tree(root) = within {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(path) {
                Ok(target) if !target.starts_with(root) => {
                    return Err(FileError::Escapes {
                        path: path.to_path_buf(),
                        target,
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(dangling(path));
                }
                Err(e) => return Err(io(e)),
            },
            Ok(_) => {}
        }
    }
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => {
            // Nothing there, or a symlink to nothing: only the first is absent.
            return match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => Err(dangling(path)),
                _ => Ok(None),
            };
        }
        Err(e) => return Err(io(e.into())),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta.file_type()),
        });
    }
    Ok(Some((file, meta.len())))
}

/// Reads the regular file at `path` whole, at most `limit` bytes
/// ([`open_regular`], then the bounded read): `Ok(None)` when nothing is
/// there.
pub fn read_file(
    path: &Path,
    within: Within<'_>,
    limit: u64,
) -> Result<Option<Vec<u8>>, FileError> {
    let Some((file, len)) = open_regular(path, within)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    read_opened(path, file, len, limit, &mut bytes)?;
    Ok(Some(bytes))
}

/// Reads an opened file into `buffer` (replacing what it held), refusing
/// it above `limit`: `len` is its size when opened; one byte past the limit
/// is read, since the file may have grown since.
pub fn read_opened(
    path: &Path,
    file: File,
    len: u64,
    limit: u64,
    buffer: &mut Vec<u8>,
) -> Result<(), FileError> {
    let too_large = |size| FileError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if len > limit {
        return Err(too_large(len));
    }
    buffer.clear();
    buffer.reserve(usize::try_from(len).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(buffer)
        .map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if buffer.len() as u64 > limit {
        return Err(too_large(buffer.len() as u64));
    }
    Ok(())
}

/// The error for a dangling symlink at `path`.
fn dangling(path: &Path) -> FileError {
    FileError::Dangling {
        path: path.to_path_buf(),
        target: std::fs::read_link(path).unwrap_or_default(),
    }
}

/// What a file that is not a regular one is, for messages.
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    #[test]
    fn a_fifo_a_device_and_a_directory_are_refused_naming_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
        ] {
            let err = read_file(path, Within::Anywhere, MAX_FILE_BYTES).unwrap_err();
            assert!(
                matches!(&err, FileError::NotRegular { kind: k, .. } if *k == kind),
                "{err}"
            );
            assert!(
                err.to_string().starts_with(&path.display().to_string()),
                "{err}"
            );
        }
    }

    #[test]
    fn nothing_there_is_absent_but_a_dangling_symlink_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let absent = root.join("absent");
        assert!(matches!(read_file(&absent, Within::Anywhere, 10), Ok(None)));
        assert!(matches!(
            read_file(&absent, Within::Tree(&root), 10),
            Ok(None)
        ));
        let link = root.join("link");
        std::os::unix::fs::symlink("gone", &link).unwrap();
        for within in [Within::Anywhere, Within::Tree(&root)] {
            let err = read_file(&link, within, 10).unwrap_err();
            assert!(matches!(err, FileError::Dangling { .. }), "{err}");
            assert!(
                err.to_string().contains("link: a dangling symlink"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_symlink_is_followed_inside_a_tree_only_to_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("real"), "x").unwrap();
        std::os::unix::fs::symlink("real", root.join("in")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("out")).unwrap();
        let got = read_file(&root.join("in"), Within::Tree(&root), 10).unwrap();
        assert_eq!(got.as_deref(), Some(&b"x"[..]));
        let err = read_file(&root.join("out"), Within::Tree(&root), 10).unwrap_err();
        assert!(matches!(err, FileError::Escapes { .. }), "{err}");
        let zero = root.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_file(&zero, Within::Anywhere, 10).unwrap_err();
        assert!(matches!(err, FileError::NotRegular { .. }), "{err}");
    }

    #[test]
    fn a_file_above_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, "12345").unwrap();
        assert!(matches!(
            read_file(&path, Within::Anywhere, 4),
            Err(FileError::TooLarge {
                size: 5,
                limit: 4,
                ..
            })
        ));
        assert_eq!(
            read_file(&path, Within::Anywhere, 5).unwrap(),
            Some(b"12345".to_vec())
        );
    }
}
