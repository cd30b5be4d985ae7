//! The shells migrations run under: dash (Debian's `/bin/sh`), busybox ash
//! (alpine's `/bin/sh`, the production image) and bash.

use std::path::PathBuf;

/// One shell, as a script's shebang names it.
#[derive(Debug, Clone)]
pub struct Shell {
    /// Short name for messages.
    pub name: &'static str,
    /// The shebang line without `#!`.
    pub shebang: String,
    /// Whether bash-only syntax (process substitution, mapfile) applies.
    pub is_bash: bool,
}

/// The first of `paths` that is a file, as a shell named `name`; the base
/// system always has one.
fn base_shell(name: &'static str, paths: [&str; 2], is_bash: bool) -> Shell {
    let path = paths
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is part of the base system"));
    Shell {
        name,
        shebang: path.display().to_string(),
        is_bash,
    }
}

pub fn dash() -> Shell {
    base_shell("dash", ["/usr/bin/dash", "/bin/dash"], false)
}

pub fn bash() -> Shell {
    base_shell("bash", ["/bin/bash", "/usr/bin/bash"], true)
}

/// busybox ash, from the Debian package busybox-static (`.ci/install-test-tools`).
/// Missing: a failure under CI (`CI=true`), a printed skip elsewhere.
pub fn busybox_ash() -> Option<Shell> {
    let path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("busybox"))
            .find(|p| p.is_file())
    });
    match path {
        Some(p) => Some(Shell {
            name: "busybox-ash",
            shebang: format!("{} ash", p.display()),
            is_bash: false,
        }),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("busybox is missing under CI: .ci/install-test-tools installs busybox-static")
        }
        None => {
            eprintln!(
                "SKIPPED: busybox is not installed (apt-get install busybox-static); the busybox ash cases did not run"
            );
            None
        }
    }
}

/// Every shell available (busybox ash may be skipped outside CI).
pub fn all() -> Vec<Shell> {
    let mut shells = vec![dash()];
    shells.extend(busybox_ash());
    shells.push(bash());
    shells
}
