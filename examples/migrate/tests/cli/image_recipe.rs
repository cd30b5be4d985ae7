//! The image recipe (`examples/image/Dockerfile`), checked as far as a
//! machine without a container engine can: every binary it copies is a
//! binary the workspace builds, every file it copies from the build context
//! exists, its default tree loads and passes its tests, and its Rust is at
//! least the workspace's `rust-version`.

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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
fn the_files_the_image_copies_from_the_context_exist_and_the_default_tree_passes_its_tests() {
    let all = instructions(&dockerfile());
    let root = workspace();
    let tree = arg_default(&all, "TREE");
    for copy in all
        .iter()
        .filter(|i| i.starts_with("COPY ") && !i.contains("--from="))
    {
        let words: Vec<&str> = copy.split_whitespace().skip(1).collect();
        for source in &words[..words.len() - 1] {
            let source = source.replace("${TREE}", &tree);
            assert!(
                source == "." || root.join(&source).exists(),
                "COPY {source}: not in the repository"
            );
        }
    }
    let tree = root.join(tree);
    let (code, doc, err) = common::json(&["test", tree.to_str().unwrap()]);
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
