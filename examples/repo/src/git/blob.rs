//! Blob contents through one `git cat-file --batch` process.

use crate::git::GitError;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// One long-lived `git cat-file --batch` process, with a cache by object id:
/// a script that is unchanged across 300 tags is read once.
pub(super) struct BlobReader {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    cache: HashMap<String, Vec<u8>>,
}

impl BlobReader {
    pub(super) fn start(repo: &Path) -> Result<Self, GitError> {
        let mut child = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| GitError::Spawn {
                repo: repo.to_path_buf(),
                source,
            })?;
        let protocol = |detail: &str| GitError::Protocol {
            args: "cat-file --batch".into(),
            detail: detail.into(),
        };
        let stdin = child.stdin.take().ok_or_else(|| protocol("no stdin"))?;
        let stdout = BufReader::new(child.stdout.take().ok_or_else(|| protocol("no stdout"))?);
        Ok(BlobReader {
            child,
            stdin,
            stdout,
            cache: HashMap::new(),
        })
    }

    pub(super) fn read(&mut self, oid: &str) -> Result<Vec<u8>, GitError> {
        if let Some(bytes) = self.cache.get(oid) {
            return Ok(bytes.clone());
        }
        let header = self.ask(oid)?;
        let mut fields = header.split_whitespace();
        let (_, kind, size) = (fields.next(), fields.next(), fields.next());
        if kind != Some("blob") {
            return Err(protocol(format!("object {oid}: {}", header.trim())));
        }
        let size: usize = size
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| protocol(format!("bad header {header:?}")))?;
        let bytes = self.read_content(oid, size).map_err(protocol)?;
        self.cache.insert(oid.to_owned(), bytes.clone());
        Ok(bytes)
    }

    /// Asks `git cat-file --batch` for object `name`: the header line it
    /// answers with (`<oid> <type> <size>`, or `<name> missing`).
    fn ask(&mut self, name: &str) -> Result<String, GitError> {
        writeln!(self.stdin, "{name}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| protocol(e.to_string()))?;
        let mut header = String::new();
        self.stdout
            .read_line(&mut header)
            .map_err(|e| protocol(e.to_string()))?;
        Ok(header)
    }

    /// The `size` bytes of object `what` that follow its header, and the
    /// newline after them; an object above the script limit is refused
    /// before anything is allocated for it (the same cap as loading a tree
    /// from disk: a hostile tag cannot exhaust memory).
    fn read_content(&mut self, what: &str, size: usize) -> Result<Vec<u8>, String> {
        let cap = usize::try_from(migration_core::LoadOptions::default().max_file_bytes)
            .unwrap_or(usize::MAX);
        if size > cap {
            return Err(format!(
                "object {what} is {size} bytes, above the {cap}-byte script limit"
            ));
        }
        let mut bytes = vec![0u8; size + 1];
        self.stdout
            .read_exact(&mut bytes)
            .map_err(|e| e.to_string())?;
        bytes.pop(); // the newline after the content
        Ok(bytes)
    }

    /// [`Self::read`] of an object named any way `git cat-file` accepts
    /// (`TAG:PATH`), `None` when there is no such object (a tag without
    /// that file, or no such tag). Not cached: each name is asked once.
    pub(super) fn read_named(&mut self, name: &str) -> Result<Option<Vec<u8>>, GitError> {
        if name.contains('\n') {
            return Err(protocol(format!("object name {name:?} has a newline")));
        }
        let header = self.ask(name)?;
        let header = header.trim_end();
        if header.ends_with(" missing") || header.ends_with(" ambiguous") {
            return Ok(None);
        }
        let mut fields = header.rsplitn(3, ' ');
        let (size, kind) = (fields.next(), fields.next());
        let size: usize = size
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| protocol(format!("bad header {header:?}")))?;
        let bytes = self.read_content(name, size).map_err(protocol)?;
        // A directory or a submodule at that path is no shipped script.
        Ok((kind == Some("blob")).then_some(bytes))
    }

    pub(super) fn finish(mut self) -> Result<(), GitError> {
        drop(self.stdin);
        let _ = self.child.wait();
        Ok(())
    }
}

/// A `git cat-file --batch` answer that is not what the protocol says.
fn protocol(detail: String) -> GitError {
    GitError::Protocol {
        args: "cat-file --batch".into(),
        detail,
    }
}
