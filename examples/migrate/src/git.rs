//! The git adapter for manifest generation (CONTRACT.md §4): which release tags a
//! build sees, in what order, and what each tag shipped.
//!
//! It shells out to `git` rather than linking a git library: the build stays
//! small on 2 cores, and `git` is on every machine that has a checkout. All
//! blob contents are read through one `git cat-file --batch` process.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use migration_core::generate::{LegacyMapAt, Place, ReleaseHistory, ScriptInfo, TagTree};
use migration_core::header::{Tier, parse_header};
use migration_core::tree::parse_legacy_map;
use migration_core::version::Version;
use migration_core::{Sha256Digest, Slug};

/// Why the release history could not be read. Every variant is fatal:
/// a smaller history would silently produce a smaller manifest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// `git` could not be run.
    #[error("cannot run git in {}: {source}", repo.display())]
    Spawn {
        /// The repository.
        repo: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("git {args} failed in {}: {stderr}", repo.display())]
    Command {
        /// The repository.
        repo: PathBuf,
        /// The arguments.
        args: String,
        /// What git said.
        stderr: String,
    },
    /// The clone is shallow: older tags' trees are missing.
    #[error("{} is a shallow clone; manifest generation needs the full history and every release tag (git fetch --unshallow --tags)", repo.display())]
    Shallow {
        /// The repository.
        repo: PathBuf,
    },
    /// A tag that matches the pattern but is not a semantic version.
    #[error(
        "tag {tag:?} matches the release pattern but is not a semantic version (vMAJOR.MINOR.PATCH[-PRERELEASE])"
    )]
    NotSemver {
        /// The tag.
        tag: String,
    },
    /// Release order and history order disagree on this line.
    #[error(
        "release tag {earlier} is not an ancestor of {later}, though it sorts before it: the line's history does not follow release order, so the manifest would insert a batch in the middle"
    )]
    NotLinear {
        /// The tag that sorts first.
        earlier: String,
        /// The tag that sorts next.
        later: String,
    },
    /// Release tags whose tree has the migrations tree at none of the
    /// paths given: it moved, or the tags predate it.
    #[error(
        "release tag(s) {} have no migrations tree at {}: they would silently contribute nothing (a smaller manifest, retired lines lost, slugs in later batches). If the tree moved, give its earlier path too (--path NEW --path OLD); if these releases predate the tree, pass --tree-since <first tag with the tree>",
        tags.join(", "), paths.join(" or ")
    )]
    TreeMissing {
        /// The tags, in release order.
        tags: Vec<String>,
        /// The paths looked at.
        paths: Vec<String>,
    },
    /// A tag holding a migrations tree at more than one of the paths given.
    #[error("release tag {tag} has a migrations tree at each of {}: say which one it used (give only paths that never coexist)", paths.join(", "))]
    AmbiguousPath {
        /// The tag.
        tag: String,
        /// The paths that are trees in it.
        paths: Vec<String>,
    },
    /// Something in a tag's tree that cannot be a migration script.
    #[error("tag {tag}: {path}: {reason}")]
    BadEntry {
        /// The tag.
        tag: String,
        /// The path in the tag's tree.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Tags exist, but none matches the release pattern.
    #[error(
        "no tag matches --tag-pattern {pattern:?} (the repository has {tags} other tag(s), e.g. {example}); every migration would be untagged"
    )]
    NoMatchingTag {
        /// The pattern.
        pattern: String,
        /// How many tags the repository has.
        tags: usize,
        /// One of them.
        example: String,
    },
    /// No release tag holds the migrations path.
    #[error(
        "no tag matching {pattern:?} has {path}/pre-apply or {path}/background (checked {tags} tag(s)): is --path right? If the tree is new since the last release, pass --allow-new-path"
    )]
    PathInNoTag {
        /// The path, relative to the repository.
        path: String,
        /// The pattern.
        pattern: String,
        /// How many tags were read.
        tags: usize,
    },
    /// git's output could not be understood.
    #[error("unexpected output from git {args}: {detail}")]
    Protocol {
        /// The command.
        args: String,
        /// What was wrong.
        detail: String,
    },
}

/// A repository and the migrations path inside it.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
    allow_new_path: bool,
}

