//! Loading migrations trees from disk: fixtures named by failure mode, plus
//! hostile cases built at run time (symlinks, huge files, odd names).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use migration_core::digest::{LibDigest, Sha256Digest};
use migration_core::header::{HeaderError, OnError, Tier};
use migration_core::testing::fixtures::{TreeBuilder, assert_lines, s, script_text};
use migration_core::{LoadOptions, MigrationsTree, Slug, TreeError, TreeProblem};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/trees")
        .join(name)
}

fn problems(name: &str) -> Vec<TreeProblem> {
    match MigrationsTree::load(&fixture(name)) {
        Err(TreeError::Invalid { problems, .. }) => problems,
        other => panic!("{name}: expected Invalid, got {other:?}"),
    }
}

fn only_problem(name: &str) -> String {
    let problems = problems(name);
    assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
    problems[0].to_string()
}

/// Asserts that fixture `name` has one problem, starting with `prefix`.
fn assert_only_problem_starts_with(name: &str, prefix: &str) {
    let text = only_problem(name);
    assert!(text.starts_with(prefix), "{text}");
}

/// Asserts that fixture `name` has one problem, mentioning `needle`.
fn assert_only_problem_contains(name: &str, needle: &str) {
    let text = only_problem(name);
    assert!(text.contains(needle), "{text}");
}

#[test]
fn a_valid_tree_loads_with_scripts_lists_manifest_and_checksums() {
    let root = fixture("valid");
    let tree = MigrationsTree::load(&root).unwrap();
    let slugs: Vec<&str> = tree.scripts().keys().map(Slug::as_str).collect();
    assert_eq!(
        slugs,
        [
            "45",
            "bad-idea",
            "etcd-crds-precreate",
            "redis-failover-group-label",
            "reindex-search"
        ]
    );
    let redis = tree.script(&s("redis-failover-group-label")).unwrap();
    assert_eq!(redis.tier, Tier::PreApply);
    assert_eq!(redis.header.on_error, OnError::Warn);
    assert_eq!(redis.header.requires[0].target, s("etcd-crds-precreate"));
    let bytes = std::fs::read(root.join("pre-apply/redis-failover-group-label")).unwrap();
    assert_eq!(
        redis.sha256,
        Sha256Digest::of(&bytes),
        "a script's checksum is the SHA-256 of its bytes"
    );
    assert_eq!(
        tree.script(&s("reindex-search")).unwrap().tier,
        Tier::Background
    );
    assert!(tree.is_revoked(&s("bad-idea")));
    assert_eq!(tree.legacy_map()[0].number, 45);
    assert_eq!(tree.manifest().unwrap().len(), 5);

    let mut lib = LibDigest::new();
    lib.add_file(
        "helpers.sh".into(),
        std::fs::read(root.join("lib/helpers.sh")).unwrap(),
    );
    lib.add_file(
        "sub/vars.sh".into(),
        std::fs::read(root.join("lib/sub/vars.sh")).unwrap(),
    );
    assert_eq!(
        tree.lib_sha256(),
        lib.finish(),
        "lib_sha256 covers every helper by relative path"
    );
}

#[test]
fn missing_tier_key_names_the_file() {
    assert_eq!(
        only_problem("missing-tier-key"),
        "pre-apply/x: missing header key 'tier' (add '# cozystack-migration: tier=...' after the shebang)"
    );
}

#[test]
fn tier_mismatch_names_file_line_and_both_tiers() {
    assert_eq!(
        only_problem("tier-mismatch"),
        "pre-apply/x:2: header says tier=background but the script is in pre-apply/"
    );
}

#[test]
fn a_slug_in_both_tiers_is_refused() {
    assert_only_problem_contains(
        "slug-in-both-tiers",
        "'x' exists in both pre-apply/x and background/x",
    );
}

#[test]
fn a_file_name_that_is_not_a_slug_is_refused_not_skipped() {
    assert_only_problem_starts_with(
        "bad-script-name",
        "pre-apply/Fix_Thing.sh: the file name is not a valid slug",
    );
}

#[test]
fn requires_naming_nothing_is_refused_with_its_line() {
    assert_eq!(
        only_problem("unknown-requires"),
        "pre-apply/x:4: requires=ghost, but no script or manifest line has that slug"
    );
}

