//! Raw tree files into a validated tree: the checks every source of files
//! (the disk loader, a git tag's objects, a test) goes through alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::lists::{parse_legacy_map, parse_revoked};
use super::{LEGACY_MAP_FILE, MigrationsTree, REVOKED_FILE, Script, TreeError, TreeProblem};
use crate::digest::{LibDigest, Sha256Digest};
use crate::filling::FillingMap;
use crate::header::{HeaderMarker, Tier, parse_header_with};
use crate::manifest::Manifest;
use crate::settings::{SETTINGS_FILE, Settings};
use crate::slug::Slug;

/// The raw files of a tree, before validation: what the disk loader reads,
/// and what a caller can assemble from elsewhere (a git tag's objects, a
/// test) to get exactly the same validation.
#[derive(Debug, Clone, Default)]
pub struct TreeFiles {
    /// Files in tier directories: tier, file name, bytes.
    pub scripts: Vec<(Tier, String, Vec<u8>)>,
    /// Files under `lib/`, by `/`-separated path relative to `lib/`.
    pub lib: Vec<(String, Vec<u8>)>,
    /// The `revoked` file, if present.
    pub revoked: Option<Vec<u8>>,
    /// The `legacy-map` file, if present.
    pub legacy_map: Option<Vec<u8>>,
    /// The files of `order.d/`, if the directory is present.
    pub order: Option<Vec<(String, Vec<u8>)>>,
    /// The settings file `migrate.toml`, if present: its header marker is
    /// the one the scripts are read with.
    pub settings: Option<Vec<u8>>,
}

impl MigrationsTree {
    /// Validates a tree given as raw files; `root` is where it lives (used
    /// for running scripts and in messages). Same checks as [`Self::load`],
    /// minus those that only make sense on a file system (symlinks).
    pub fn from_files(root: PathBuf, files: TreeFiles) -> Result<Self, TreeError> {
        let display = root.clone();
        let marker = match &files.settings {
            None => HeaderMarker::default(),
            Some(bytes) => match Settings::parse(Path::new(SETTINGS_FILE), bytes) {
                Ok(settings) => settings.header_marker(),
                Err(errors) => return Err(settings_refused(&display, errors)),
            },
        };
        Self::assemble(
            root,
            &display,
            Vec::new(),
            ScriptSet::new(marker),
            files,
            true,
        )
    }

    /// Validates `files` on top of the `problems` found while reading them
    /// and the `scripts` already validated as they were read (the disk
    /// loader's, whose `files.scripts` is then empty); `check_requires` is
    /// off when no manifest was read (see
    /// [`super::LoadOptions::read_manifest`]). Problems are reported in that
    /// order: reading, scripts, then the rest.
    pub(super) fn assemble(
        root: PathBuf,
        display_root: &Path,
        mut problems: Vec<TreeProblem>,
        mut scripts: ScriptSet,
        files: TreeFiles,
        check_requires: bool,
    ) -> Result<Self, TreeError> {
        for (tier, name, bytes) in &files.scripts {
            scripts.add(*tier, name, bytes);
        }
        let (scripts, mut script_problems) = scripts.finish();
        problems.append(&mut script_problems);
        let mut lib = LibDigest::new();
        for (path, bytes) in files.lib {
            lib.add_file(path, bytes);
        }
        let lib_sha256 = lib.finish();
        let revoked = parse_list(files.revoked, REVOKED_FILE, parse_revoked, &mut problems);
        let legacy_map = parse_list(
            files.legacy_map,
            LEGACY_MAP_FILE,
            parse_legacy_map,
            &mut problems,
        );
        let manifest = match files.order.map(Manifest::parse_files) {
            Some(Ok(m)) => Some(m),
            Some(Err(errors)) => {
                problems.extend(
                    errors
                        .into_iter()
                        .map(|source| TreeProblem::Manifest { source }),
                );
                None
            }
            None => None,
        };
        requirement_problems(&scripts, manifest.as_ref(), check_requires, &mut problems);
        other_content_problems(&legacy_map, &scripts, manifest.as_ref(), &mut problems);
        if !problems.is_empty() {
            return Err(TreeError::Invalid {
                root: display_root.to_path_buf(),
                problems,
            });
        }
        let revoked_set = revoked.iter().map(|r| r.slug.clone()).collect();
        Ok(MigrationsTree {
            root,
            scripts,
            lib_sha256,
            revoked,
            revoked_set,
            legacy_map,
            manifest,
        })
    }
}

