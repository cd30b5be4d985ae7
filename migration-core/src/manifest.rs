//! The manifest: `order.d/` batch files that fix the execution order (CONTRACT.md §4).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::line_file;
use crate::slug::{Slug, SlugError};

/// The flag that marks a line whose script was deleted after it shipped.
pub const RETIRED_FLAG: &str = "retired";

/// Sequence number of the batch that holds the legacy-map slugs.
pub const LEGACY_SEQUENCE: u32 = 0;
/// Label of the batch that holds the legacy-map slugs.
pub const LEGACY_LABEL: &str = "legacy";
/// Sequence number of the batch of slugs no tag has shipped yet.
pub const UNTAGGED_SEQUENCE: u32 = 99_999;
/// Label of the batch of slugs no tag has shipped yet.
pub const UNTAGGED_LABEL: &str = "untagged";

/// A batch file name: five digits, a dash, a label (`00001-v1.7.0`).
///
/// Files are read in name order, and the five-digit sequence makes name
/// order equal numeric order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchName {
    sequence: u32,
    label: String,
}

/// Why a string is not a batch file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid batch file name {name:?}: {reason} (expected five digits, '-', then a label of [A-Za-z0-9._+-])"
)]
pub struct BatchNameError {
    /// The rejected name.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl BatchName {
    /// Builds a batch name, validating the label.
    pub fn new(sequence: u32, label: &str) -> Result<Self, BatchNameError> {
        let name = || format!("{sequence:05}-{label}");
        if sequence > UNTAGGED_SEQUENCE {
            return Err(BatchNameError {
                name: name(),
                reason: "sequence above 99999",
            });
        }
        if label.is_empty() || label.len() > 128 {
            return Err(BatchNameError {
                name: name(),
                reason: "label must be 1 to 128 characters",
            });
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        {
            return Err(BatchNameError {
                name: name(),
                reason: "label has a character outside [A-Za-z0-9._+-]",
            });
        }
        Ok(BatchName {
            sequence,
            label: label.to_owned(),
        })
    }

    /// The legacy batch, `00000-legacy`.
    pub fn legacy() -> Self {
        BatchName {
            sequence: LEGACY_SEQUENCE,
            label: LEGACY_LABEL.to_owned(),
        }
    }

    /// The untagged batch, `99999-untagged`.
    pub fn untagged() -> Self {
        BatchName {
            sequence: UNTAGGED_SEQUENCE,
            label: UNTAGGED_LABEL.to_owned(),
        }
    }

    /// The sequence number.
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    /// The label: the release tag that first shipped the batch, `legacy` or `untagged`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// True for the legacy batch.
    pub fn is_legacy(&self) -> bool {
        self.sequence == LEGACY_SEQUENCE
    }

    /// True for the untagged batch.
    pub fn is_untagged(&self) -> bool {
        self.sequence == UNTAGGED_SEQUENCE
    }
}

impl fmt::Display for BatchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:05}-{}", self.sequence, self.label)
    }
}

impl FromStr for BatchName {
    type Err = BatchNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason| BatchNameError {
            name: s.chars().take(160).collect(),
            reason,
        };
        let (digits, label) = s
            .split_once('-')
            .ok_or_else(|| bad("no '-' after the sequence"))?;
        if digits.len() != 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the sequence must be exactly five digits"));
        }
        let sequence = digits
            .parse::<u32>()
            .map_err(|_| bad("the sequence must be exactly five digits"))?;
        BatchName::new(sequence, label)
    }
}

/// One manifest line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The migration.
    pub slug: Slug,
    /// The script was deleted after it shipped; the line stays for ever.
    pub retired: bool,
}

/// One batch file: its name and its ordered lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The file name.
    pub name: BatchName,
    /// The lines, in execution order.
    pub entries: Vec<ManifestEntry>,
}

impl Batch {
    /// The file's exact bytes: one `<slug>` or `<slug> retired` line each.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.entries.len() * 24);
        for entry in &self.entries {
            out.push_str(entry.slug.as_str());
            if entry.retired {
                out.push(' ');
                out.push_str(RETIRED_FLAG);
            }
            out.push('\n');
        }
        out
    }
}