/// The one problem of a tree built by `builder`, as text.
fn only_built_problem(builder: TreeBuilder) -> String {
    match builder.try_build() {
        Err(TreeError::Invalid { problems, .. }) => {
            assert_eq!(problems.len(), 1, "{problems:#?}");
            problems[0].to_string()
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

/// The one problem of a tree of the pre-apply scripts `pre` and `script`,
/// which requires `required`, released in the one batch `batch`.
fn problem_requiring(pre: &[&str], script: &str, required: &str, batch: &str) -> String {
    only_built_problem(
        TreeBuilder::new()
            .pre_scripts(pre)
            .script(Tier::PreApply, script, &[required])
            .manifest(&[("00001-v1", batch)]),
    )
}

#[test]
fn requires_naming_a_near_miss_of_a_script_names_the_closest_slug() {
    let (pre, batch) = (
        ["label-tenants", "label-nodes"],
        "label-nodes\nlabel-tenants\nx\n",
    );
    let text = problem_requiring(&pre, "x", "lable-tenants", batch);
    assert!(
        text.contains("requires=lable-tenants, but no script or manifest line has that slug")
            && text.ends_with("; did you mean 'label-tenants'?"),
        "{text}"
    );
}

#[test]
fn requires_naming_a_near_miss_of_a_manifest_line_names_it_too() {
    // `old-step` is a retired line: no script on disk, but the manifest has it.
    let text = problem_requiring(&["x"], "y", "old-setp", "old-step retired\nx\ny\n");
    assert!(text.ends_with("; did you mean 'old-step'?"), "{text}");
}

#[test]
fn requires_naming_nothing_close_suggests_nothing() {
    let pre = ["label-tenants"];
    let text = problem_requiring(&pre, "x", "rotate-certificates", "label-tenants\nx\n");
    assert!(!text.contains("did you mean"), "{text}");
}

#[test]
fn a_script_requiring_itself_is_refused() {
    assert_eq!(
        only_problem("self-requires"),
        "pre-apply/x:4: the script requires itself"
    );
}

#[test]
fn bad_revoked_line_names_file_and_line() {
    assert_only_problem_starts_with("bad-revoked", "revoked:2: expected one slug per line");
}

#[test]
fn bad_legacy_map_line_names_file_and_line() {
    assert_eq!(
        only_problem("bad-legacy-map"),
        "legacy-map:2: integer 45 is already mapped on line 1"
    );
}

#[test]
fn a_manifest_listing_a_slug_twice_is_refused() {
    assert_eq!(
        only_problem("manifest-lists-slug-twice"),
        "order.d/00002-v2:1: slug 'x' is already listed at 00001-v1:1"
    );
}

#[test]
fn a_subdirectory_in_a_tier_is_refused() {
    assert_only_problem_starts_with(
        "subdirectory-in-tier",
        "pre-apply/nested: a directory where a script belongs",
    );
}

#[test]
fn a_header_directive_below_the_body_is_refused() {
    assert_only_problem_starts_with(
        "header-directive-below-body",
        "pre-apply/x:5: header directive outside the leading comment block",
    );
}

#[test]
fn a_directory_without_tier_directories_is_not_a_tree() {
    let err = MigrationsTree::load(&fixture("not-a-tree")).unwrap_err();
    assert!(matches!(err, TreeError::NotATree { .. }), "{err:?}");
}

#[test]
fn a_missing_directory_is_an_io_error_naming_it() {
    let err = MigrationsTree::load(&fixture("does-not-exist")).unwrap_err();
    assert!(matches!(err, TreeError::Io { .. }));
    assert!(err.to_string().contains("does-not-exist"), "{err}");
}

#[test]
fn every_problem_in_a_tree_is_reported_at_once() {
    let problems = problems("many-problems-at-once");
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 4, "{text:#?}");
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, TreeProblem::Header(HeaderError::MissingShebang { .. })))
    );
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, TreeProblem::TierMismatch { .. }))
    );
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, TreeProblem::BadScriptName { .. }))
    );
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, TreeProblem::BadListLine { line: 2, .. }))
    );
}

#[cfg(unix)]
mod hostile {
    use super::*;
    use std::os::unix::fs::symlink;