/// A tree whose settings file is refused: only those problems, since
/// reading the scripts with a marker that may not be the tree's would bury
/// them under header errors that are not.
pub(super) fn settings_refused(
    root: &Path,
    errors: Vec<crate::settings::SettingsError>,
) -> TreeError {
    TreeError::Invalid {
        root: root.to_path_buf(),
        problems: errors.into_iter().map(TreeProblem::Settings).collect(),
    }
}

/// Scripts validated one by one as they are read, keyed by slug, and the
/// problems found in them, both in the order the files came. A slug in
/// both tiers is a problem; the first one found is kept.
#[derive(Debug, Default)]
pub(super) struct ScriptSet {
    /// Filled in name order, its nodes kept full as it grows.
    scripts: FillingMap<Slug, Script>,
    problems: Vec<TreeProblem>,
    /// The marker the headers of [`Self::add`] are read with.
    marker: HeaderMarker,
}

impl ScriptSet {
    /// An empty set whose [`Self::add`] reads headers with `marker`.
    pub(super) fn new(marker: HeaderMarker) -> Self {
        ScriptSet {
            marker,
            ..ScriptSet::default()
        }
    }

    /// Validates one script file's bytes and adds the script, or its
    /// problems. The bytes are not kept.
    pub(super) fn add(&mut self, tier: Tier, name: &str, bytes: &[u8]) {
        let checked = validate_script(tier, name, bytes, &self.marker);
        self.add_checked(checked);
    }

    /// Adds what [`validate_script`] found for one file.
    pub(super) fn add_checked(&mut self, checked: Result<Script, Vec<TreeProblem>>) {
        let script = match checked {
            Ok(script) => script,
            Err(mut problems) => {
                self.problems.append(&mut problems);
                return;
            }
        };
        if let Err(script) = self.scripts.insert_new(script.slug.clone(), script) {
            let first = self
                .scripts
                .get_key_value(&script.slug)
                .map(|(_, first)| first.relative_path())
                .unwrap_or_default();
            self.problems.push(TreeProblem::DuplicateSlug {
                first,
                second: script.relative_path(),
                slug: script.slug,
            });
        }
    }

    /// The scripts, and the problems found in them.
    pub(super) fn finish(self) -> (BTreeMap<Slug, Script>, Vec<TreeProblem>) {
        (self.scripts.finish(), self.problems)
    }
}

/// A script that requires itself, a pre-apply script requiring a
/// background one, and (with `check_requires`) a `requires` target that
/// neither the tree nor the manifest knows.
fn requirement_problems(
    scripts: &BTreeMap<Slug, Script>,
    manifest: Option<&Manifest>,
    check_requires: bool,
    problems: &mut Vec<TreeProblem>,
) {
    for script in scripts.values() {
        for req in &script.header.requires {
            if req.target == script.slug {
                problems.push(TreeProblem::SelfRequirement {
                    file: script.relative_path(),
                    line: req.line,
                });
            } else if script.tier == Tier::PreApply
                && scripts
                    .get(&req.target)
                    .is_some_and(|t| t.tier == Tier::Background)
            {
                problems.push(TreeProblem::RequiresBackground {
                    file: script.relative_path(),
                    line: req.line,
                    target: req.target.clone(),
                });
            } else if check_requires
                && !scripts.contains_key(&req.target)
                && manifest.is_none_or(|m| m.position(&req.target).is_none())
            {
                problems.push(TreeProblem::UnknownRequirement {
                    file: script.relative_path(),
                    line: req.line,
                    target: req.target.clone(),
                    suggestion: closest_slug(&req.target, scripts, manifest),
                });
            }
        }
    }
}

