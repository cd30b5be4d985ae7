//! The image recipes, checked as far as a machine without a container engine can: the engine
//! image (`examples/image/Dockerfile`) copies only binaries the workspace builds and files that
//! exist, carries no tree, and builds with at least the workspace's `rust-version`; a
//! platform's image (`examples/image/platform.Dockerfile`) is three lines on top of a pinned
//! engine image that put the tree where the chart looks for it. The image itself is built and
//! run in CI (`examples/image/build-oci.sh`, `check-oci.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .unwrap()
        .to_path_buf()
}

fn dockerfile() -> String {
    std::fs::read_to_string(workspace().join("examples/image/Dockerfile")).unwrap()
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The default of `ARG NAME=VALUE`.
fn arg_default(instructions: &[String], name: &str) -> String {
    instructions
        .iter()
        .find_map(|i| i.strip_prefix(&format!("ARG {name}=")))
        .unwrap_or_else(|| panic!("the Dockerfile has no ARG {name}=..."))
        .trim()
        .to_owned()
}

/// Every `[[bin]]` of the workspace's packages, from `cargo metadata`.
fn workspace_binaries() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&common::assert_success(&out, "cargo metadata")).unwrap();
    doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_binary_the_image_copies_is_built_by_the_workspace() {
    let all = instructions(&dockerfile());
    let built = workspace_binaries();
    let copied: Vec<String> = all
        .iter()
        .filter(|i| i.starts_with("COPY --from=build "))
        .flat_map(|i| {
            let words: Vec<&str> = i.split_whitespace().skip(2).collect();
            words[..words.len() - 1]
                .iter()
                .map(|w| w.rsplit('/').next().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    for name in ["migrate", "migrate-shim", "migrate-operator"] {
        assert!(
            copied.iter().any(|c| c == name),
            "the image lacks {name}: {copied:?}"
        );
    }
    for name in &copied {
        assert!(
            built.contains(name),
            "{name} is no binary of the workspace: {built:?}"
        );
        assert!(
            all.iter()
                .any(|i| i.contains("cp ") && i.contains(&format!("target/release/{name}"))),
            "the build stage does not copy {name} out"
        );
    }
    // The runner refuses to run scripts without the shim next to migrate: one COPY puts both
    // in the same directory.
    assert!(
        all.iter().any(|i| i.starts_with("COPY --from=build ")
            && i.contains("/migrate ")
            && i.contains("/migrate-shim ")),
        "migrate and migrate-shim must land in the same directory"
    );
    // The tests of this package have both at hand: the binaries exist as cargo builds them.
    for exe in [
        env!("CARGO_BIN_EXE_migrate"),
        env!("CARGO_BIN_EXE_migrate-shim"),
    ] {
        assert!(Path::new(exe).is_file(), "{exe}");
    }
}

#[test]
fn the_files_the_engine_image_copies_from_the_context_exist_and_it_carries_no_tree() {
    let all = instructions(&dockerfile());
    let root = workspace();
    for copy in all
        .iter()
        .filter(|i| i.starts_with("COPY ") && !i.contains("--from="))
    {
        let words: Vec<&str> = copy.split_whitespace().skip(1).collect();
        for source in &words[..words.len() - 1] {
            assert!(
                *source == "." || root.join(source).exists(),
                "COPY {source}: not in the repository"
            );
        }
    }
    // A platform's tree is its own layer (platform.Dockerfile): the engine has none to replace.
    assert!(
        !all.iter()
            .any(|i| i.contains("TREE") || i.contains("/migrations")),
        "the engine image names a tree: {all:#?}"
    );
}

/// The platform's recipe: its instructions, comments and `ARG`s dropped.
fn platform_recipe() -> Vec<String> {
    let text =
        std::fs::read_to_string(workspace().join("examples/image/platform.Dockerfile")).unwrap();
    instructions(&text)
        .into_iter()
        .filter(|i| !i.starts_with("ARG "))
        .collect()
}

#[test]
fn a_platform_extends_the_engine_image_with_three_lines_that_put_its_tree_where_the_chart_looks() {
    let lines = platform_recipe();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines[0].starts_with("FROM "), "{}", lines[0]);
    let copy: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(copy.len(), 3, "COPY SOURCE DEST: {}", lines[1]);
    assert_eq!(copy[0], "COPY");
    let tree = lines[2]
        .strip_prefix("ENV MIGRATION_TREE=")
        .unwrap_or_else(|| panic!("ENV MIGRATION_TREE=...: {}", lines[2]));
    assert_eq!(copy[2], tree, "the tree goes where MIGRATION_TREE says");
    // The chart runs `migrate run <tree>` with its `tree` value: the default must be this path.
    let values = std::fs::read_to_string(workspace().join("examples/chart/values.yaml")).unwrap();
    let chart_tree = values
        .lines()
        .find_map(|l| l.strip_prefix("tree: "))
        .unwrap()
        .trim();
    assert_eq!(
        chart_tree, tree,
        "values.yaml's tree differs from the image's"
    );
    // The engine image the recipe starts from is pinned by digest, as the chart's image is.
    let engine = lines[0].trim_start_matches("FROM ").trim();
    let default = engine
        .strip_prefix("${")
        .and_then(|v| v.strip_suffix('}'))
        .map(|name| {
            let text =
                std::fs::read_to_string(workspace().join("examples/image/platform.Dockerfile"))
                    .unwrap();
            arg_default(&instructions(&text), name)
        })
        .unwrap_or_else(|| engine.to_owned());
    assert!(
        default.contains("@sha256:"),
        "FROM {default}: not pinned by digest"
    );
    // The default tree (the demo, which the recipe's example copies) passes its tests.
    let demo = workspace().join("examples/demo");
    let (code, doc, err) = common::json(&["test", demo.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
}

#[test]
fn the_image_builds_with_at_least_the_workspaces_rust_version() {
    let all = instructions(&dockerfile());
    let image = arg_default(&all, "RUST_VERSION");
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let required = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"')
        .to_owned();
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap()).collect() };
    assert!(
        version(&image) >= version(&required),
        "the image's Rust {image} is older than the workspace's rust-version {required}"
    );
    assert!(
        all.iter()
            .any(|i| i.contains("cargo build --release --locked")),
        "the image builds from Cargo.lock"
    );
}