/// Where a slug sits in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Index of the batch.
    pub batch: usize,
    /// Index within the batch.
    pub index: usize,
}

/// A problem with the manifest, naming the batch file and line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A file in `order.d/` whose name is not a batch name.
    #[error("{}: {source}", file.display())]
    BadFileName {
        /// The file.
        file: PathBuf,
        /// What is wrong with the name.
        source: BatchNameError,
    },
    /// Two batch files with the same sequence number.
    #[error("batch files {first} and {second} share sequence number {sequence:05}")]
    DuplicateSequence {
        /// The sequence number.
        sequence: u32,
        /// The first file.
        first: String,
        /// The second file.
        second: String,
    },
    /// A line that is neither `<slug>`, `<slug> retired`, a comment nor blank.
    #[error("{file}:{line}: {reason}")]
    BadLine {
        /// The batch file.
        file: String,
        /// One-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A line whose slug does not parse.
    #[error("{file}:{line}: {source}")]
    InvalidSlug {
        /// The batch file.
        file: String,
        /// One-based line.
        line: usize,
        /// The slug error.
        source: SlugError,
    },
    /// A slug listed twice: every slug belongs to exactly one batch.
    #[error("{file}:{line}: slug '{slug}' is already listed at {first_file}:{first_line}")]
    DuplicateSlug {
        /// The slug.
        slug: Slug,
        /// Where it appears again.
        file: String,
        /// One-based line of the repetition.
        line: usize,
        /// Where it first appears.
        first_file: String,
        /// One-based line of the first appearance.
        first_line: usize,
    },
    /// Batches given out of name order.
    #[error("batch {later} comes before {earlier}; batches must be in file-name order")]
    OutOfOrder {
        /// The batch that should come first.
        earlier: String,
        /// The batch that should come later.
        later: String,
    },
    /// A file too large to be a manifest.
    #[error("{}: {size} bytes is above the {limit}-byte limit for a batch file", file.display())]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Reading `order.d/` failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The ordered list of batches. Every slug appears in exactly one batch.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    batches: Vec<Batch>,
    index: HashMap<Slug, Position>,
}

impl PartialEq for Manifest {
    fn eq(&self, other: &Self) -> bool {
        self.batches == other.batches
    }
}
impl Eq for Manifest {}

/// The largest batch file the loader reads: far above any real manifest.
pub const MAX_BATCH_FILE_BYTES: u64 = 16 * 1024 * 1024;

impl Manifest {
    /// Builds a manifest from batches in order, checking names are increasing
    /// and that no slug appears twice.
    pub fn from_batches(batches: Vec<Batch>) -> Result<Self, Vec<ManifestError>> {
        let mut errors = Vec::new();
        for pair in batches.windows(2) {
            if pair[0].name.sequence == pair[1].name.sequence {
                errors.push(ManifestError::DuplicateSequence {
                    sequence: pair[0].name.sequence,
                    first: pair[0].name.to_string(),
                    second: pair[1].name.to_string(),
                });
            } else if pair[0].name.to_string() > pair[1].name.to_string() {
                errors.push(ManifestError::OutOfOrder {
                    earlier: pair[1].name.to_string(),
                    later: pair[0].name.to_string(),
                });
            }
        }
        let mut index = HashMap::with_capacity(batches.iter().map(|b| b.entries.len()).sum());
        for (b, batch) in batches.iter().enumerate() {
            for (i, entry) in batch.entries.iter().enumerate() {
                let here = Position { batch: b, index: i };
                if let Some(first) = index.insert(entry.slug.clone(), here) {
                    // Keep the first position as the canonical one.
                    index.insert(entry.slug.clone(), first);
                    errors.push(ManifestError::DuplicateSlug {
                        slug: entry.slug.clone(),
                        file: batch.name.to_string(),
                        line: i + 1,
                        first_file: batches[first.batch].name.to_string(),
                        first_line: first.index + 1,
                    });
                }
            }
        }
        if errors.is_empty() {
            Ok(Manifest { batches, index })
        } else {
            Err(errors)
        }
    }

