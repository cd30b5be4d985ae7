//! A line's release history: each tag's scripts and legacy-map, following a moved tree.

use std::collections::BTreeMap;
use std::path::Path;

use crate::git::{
    BlobReader, Chain, GitError, OffLine, Repo, TreeRecord, bad_entry, ls_tree_records,
};
use migration_core::generate::{LegacyMapAt, Place, ReleaseHistory, ScriptInfo, TagTree};
use migration_core::header::{HeaderMarker, Tier, parse_header_with};
use migration_core::tree::parse_legacy_map;
use migration_core::version::Version;
use migration_core::{Sha256Digest, Slug};

impl Repo {
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
        let marker = HeaderMarker::default();
        let reading = TreePaths {
            paths: &paths,
            tree_since: None,
            marker: &marker,
        };
        self.history_at(&reading, pattern, disk, legacy)
            .map(|read| read.history)
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
    ) -> Result<LineHistory, GitError> {
        let shallow = self.lines(&["rev-parse", "--is-shallow-repository"])?;
        if shallow.first().map(String::as_str) != Some("false") {
            return Err(GitError::Shallow {
                repo: self.root.clone(),
            });
        }
        let Chain { line, off_line } = self.chain(self.release_tags(pattern, true)?)?;
        let all = self.release_tags(pattern, false)?;
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
                let read = self.tag_tree(tag, path, reading.marker, &mut reader)?;
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
        // Tags without the tree shipped nothing there (lint's comparison).
        if self.allow_missing_tree {
            missing.clear();
        }
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
        Ok(LineHistory {
            history: ReleaseHistory {
                line: line_trees,
                other_tags: other_trees,
                disk,
                legacy,
                legacy_maps: legacy_maps.into_iter().flatten().collect(),
            },
            off_line,
        })
    }

    /// The scripts of `tag`, their headers read with `marker`, and whether
    /// its tree has the tier directories at all (a `.gitkeep` counts).
    pub(super) fn tag_tree(
        &self,
        tag: &str,
        path: &str,
        marker: &HeaderMarker,
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
        for text in ls_tree_records(&listing) {
            present = true;
            let bad = |reason: &str| bad_entry(tag, &text, reason);
            let TreeRecord {
                mode,
                kind,
                oid,
                file,
            } = TreeRecord::parse(&text, tag)?;
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
            let header = parse_header_with(Path::new(file), &bytes, marker).map_err(|errors| {
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

/// What [`Repo::history_at`] read: the history generation takes, and the
/// merged tags it left off the line (named in the manifest's report).
#[derive(Debug, Clone)]
pub struct LineHistory {
    /// The release history.
    pub history: ReleaseHistory,
    /// Tags merged into HEAD but off its release line (`Repo::chain`).
    pub off_line: Vec<OffLine>,
}

/// Where the migrations tree lives in the release tags.
#[derive(Debug, Clone, Copy)]
pub struct TreePaths<'a> {
    /// Its paths inside the repository, the working tree's first; each tag
    /// must have exactly one of them.
    pub paths: &'a [String],
    /// Tags sorting before this one may lack the tree (they predate it).
    pub tree_since: Option<&'a str>,
    /// The header marker the tags' scripts are read with (the tree's
    /// `migrate.toml` names it; a tag's own file is not read, so a marker
    /// changed since is read as today's).
    pub marker: &'a HeaderMarker,
}

/// One tag's read at one path.
pub(super) struct TagRead {
    tree: TagTree,
    legacy_map: Option<LegacyMapAt>,
    /// The tag has anything at the path's tier directories or legacy-map
    /// (git keeps no empty directory, so an existing tier has a file).
    present: bool,
}
