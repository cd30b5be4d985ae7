//! `order.d/` on disk and in bytes: parsing batch files (every problem
//! reported), reading the directory, rendering and writing it back.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;

use super::{
    Batch, BatchName, BatchNameError, MAX_BATCH_FILE_BYTES, Manifest, ManifestEntry, ManifestError,
    Position, RETIRED_FLAG,
};
use crate::line_file;
use crate::slug::Slug;

impl Manifest {
    /// Parses batch files given as `(file name, bytes)` in any order; they are
    /// sorted by name, as the directory is read.
    ///
    /// Lines are `<slug>` or `<slug> retired`; `#` starts a comment; blank
    /// lines are ignored. Every problem is reported, not only the first.
    pub fn parse_files(mut files: Vec<(String, Vec<u8>)>) -> Result<Self, Vec<ManifestError>> {
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut errors = Vec::new();
        let mut batches = Vec::with_capacity(files.len());
        // Where each slug was first seen: its position (the manifest's index
        // when all is well) and the file line, for a repetition's message.
        let lines = files
            .iter()
            .map(|(_, b)| line_count(b))
            .sum::<usize>()
            .min(1 << 20);
        let mut seen: HashMap<Slug, (Position, usize)> = HashMap::with_capacity(lines);
        // The file each batch came from (files with a bad name make none).
        let mut batch_files: Vec<usize> = Vec::with_capacity(files.len());
        for (f, (file, bytes)) in files.iter().enumerate() {
            let name = match file.parse::<BatchName>() {
                Ok(name) => name,
                Err(source) => {
                    errors.push(ManifestError::BadFileName {
                        file: file.into(),
                        source,
                    });
                    continue;
                }
            };
            let batch = batches.len();
            batch_files.push(f);
            let mut entries = Vec::with_capacity(line_count(bytes));
            for (line, words) in line_file::records(bytes) {
                let Some(words) = words else {
                    errors.push(ManifestError::BadLine {
                        file: file.clone(),
                        line,
                        reason: line_file::NOT_UTF8.into(),
                    });
                    continue;
                };
                let first = words[0];
                let slug = match Slug::parse(first) {
                    Ok(slug) => slug,
                    Err(source) => {
                        errors.push(ManifestError::InvalidSlug {
                            file: file.clone(),
                            line,
                            source,
                        });
                        continue;
                    }
                };
                let retired = match (words.get(1).copied(), words.get(2)) {
                    (None, _) => false,
                    (Some(RETIRED_FLAG), None) => true,
                    (Some(flag), None) => {
                        errors.push(ManifestError::BadLine {
                            file: file.clone(),
                            line,
                            reason: format!("unknown flag {flag:?} after '{slug}'; the only flag is '{RETIRED_FLAG}'"),
                        });
                        continue;
                    }
                    (Some(_), Some(_)) => {
                        errors.push(ManifestError::BadLine {
                            file: file.clone(),
                            line,
                            reason: "too many words; expected '<slug>' or '<slug> retired'".into(),
                        });
                        continue;
                    }
                };
                let here = Position {
                    batch,
                    index: entries.len(),
                };
                match seen.entry(slug) {
                    Entry::Occupied(first) => {
                        let (at, first_line) = *first.get();
                        errors.push(ManifestError::DuplicateSlug {
                            slug: first.key().clone(),
                            file: file.clone(),
                            line,
                            first_file: files[batch_files[at.batch]].0.clone(),
                            first_line,
                        });
                    }
                    Entry::Vacant(slot) => {
                        entries.push(ManifestEntry {
                            slug: slot.key().clone(),
                            retired,
                        });
                        slot.insert((here, line));
                    }
                }
            }
            batches.push(Batch { name, entries });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        // Every slug is in `seen` once, at its position: that is the
        // index, so it is not built again by hashing every slug twice.
        let index = seen.into_iter().map(|(slug, (p, _))| (slug, p)).collect();
        Manifest::from_indexed_batches(batches, index)
    }

    /// Reads every file of an `order.d/` directory.
    pub fn load_dir(dir: &Path) -> Result<Self, Vec<ManifestError>> {
        let io = |path: &Path, source| {
            vec![ManifestError::Io {
                path: path.to_path_buf(),
                source,
            }]
        };
        let mut files = Vec::new();
        for item in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let item = item.map_err(|e| io(dir, e))?;
            let path = item.path();
            let Some(name) = item.file_name().to_str().map(str::to_owned) else {
                return Err(vec![ManifestError::BadFileName {
                    file: path,
                    source: BatchNameError {
                        name: "<non-UTF-8 name>".into(),
                        reason: "not valid UTF-8",
                    },
                }]);
            };
            // Through the one reader: a FIFO or a device is refused, not read.
            use crate::tree::supplied::{FileError, Within, read_file};
            let bytes = match read_file(&path, Within::Anywhere, MAX_BATCH_FILE_BYTES) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(FileError::TooLarge { size, .. }) => {
                    return Err(vec![ManifestError::TooLarge {
                        file: path,
                        size,
                        limit: MAX_BATCH_FILE_BYTES,
                    }]);
                }
                Err(e) => {
                    return Err(vec![ManifestError::Io {
                        path,
                        source: std::io::Error::other(e.to_string()),
                    }]);
                }
            };
            files.push((name, bytes));
        }
        Manifest::parse_files(files)
    }

    /// The batch files, in order, as `(file name, exact contents)`.
    pub fn render(&self) -> Vec<(String, String)> {
        self.batches
            .iter()
            .map(|b| (b.name.to_string(), b.render()))
            .collect()
    }

    /// Writes the batch files into `dir` (the `order.d` directory itself),
    /// creating it if needed. Each file is replaced atomically; files in
    /// `dir` that are not batches of this manifest (a stale untagged batch,
    /// for instance) are removed, so the directory holds exactly this
    /// manifest afterwards. Subdirectories are left alone.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let files = self.render();
        for (name, contents) in &files {
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, contents.as_bytes())?;
            std::fs::rename(&tmp, dir.join(name))?;
        }
        for item in std::fs::read_dir(dir)? {
            let item = item?;
            let keep = item
                .file_name()
                .to_str()
                .is_some_and(|n| files.iter().any(|(f, _)| f == n));
            if !keep && item.file_type()?.is_file() {
                std::fs::remove_file(item.path())?;
            }
        }
        Ok(())
    }
}

/// Room to reserve for a batch file's entries: its line count, an upper
/// bound, capped so a hostile file of blank lines cannot reserve much.
fn line_count(bytes: &[u8]) -> usize {
    const MOST: usize = 1 << 20;
    (bytes.iter().filter(|&&b| b == b'\n').count() + 1).min(MOST)
}