/// Whether `tag` is a tag of the git repository that `dir` is in (false
/// outside a repository or without git).
pub fn tag_exists(dir: &Path, tag: &str) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "-q", "--verify"])
        .arg(format!("refs/tags/{tag}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Repo {
    /// The repository at `root`.
    pub fn new(root: &Path) -> Self {
        Repo {
            root: root.to_path_buf(),
            allow_new_path: false,
        }
    }

    /// Accepts a migrations path that no release tag holds yet (a tree
    /// added since the last release); otherwise that is
    /// [`GitError::PathInNoTag`].
    pub fn allow_new_path(mut self, allow: bool) -> Self {
        self.allow_new_path = allow;
        self
    }

    fn git(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let output = Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| GitError::Spawn {
                repo: self.root.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(GitError::Command {
                repo: self.root.clone(),
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(output.stdout)
    }

    fn lines(&self, args: &[&str]) -> Result<Vec<String>, GitError> {
        let out = self.git(args)?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// Checks that each tag of the line is an ancestor of the next one,
    /// with two git processes in all: one lists the commit of every tag, one
    /// the parents of every commit reachable from HEAD; ancestry
    /// is then walked in memory (one `merge-base` per pair cost half the
    /// adapter's time at 300 tags).
    fn check_linear(&self, line: &[(Version, String)]) -> Result<(), GitError> {
        if line.len() < 2 {
            return Ok(());
        }
        let mut commit_of: HashMap<String, String> = HashMap::new();
        for row in self.lines(&[
            "for-each-ref",
            "--format=%(refname:strip=2) %(objectname) %(*objectname)",
            "refs/tags",
        ])? {
            let mut fields = row.split(' ');
            let (name, object, peeled) = (fields.next(), fields.next(), fields.next());
            if let (Some(name), Some(object)) = (name, object) {
                // Annotated tags peel to their commit; lightweight ones are the commit.
                let commit = peeled.filter(|p| !p.is_empty()).unwrap_or(object);
                commit_of.insert(name.to_owned(), commit.to_owned());
            }
        }
        let mut parents: HashMap<String, Vec<String>> = HashMap::new();
        // Every line tag is merged into HEAD, so HEAD's history holds them all.
        for row in self.lines(&["rev-list", "--parents", "HEAD"])? {
            let mut ids = row.split(' ').map(str::to_owned);
            if let Some(commit) = ids.next() {
                parents.insert(commit, ids.collect());
            }
        }
        let protocol = |tag: &str| GitError::Protocol {
            args: "for-each-ref refs/tags".into(),
            detail: format!("no commit for tag {tag}"),
        };
        for pair in line.windows(2) {
            let earlier = commit_of
                .get(&pair[0].1)
                .ok_or_else(|| protocol(&pair[0].1))?;
            let later = commit_of
                .get(&pair[1].1)
                .ok_or_else(|| protocol(&pair[1].1))?;
            if !reaches(&parents, later, earlier) {
                return Err(GitError::NotLinear {
                    earlier: pair[0].1.clone(),
                    later: pair[1].1.clone(),
                });
            }
        }
        Ok(())
    }

    /// Reads the release history of the line that HEAD is on.
    ///
    /// `path` is the migrations tree's path inside the repository; `pattern`
    /// is the tag glob (`v*` by default). `disk` and `legacy` describe the
    /// working tree and are passed through.
    pub fn history(
        &self,
        path: &str,
        pattern: &str,
        disk: BTreeMap<Slug, ScriptInfo>,
        legacy: Vec<Slug>,
    ) -> Result<ReleaseHistory, GitError> {
        let paths = [path.to_owned()];
        let reading = TreePaths {
            paths: &paths,
            tree_since: None,
        };
        self.history_at(&reading, pattern, disk, legacy)
    }

    /// [`Repo::history`] with the tree's path history: each tag reads the
    /// one of `reading.paths` it has; a tag with none is
    /// [`GitError::TreeMissing`] unless it sorts before
    /// `reading.tree_since`.
    pub fn history_at(
        &self,
        reading: &TreePaths<'_>,
        pattern: &str,
        disk: BTreeMap<Slug, ScriptInfo>,
        legacy: Vec<Slug>,
    ) -> Result<ReleaseHistory, GitError> {
        let shallow = self.lines(&["rev-parse", "--is-shallow-repository"])?;
        if shallow.first().map(String::as_str) != Some("false") {
            return Err(GitError::Shallow {
                repo: self.root.clone(),
            });
        }
        let sort = |tags: Vec<String>| -> Result<Vec<(Version, String)>, GitError> {
            let mut v = tags
                .into_iter()
                .map(|t| {
                    Version::parse(&t)
                        .map(|v| (v, t.clone()))
                        .ok_or(GitError::NotSemver { tag: t })
                })
                .collect::<Result<Vec<_>, _>>()?;
            v.sort();
            Ok(v)
        };
        let line = sort(self.lines(&["tag", "--merged", "HEAD", "--list", pattern])?)?;
        let all = sort(self.lines(&["tag", "--list", pattern])?)?;
        if all.is_empty() {
            // A repository before its first release has no tags at all, and
            // everything is untagged; tags that all miss the pattern are a
            // mistyped pattern.
            let every = self.lines(&["tag", "--list"])?;
            if let Some(example) = every.first() {
                return Err(GitError::NoMatchingTag {
                    pattern: pattern.to_owned(),
                    tags: every.len(),
                    example: example.clone(),
                });
            }
        }
        self.check_linear(&line)?;
        let on_line: std::collections::HashSet<&String> = line.iter().map(|(_, t)| t).collect();

        let since = match reading.tree_since {
            Some(t) => Some(Version::parse(t).ok_or(GitError::NotSemver { tag: t.to_owned() })?),
            None => None,
        };
        let mut missing: Vec<String> = Vec::new();
        let mut reader = BlobReader::start(&self.root)?;
        let mut read_tag = |version: &Version, tag: &str| {
            let mut found = Vec::new();
            for path in reading.paths {
                let read = self.tag_tree(tag, path, &mut reader)?;
                if read.present {
                    found.push((path.clone(), read));
                }
            }
            if found.len() == 1
                && let Some((_, read)) = found.pop()
            {
                return Ok((read.tree, read.legacy_map));
            }
            match found.len() {
                0 => {
                    if since.as_ref().is_none_or(|s| version >= s) {
                        missing.push(tag.to_owned());
                    }
                    Ok((
                        TagTree {
                            tag: tag.to_owned(),
                            scripts: BTreeMap::new(),
                        },
                        None,
                    ))
                }
                _ => Err(GitError::AmbiguousPath {
                    tag: tag.to_owned(),
                    paths: found.into_iter().map(|(p, _)| p).collect(),
                }),
            }
        };
        let (line_trees, mut legacy_maps): (Vec<_>, Vec<_>) = line
            .iter()
            .map(|(v, t)| read_tag(v, t))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        let (other_trees, other_maps): (Vec<_>, Vec<_>) = all
            .iter()
            .filter(|(_, t)| !on_line.contains(t))
            .map(|(v, t)| read_tag(v, t))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        reader.finish()?;
        // A tree no tag holds at all is new since the last release: an error
        // (a mistyped --path would make every script untagged) unless the
        // caller says so. Some tags lacking it is TreeMissing below.
        let holding = all.len() - missing.len().min(all.len());
        if !all.is_empty() && holding == 0 && reading.tree_since.is_none() {
            if self.allow_new_path {
                missing.clear();
            } else {
                return Err(GitError::PathInNoTag {
                    path: reading.paths.join(", "),
                    pattern: pattern.to_owned(),
                    tags: all.len(),
                });
            }
        }
        if !missing.is_empty() {
            let mut tags: Vec<(Version, String)> = missing
                .into_iter()
                .filter_map(|t| Version::parse(&t).map(|v| (v, t)))
                .collect();
            tags.sort();
            return Err(GitError::TreeMissing {
                tags: tags.into_iter().map(|(_, t)| t).collect(),
                paths: reading.paths.to_vec(),
            });
        }
        legacy_maps.extend(other_maps);
        Ok(ReleaseHistory {
            line: line_trees,
            other_tags: other_trees,
            disk,
            legacy,
            legacy_maps: legacy_maps.into_iter().flatten().collect(),
        })
    }

    /// The tags matching `pattern`, in version order (every one must be a
    /// version); with `merged_only`, only those merged into HEAD (the line).
    pub fn release_tags(
        &self,
        pattern: &str,
        merged_only: bool,
    ) -> Result<Vec<(Version, String)>, GitError> {
        let mut args = vec!["tag"];
        if merged_only {
            args.extend(["--merged", "HEAD"]);
        }
        args.extend(["--list", pattern]);
        let mut tags = self
            .lines(&args)?
            .into_iter()
            .map(|t| {
                Version::parse(&t)
                    .map(|v| (v, t.clone()))
                    .ok_or(GitError::NotSemver { tag: t })
            })
            .collect::<Result<Vec<_>, _>>()?;
        tags.sort();
        Ok(tags)
    }

    /// Every regular file under `path` in each of `tags`' trees, by path
    /// relative to `path` (`/`-separated), with its bytes; blobs are read
    /// through one `git cat-file` process. Symlinks and submodules are
    /// reported as [`GitError::BadEntry`]: a converted tree must not depend
    /// on what they point to.
    pub fn files_at_tags(
        &self,
        tags: &[String],
        path: &str,
    ) -> Result<Vec<BTreeMap<String, Vec<u8>>>, GitError> {
        let path = path.trim_matches('/');
        let mut reader = BlobReader::start(&self.root)?;
        let mut out = Vec::with_capacity(tags.len());
        for tag in tags {
            let rev = format!("refs/tags/{tag}^{{commit}}");
            let listing = self.git(&["ls-tree", "-r", "-z", &rev, "--", &format!("{path}/")])?;
            let mut files = BTreeMap::new();
            for record in listing.split(|&b| b == 0).filter(|r| !r.is_empty()) {
                let text = String::from_utf8_lossy(record);
                let bad = |reason: &str| GitError::BadEntry {
                    tag: tag.clone(),
                    path: text.to_string(),
                    reason: reason.to_owned(),
                };
                let (meta, file) = text
                    .split_once('\t')
                    .ok_or_else(|| bad("unparseable ls-tree record"))?;
                let mut meta = meta.split(' ');
                let (mode, kind, oid) = (
                    meta.next().unwrap_or(""),
                    meta.next().unwrap_or(""),
                    meta.next().unwrap_or(""),
                );
                let rel = file
                    .strip_prefix(&format!("{path}/"))
                    .ok_or_else(|| bad("outside the requested path"))?;
                if kind != "blob" || !(mode == "100644" || mode == "100755") {
                    return Err(bad("not a regular file (symlink or submodule)"));
                }
                files.insert(rel.to_owned(), reader.read(oid)?);
            }
            out.push(files);
        }
        reader.finish()?;
        Ok(out)
    }

    /// Whether the clone is shallow (older tags' trees would be missing).
    pub fn check_not_shallow(&self) -> Result<(), GitError> {
        let shallow = self.lines(&["rev-parse", "--is-shallow-repository"])?;
        if shallow.first().map(String::as_str) == Some("false") {
            Ok(())
        } else {
            Err(GitError::Shallow {
                repo: self.root.clone(),
            })
        }
    }

    /// The scripts of `tag`, and whether its tree has the tier
    /// directories at all (a `.gitkeep` counts).
    fn tag_tree(
        &self,
        tag: &str,
        path: &str,
        reader: &mut BlobReader,
    ) -> Result<TagRead, GitError> {
        let path = path.trim_matches('/');
        let prefix = if path.is_empty() || path == "." {
            String::new()
        } else {
            format!("{path}/")
        };
        let dirs: Vec<String> = Tier::ALL
            .iter()
            .map(|t| format!("{prefix}{}", t.as_str()))
            .collect();
        let mut args = vec![
            "ls-tree".to_owned(),
            "-z".to_owned(),
            format!("refs/tags/{tag}^{{commit}}"),
            "--".to_owned(),
        ];
        args.extend(dirs.iter().map(|d| format!("{d}/")));
        // The tag's legacy-map, for the guard (CONTRACT.md §4.5).
        let legacy_path = format!("{prefix}{}", migration_core::tree::LEGACY_MAP_FILE);
        args.push(legacy_path.clone());
        let mut legacy_map = None;
        let mut present = false;
        let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        let listing = self.git(&args_ref)?;
        let mut scripts = BTreeMap::new();
        for record in listing.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            present = true;
            let text = String::from_utf8_lossy(record);
            let bad = |reason: &str| GitError::BadEntry {
                tag: tag.to_owned(),
                path: text.to_string(),
                reason: reason.to_owned(),
            };
            let (meta, file) = text
                .split_once('\t')
                .ok_or_else(|| bad("unparseable ls-tree record"))?;
            let mut meta = meta.split(' ');
            let (mode, kind, oid) = (
                meta.next().unwrap_or(""),
                meta.next().unwrap_or(""),
                meta.next().unwrap_or(""),
            );
            if file == legacy_path {
                if kind != "blob" {
                    return Err(bad("legacy-map is not a regular file"));
                }
                let bytes = reader.read(oid)?;
                let pairs = parse_legacy_map(Path::new(file), &bytes).map_err(|problems| {
                    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
                    bad(&text.join("; "))
                })?;
                legacy_map = Some(LegacyMapAt {
                    place: Place::Tag(tag.to_owned()),
                    pairs,
                });
                continue;
            }
            let (dir, name) = file
                .rsplit_once('/')
                .ok_or_else(|| bad("not inside a tier directory"))?;
            let Some(tier) = Tier::ALL
                .into_iter()
                .find(|t| dir == format!("{prefix}{}", t.as_str()))
            else {
                return Err(bad("not directly inside a tier directory"));
            };
            if name == ".gitkeep" || name == ".keep" {
                continue;
            }
            if kind != "blob" || !(mode == "100644" || mode == "100755") {
                return Err(bad("not a regular file (symlink, directory or submodule)"));
            }
            let slug =
                Slug::parse(name).map_err(|e| bad(&format!("file name is not a slug: {e}")))?;
            let bytes = reader.read(oid)?;
            let header = parse_header(Path::new(file), &bytes).map_err(|errors| {
                let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
                bad(&text.join("; "))
            })?;
            if header.tier != tier {
                return Err(bad(&format!(
                    "header says tier={} but the file is in {}/",
                    header.tier, tier
                )));
            }
            let info = ScriptInfo {
                tier,
                sha256: Sha256Digest::of(&bytes),
                requires: header.requires.into_iter().map(|r| r.target).collect(),
            };
            if scripts.insert(slug, info).is_some() {
                return Err(bad("the same slug is in both tiers"));
            }
        }
        Ok(TagRead {
            tree: TagTree {
                tag: tag.to_owned(),
                scripts,
            },
            legacy_map,
            present,
        })
    }
}

/// Where the migrations tree lives in the release tags.
#[derive(Debug, Clone, Copy)]
pub struct TreePaths<'a> {
    /// Its paths inside the repository, the working tree's first; each tag
    /// must have exactly one of them.
    pub paths: &'a [String],
    /// Tags sorting before this one may lack the tree (they predate it).
    pub tree_since: Option<&'a str>,
}

/// One tag's read at one path.
struct TagRead {
    tree: TagTree,
    legacy_map: Option<LegacyMapAt>,
    /// The tag has anything at the path's tier directories or legacy-map
    /// (git keeps no empty directory, so an existing tier has a file).
    present: bool,
}

/// Whether `target` is `from` or one of its ancestors in `parents`.
fn reaches(parents: &HashMap<String, Vec<String>>, from: &str, target: &str) -> bool {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut stack = vec![from];
    while let Some(commit) = stack.pop() {
        if commit == target {
            return true;
        }
        if seen.insert(commit) {
            stack.extend(
                parents
                    .get(commit)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
        }
    }
    false
}

/// One long-lived `git cat-file --batch` process, with a cache by object id:
/// a script that is unchanged across 300 tags is read once.
struct BlobReader {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    cache: HashMap<String, Vec<u8>>,
}

impl BlobReader {
    fn start(repo: &Path) -> Result<Self, GitError> {
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

    fn read(&mut self, oid: &str) -> Result<Vec<u8>, GitError> {
        if let Some(bytes) = self.cache.get(oid) {
            return Ok(bytes.clone());
        }
        let protocol = |detail: String| GitError::Protocol {
            args: "cat-file --batch".into(),
            detail,
        };
        writeln!(self.stdin, "{oid}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| protocol(e.to_string()))?;
        let mut header = String::new();
        self.stdout
            .read_line(&mut header)
            .map_err(|e| protocol(e.to_string()))?;
        let mut fields = header.split_whitespace();
        let (_, kind, size) = (fields.next(), fields.next(), fields.next());
        if kind != Some("blob") {
            return Err(protocol(format!("object {oid}: {}", header.trim())));
        }
        let size: usize = size
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| protocol(format!("bad header {header:?}")))?;
        // Same cap as loading a tree from disk: a hostile tag cannot exhaust memory.
        let cap = usize::try_from(migration_core::LoadOptions::default().max_file_bytes)
            .unwrap_or(usize::MAX);
        if size > cap {
            return Err(protocol(format!(
                "object {oid} is {size} bytes, above the {cap}-byte script limit"
            )));
        }
        let mut bytes = vec![0u8; size + 1];
        self.stdout
            .read_exact(&mut bytes)
            .map_err(|e| protocol(e.to_string()))?;
        bytes.pop(); // the newline after the content
        self.cache.insert(oid.to_owned(), bytes.clone());
        Ok(bytes)
    }

    fn finish(mut self) -> Result<(), GitError> {
        drop(self.stdin);
        let _ = self.child.wait();
        Ok(())
    }
}