    fn base() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let tree = TreeBuilder::new().pre("ok");
        tree.write_to(dir.path());
        dir
    }

    fn invalid(dir: &Path) -> Vec<String> {
        match MigrationsTree::load(dir) {
            Err(TreeError::Invalid { problems, .. }) => {
                problems.iter().map(ToString::to_string).collect()
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_symlinked_script_pointing_outside_the_tree_is_refused() {
        let dir = base();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            outside.path(),
            script_text(Tier::PreApply, OnError::Abort, &[], "rm -rf /"),
        )
        .unwrap();
        symlink(outside.path(), dir.path().join("pre-apply/escape")).unwrap();
        assert_lines(
            &invalid(dir.path()),
            &["pre-apply/escape: symlink points outside the migrations tree…"],
        );
    }

    #[test]
    fn a_symlink_that_stays_inside_the_tree_is_followed() {
        let dir = base();
        std::fs::create_dir_all(dir.path().join("shared")).unwrap();
        std::fs::write(
            dir.path().join("shared/real"),
            script_text(Tier::PreApply, OnError::Abort, &[], "echo shared"),
        )
        .unwrap();
        symlink("../shared/real", dir.path().join("pre-apply/linked")).unwrap();
        let tree = MigrationsTree::load(dir.path()).unwrap();
        assert!(tree.script(&s("linked")).is_some());
    }

    #[test]
    fn a_lib_symlink_leaving_the_tree_is_refused() {
        let dir = base();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        symlink("/etc/hostname", dir.path().join("lib/host")).unwrap();
        assert_lines(&invalid(dir.path()), &["lib/host: symlink points outside…"]);
    }

    #[test]
    fn a_dangling_symlink_is_refused() {
        let dir = base();
        symlink("nowhere", dir.path().join("pre-apply/dangling")).unwrap();
        assert_eq!(
            invalid(dir.path()),
            ["pre-apply/dangling: dangling symlink"]
        );
    }

    #[test]
    fn a_100_mb_script_is_refused_without_being_read() {
        let dir = base();
        let file = std::fs::File::create(dir.path().join("pre-apply/huge")).unwrap();
        // Sparse: costs no disk, but stat reports 100 MB.
        file.set_len(100 * 1024 * 1024).unwrap();
        let text = invalid(dir.path());
        assert_eq!(
            text,
            ["pre-apply/huge: 104857600 bytes is above the 1048576-byte limit"]
        );
    }

    #[test]
    fn the_size_cap_is_configurable() {
        let dir = base();
        let options = LoadOptions {
            max_file_bytes: 10,
            ..LoadOptions::default()
        };
        let err = MigrationsTree::load_with(dir.path(), options).unwrap_err();
        assert!(err.to_string().contains("above the 10-byte limit"), "{err}");
    }

    #[test]
    fn a_non_utf8_file_name_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = base();
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9");
        std::fs::write(dir.path().join("pre-apply").join(name), b"#!/bin/sh\n").unwrap();
        let text = invalid(dir.path());
        assert_eq!(text.len(), 1);
        assert!(
            text[0].ends_with("the file name is not valid UTF-8"),
            "{text:?}"
        );
    }

    #[test]
    fn gitkeep_placeholders_are_ignored() {
        let dir = base();
        std::fs::write(dir.path().join("background/.gitkeep"), b"").unwrap();
        let tree = MigrationsTree::load(dir.path()).unwrap();
        assert_eq!(tree.scripts().len(), 1);
    }

    /// Large enough that the loader reads the tier on several threads
    /// (where there are several CPUs).
    const MANY: usize = 1200;

    fn many_scripts() -> TreeBuilder {
        (0..MANY).fold(TreeBuilder::new(), |tree, i| tree.pre(&format!("m-{i:05}")))
    }

    #[test]
    fn a_large_tree_loads_from_disk_as_it_does_from_memory() {
        let built = many_scripts().bg("late");
        let dir = tempfile::tempdir().unwrap();
        built.write_to(dir.path());
        let from_disk = MigrationsTree::load(dir.path()).unwrap();
        let from_memory = built.build();
        assert_eq!(from_disk.scripts().len(), MANY + 1);
        assert_eq!(from_disk.scripts(), from_memory.scripts());
    }

    #[test]
    fn a_large_tree_reports_every_problem_in_name_order() {
        // Problems spread over the whole directory, so over every reader.
        let mut built = many_scripts();
        let broken = [7, MANY / 3, MANY / 2, MANY - 2];
        for i in broken {
            built = built.raw_script(Tier::PreApply, &format!("m-{i:05}"), b"no shebang\n");
        }
        let dir = tempfile::tempdir().unwrap();
        built.write_to(dir.path());
        std::fs::write(dir.path().join("pre-apply/Not-A-Slug"), b"#!/bin/sh\n").unwrap();
        let expected: Vec<String> = std::iter::once("pre-apply/Not-A-Slug: ".to_owned())
            .chain(
                broken
                    .iter()
                    .map(|i| format!("pre-apply/m-{i:05}:1: missing shebang")),
            )
            .collect();
        let text = invalid(dir.path());
        assert_eq!(text.len(), expected.len(), "{text:#?}");
        for (found, prefix) in text.iter().zip(&expected) {
            assert!(
                found.starts_with(prefix),
                "{found} should start with {prefix}"
            );
        }
    }

    #[test]
    fn a_large_tree_with_a_script_in_both_tiers_names_both_files() {
        let built = many_scripts().bg(&format!("m-{:05}", MANY - 1));
        let dir = tempfile::tempdir().unwrap();
        built.write_to(dir.path());
        let last = format!("m-{:05}", MANY - 1);
        assert_eq!(
            invalid(dir.path()),
            [format!(
                "slug '{last}' exists in both pre-apply/{last} and background/{last}; slugs are unique across tiers"
            )]
        );
    }

    #[test]
    fn disk_and_memory_loading_agree() {
        let built = TreeBuilder::new()
            .pre("a")
            .script(Tier::Background, "b", &["a"])
            .lib("h.sh", "x")
            .revoked("b\n");
        let dir = tempfile::tempdir().unwrap();
        built.write_to(dir.path());
        let from_disk = MigrationsTree::load(dir.path()).unwrap();
        let from_memory = built.build();
        assert_eq!(from_disk.scripts(), from_memory.scripts());
        assert_eq!(from_disk.lib_sha256(), from_memory.lib_sha256());
        assert_eq!(from_disk.revoked(), from_memory.revoked());
    }
}

