//! Names the commit the `migrate` binary is built from, for `--version`.
//! Outside a git checkout (a source tarball) or without git it is
//! `unknown`: this script never fails the build.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    // No "-dirty" mark: cargo does not rerun this script when a work-tree
    // file changes, so the mark would go stale.
    println!("cargo:rustc-env=MIGRATE_BUILD_COMMIT={commit}");
    // Rebuild when HEAD moves; the paths may not exist outside a checkout,
    // which cargo accepts (it then reruns the script every build).
    if let Some(git_dir) = Command::new("git")
        .args(["rev-parse", "--absolute-git-dir"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
    {
        let git_dir = git_dir.trim();
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/refs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