    /// Parses batch files given as `(file name, bytes)` in any order; they are
    /// sorted by name, as the directory is read.
    ///
    /// Lines are `<slug>` or `<slug> retired`; `#` starts a comment; blank
    /// lines are ignored. Every problem is reported, not only the first.
    pub fn parse_files(mut files: Vec<(String, Vec<u8>)>) -> Result<Self, Vec<ManifestError>> {
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut errors = Vec::new();
        let mut batches = Vec::with_capacity(files.len());
        let mut seen: HashMap<Slug, (String, usize)> = HashMap::new();
        for (file, bytes) in files {
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
            let mut entries = Vec::new();
            for (line, words) in line_file::records(&bytes) {
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
                if let Some((first_file, first_line)) = seen.get(&slug) {
                    errors.push(ManifestError::DuplicateSlug {
                        slug,
                        file: file.clone(),
                        line,
                        first_file: first_file.clone(),
                        first_line: *first_line,
                    });
                    continue;
                }
                seen.insert(slug.clone(), (file.clone(), line));
                entries.push(ManifestEntry { slug, retired });
            }
            batches.push(Batch { name, entries });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Manifest::from_batches(batches)
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
            let meta = std::fs::metadata(&path).map_err(|e| io(&path, e))?;
            if meta.len() > MAX_BATCH_FILE_BYTES {
                return Err(vec![ManifestError::TooLarge {
                    file: path,
                    size: meta.len(),
                    limit: MAX_BATCH_FILE_BYTES,
                }]);
            }
            let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
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

    /// The batches in order.
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }

    /// Every line in execution order, with its batch.
    pub fn iter(&self) -> impl Iterator<Item = (&Batch, &ManifestEntry)> {
        self.batches
            .iter()
            .flat_map(|b| b.entries.iter().map(move |e| (b, e)))
    }

    /// Where `slug` sits, if it is listed.
    pub fn position(&self, slug: &Slug) -> Option<Position> {
        self.index.get(slug).copied()
    }

    /// The batch and line of `slug`, if it is listed.
    pub fn lookup(&self, slug: &Slug) -> Option<(&Batch, &ManifestEntry)> {
        let p = self.position(slug)?;
        let batch = &self.batches[p.batch];
        Some((batch, &batch.entries[p.index]))
    }

    /// Number of slugs listed.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when no slug is listed.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// True when `self` is an order-prefix of `later`: every batch of `self`
    /// is in `later` under the same name with the same slugs in the same
    /// order, and `later` only appends. The `retired` flag is the one thing
    /// allowed to change between two releases (a script deleted later gets
    /// flagged in its original batch), so it is not compared here; the
    /// byte-exact prefix holds whenever nothing was retired in between.
    pub fn is_order_prefix_of(&self, later: &Manifest) -> bool {
        self.batches.len() <= later.batches.len()
            && self.batches.iter().zip(&later.batches).all(|(a, b)| {
                a.name == b.name
                    && a.entries.len() == b.entries.len()
                    && a.entries
                        .iter()
                        .zip(&b.entries)
                        .all(|(x, y)| x.slug == y.slug)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::s;

    fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(n, c)| (n.to_string(), c.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn parses_batches_in_file_name_order_whatever_the_input_order() {
        let m = Manifest::parse_files(files(&[
            ("00001-v1.7.0", "b\na retired\n"),
            ("00000-legacy", "45\n46\n"),
        ]))
        .unwrap();
        let order: Vec<_> = m
            .iter()
            .map(|(b, e)| (b.name.to_string(), e.slug.to_string(), e.retired))
            .collect();
        assert_eq!(
            order,
            [
                ("00000-legacy".into(), "45".into(), false),
                ("00000-legacy".into(), "46".into(), false),
                ("00001-v1.7.0".into(), "b".into(), false),
                ("00001-v1.7.0".into(), "a".into(), true),
            ]
        );
        assert_eq!(m.position(&s("a")), Some(Position { batch: 1, index: 1 }));
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn render_then_parse_is_the_identity_and_render_is_byte_exact() {
        let input = files(&[
            ("00000-legacy", "45\n"),
            ("00001-v1.7.0-rc.1", "x retired\ny\n"),
            ("99999-untagged", ""),
        ]);
        let m = Manifest::parse_files(input.clone()).unwrap();
        let rendered = m.render();
        let back: Vec<_> = rendered
            .iter()
            .map(|(n, c)| (n.clone(), c.as_bytes().to_vec()))
            .collect();
        assert_eq!(back, input);
        assert_eq!(Manifest::parse_files(back).unwrap(), m);
    }

    #[test]
    fn comments_and_blank_lines_are_ignored() {
        let m = Manifest::parse_files(files(&[(
            "00001-v1",
            "# generated\n\n a  # trailing\nb retired # gone\n",
        )]))
        .unwrap();
        assert_eq!(
            m.render(),
            [("00001-v1".to_string(), "a\nb retired\n".to_string())]
        );
    }

    #[test]
    fn a_slug_listed_twice_names_both_places() {
        let errors = Manifest::parse_files(files(&[
            ("00001-v1", "# header\na\nb\n"),
            ("00002-v2", "c\n\na\n"),
        ]))
        .unwrap_err();
        assert_eq!(errors.len(), 1);
        let text = errors[0].to_string();
        assert_eq!(text, "00002-v2:3: slug 'a' is already listed at 00001-v1:2");
    }

    #[test]
    fn unknown_flags_extra_words_and_bad_slugs_name_file_and_line() {
        let errors =
            Manifest::parse_files(files(&[("00001-v1", "ok\na done\nb retired now\nBad\n")]))
                .unwrap_err();
        let text: Vec<_> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(
            text[0].starts_with("00001-v1:2: unknown flag \"done\""),
            "{}",
            text[0]
        );
        assert!(
            text[1].starts_with("00001-v1:3: too many words"),
            "{}",
            text[1]
        );
        assert!(
            text[2].starts_with("00001-v1:4: slug \"Bad\""),
            "{}",
            text[2]
        );
    }

    #[test]
    fn bad_file_names_and_shared_sequences_are_rejected() {
        let errors = Manifest::parse_files(files(&[("1-v1", "a\n"), ("README", "")])).unwrap_err();
        assert_eq!(errors.len(), 2);
        assert!(
            errors
                .iter()
                .all(|e| matches!(e, ManifestError::BadFileName { .. }))
        );
        let errors =
            Manifest::parse_files(files(&[("00001-v1", "a\n"), ("00001-v2", "b\n")])).unwrap_err();
        assert!(matches!(
            errors[..],
            [ManifestError::DuplicateSequence { sequence: 1, .. }]
        ));
        assert!("00001-v1/x".parse::<BatchName>().is_err());
        assert!("00001-".parse::<BatchName>().is_err());
        assert!("0000a-v1".parse::<BatchName>().is_err());
    }

    #[test]
    fn non_utf8_line_is_reported_with_its_line() {
        let errors =
            Manifest::parse_files(vec![("00001-v1".into(), b"a\n\xff\n".to_vec())]).unwrap_err();
        assert!(matches!(
            &errors[..],
            [ManifestError::BadLine { line: 2, .. }]
        ));
    }

    #[test]
    fn write_dir_leaves_exactly_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("99999-untagged"), "stale\n").unwrap();
        let m = Manifest::parse_files(files(&[("00001-v1", "a\n")])).unwrap();
        m.write_dir(dir.path()).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["00001-v1"]);
        assert_eq!(Manifest::load_dir(dir.path()).unwrap(), m);
    }

    #[test]
    fn order_prefix_ignores_only_the_retired_flag() {
        let early = Manifest::parse_files(files(&[("00001-v1", "a\nb\n")])).unwrap();
        let later = Manifest::parse_files(files(&[
            ("00001-v1", "a retired\nb\n"),
            ("00002-v2", "c\n"),
        ]))
        .unwrap();
        let reordered = Manifest::parse_files(files(&[("00001-v1", "b\na\n")])).unwrap();
        assert!(early.is_order_prefix_of(&later));
        assert!(!later.is_order_prefix_of(&early));
        assert!(!reordered.is_order_prefix_of(&later));
    }
}