/// The slug of a script or a manifest line closest to `target` (the shared
/// near-miss rule of the header's "did you mean"), if one is close.
fn closest_slug(
    target: &Slug,
    scripts: &BTreeMap<Slug, Script>,
    manifest: Option<&Manifest>,
) -> Option<Slug> {
    let listed = manifest
        .into_iter()
        .flat_map(|m| m.iter().map(|(_, e)| &e.slug));
    let candidates: Vec<&Slug> = scripts.keys().chain(listed).collect();
    let found =
        crate::header::near_miss::closest(target.as_str(), candidates.iter().map(|c| c.as_str()))?;
    candidates
        .into_iter()
        .find(|c| c.as_str() == found)
        .cloned()
}

/// A diverged slot's `others=` slug that is also a script or a manifest
/// line here: it names another line's content (CONTRACT.md §6.2), so one
/// slug would stand for two things.
fn other_content_problems(
    legacy_map: &[super::LegacyPair],
    scripts: &BTreeMap<Slug, Script>,
    manifest: Option<&Manifest>,
    problems: &mut Vec<TreeProblem>,
) {
    for pair in legacy_map {
        for other in &pair.others {
            let here = if scripts.contains_key(other) {
                "a script"
            } else if manifest.is_some_and(|m| m.position(other).is_some()) {
                "a manifest line"
            } else {
                continue;
            };
            problems.push(TreeProblem::BadListLine {
                file: Path::new(LEGACY_MAP_FILE).into(),
                line: pair.line,
                reason: format!(
                    "'{other}' is another line's content of slot {} but {here} of this tree",
                    pair.number
                ),
            });
        }
    }
}

/// A list file's parser: [`parse_revoked`] or [`parse_legacy_map`].
type ListParser<T> = fn(&Path, &[u8]) -> Result<Vec<T>, Vec<TreeProblem>>;

/// The list parsed from an optional list file; when it has problems they
/// join `problems` and the list is empty.
fn parse_list<T>(
    bytes: Option<Vec<u8>>,
    name: &str,
    parse: ListParser<T>,
    problems: &mut Vec<TreeProblem>,
) -> Vec<T> {
    match bytes.map(|b| parse(Path::new(name), &b)) {
        Some(Ok(list)) => list,
        Some(Err(found)) => {
            problems.extend(found);
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// Checks one script file: its name is a slug, its header parses, and its
/// tier is its directory; the script, or every problem found. Its header
/// directives start with `marker`.
pub(super) fn validate_script(
    tier: Tier,
    name: &str,
    bytes: &[u8],
    marker: &HeaderMarker,
) -> Result<Script, Vec<TreeProblem>> {
    let relative = super::script_relative_path(tier, name);
    let slug = match Slug::parse(name) {
        Ok(slug) => slug,
        Err(source) => {
            return Err(vec![TreeProblem::BadScriptName {
                file: relative,
                source,
            }]);
        }
    };
    let header = match parse_header_with(&relative, bytes, marker) {
        Ok(h) => h,
        Err(errors) => return Err(errors.into_iter().map(TreeProblem::Header).collect()),
    };
    if header.tier != tier {
        return Err(vec![TreeProblem::TierMismatch {
            file: relative,
            line: tier_line(bytes, marker),
            declared: header.tier,
            directory: tier,
        }]);
    }
    Ok(Script {
        slug,
        tier,
        header,
        sha256: Sha256Digest::of(bytes),
        len: bytes.len() as u64,
    })
}

/// Line of the `tier=` directive, for the mismatch message.
fn tier_line(bytes: &[u8], marker: &HeaderMarker) -> usize {
    bytes
        .split(|&b| b == b'\n')
        .position(|l| {
            let l = String::from_utf8_lossy(l);
            l.contains(marker.directive()) && l.contains("tier")
        })
        .map_or(1, |i| i + 1)
}