#[test]
fn the_settings_file_names_the_header_marker_every_load_reads_scripts_with() {
    let acme = |tier: &str| {
        script_text(tier, "abort", &[], "echo a").replace("cozystack-migration:", "acme-migration:")
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pre-apply")).unwrap();
    std::fs::write(dir.path().join("pre-apply/a"), acme("pre-apply")).unwrap();
    // Without the file the default marker is looked for, and not found.
    assert!(MigrationsTree::load(dir.path()).is_err());
    std::fs::write(
        dir.path().join("migrate.toml"),
        "header-marker = \"acme-migration\"\n",
    )
    .unwrap();
    let tree = MigrationsTree::load(dir.path()).unwrap();
    assert_eq!(tree.scripts().len(), 1);
    // A caller may name the marker itself: it beats the file.
    let options = LoadOptions {
        header_marker: Some(migration_core::header::HeaderMarker::default()),
        ..LoadOptions::default()
    };
    assert!(MigrationsTree::load_with(dir.path(), options).is_err());
    // The same bytes given as files read the same.
    let files = migration_core::TreeFiles {
        scripts: vec![(Tier::PreApply, "a".into(), acme("pre-apply").into_bytes())],
        settings: Some(b"header-marker = \"acme-migration\"\n".to_vec()),
        ..Default::default()
    };
    assert!(MigrationsTree::from_files(dir.path().to_path_buf(), files).is_ok());
}

#[test]
fn a_broken_settings_file_is_the_only_problem_reported_naming_its_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pre-apply")).unwrap();
    std::fs::write(dir.path().join("pre-apply/Bad_Name"), "no header\n").unwrap();
    std::fs::write(dir.path().join("migrate.toml"), "\nheader-markr = \"x\"\n").unwrap();
    let Err(TreeError::Invalid { problems, .. }) = MigrationsTree::load(dir.path()) else {
        panic!("loaded");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].rule(), "settings");
    let text = problems[0].to_string();
    assert!(
        text.starts_with("migrate.toml:2: unknown key 'header-markr'")
            && text.contains("did you mean 'header-marker'?"),
        "{text}"
    );
}
