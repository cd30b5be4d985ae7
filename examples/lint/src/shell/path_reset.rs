//! The `path-reset` rule: a script that resets `PATH` walks around the
//! runner's tripwire.
//!
//! The runner puts its cluster-command shims first on every script's
//! `PATH` (the runner's tripwire). A script that then sets `PATH` to a list that
//! does not begin with the inherited `$PATH` (`PATH=/usr/bin:/bin`,
//! `export PATH=/opt/bin:$PATH`), removes it (`unset PATH`), or runs a
//! command with a default or emptied environment (`env -i`, `env
//! PATH=...`, `command -p`, `sudo` with its `secure_path`) finds the real
//! `kubectl` directly, and its failures are never seen: the same hole as
//! calling a cluster command by absolute path (`cluster-command-path`).
//! Appending keeps the shims first and is fine: `PATH="$PATH:/opt/bin"`.
//!
//! The checks look at words as written (raw text, quotes included), so
//! they run before expansion and never guess at a variable's value.

/// The rule's id.
pub const RULE: &str = "path-reset";

const FIX: &str = "the runner's cluster-command shims must stay first on PATH; append instead: PATH=\"$PATH:/dir\"";

/// Whether an assigned `PATH` value keeps the inherited `PATH` first:
/// `$PATH`, `${PATH}` or `${PATH:...}` at its start (quotes aside).
pub fn keeps_path_first(raw_value: &str) -> bool {
    let v = raw_value.trim_start_matches(['"', '\'']);
    if raw_value.starts_with('\'') {
        // Single quotes: a literal `$PATH`, not the inherited value.
        return false;
    }
    if let Some(rest) = v.strip_prefix("$PATH") {
        return !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
    }
    v.starts_with("${PATH}") || v.starts_with("${PATH:")
}

/// The finding for an assignment `PATH=raw_value` (prefix, standalone, or
/// in `export`/`local`/`readonly`/`declare`), if it resets `PATH`.
pub fn assignment(raw_value: &str) -> Option<String> {
    (!keeps_path_first(raw_value)).then(|| {
        format!("PATH is set to {raw_value}, which drops or overtakes the runner's shims; {FIX}")
    })
}

fn unquote(word: &str) -> &str {
    let w = word.trim_matches('"');
    w.trim_matches('\'')
}

/// The findings for one simple command, from its words as written (the
/// command name first): `unset PATH`, and `env -i`, `env -u PATH`, `env
/// PATH=...`, `command -p` and `sudo` in command position (also behind
/// the other prefix commands, such as `exec env -i ...`).
pub fn command(words: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = words.get(i).map(|w| unquote(w)) {
        i += 1;
        match word {
            "unset" => {
                if words[i..].iter().any(|w| unquote(w) == "PATH") {
                    found.push(format!("'unset PATH' removes the runner's shims; {FIX}"));
                }
                break;
            }
            "env" => {
                while let Some(arg) = words.get(i).map(|w| unquote(w)) {
                    let clears = arg == "-"
                        || arg == "--ignore-environment"
                        || (arg.starts_with('-')
                            && !arg.starts_with("--")
                            && arg[1..].chars().take_while(|c| *c != 'u').any(|c| c == 'i'));
                    if clears {
                        found.push(format!(
                            "'env {arg}' runs a command with an empty environment: no shims on PATH, no KUBECTL, no tripwire report; pass the variables the command needs instead"
                        ));
                    } else if matches!(arg, "-u" | "--unset") {
                        if words.get(i + 1).is_some_and(|w| unquote(w) == "PATH") {
                            found.push(format!("'env -u PATH' removes the runner's shims; {FIX}"));
                        }
                        i += 1;
                    } else if arg == "-uPATH" || arg == "--unset=PATH" {
                        found.push(format!("'env {arg}' removes the runner's shims; {FIX}"));
                    } else if let Some(value) = words[i].strip_prefix("PATH=") {
                        if let Some(m) = assignment(value) {
                            found.push(format!("env: {m}"));
                        }
                    } else if arg == "-C" || arg == "--chdir" {
                        i += 1;
                    } else if !arg.starts_with('-') && !arg.contains('=') {
                        break;
                    }
                    i += 1;
                }
            }
            "command" => {
                while let Some(arg) = words.get(i).map(|w| unquote(w)) {
                    if !arg.starts_with('-') || arg == "--" {
                        break;
                    }
                    if arg.contains('p') {
                        found.push(format!(
                            "'command {arg}' searches a default PATH that skips the runner's shims; call the command by name"
                        ));
                    }
                    i += 1;
                }
            }
            "bash" | "sh" | "dash" | "ash" | "ksh" | "zsh" | "mksh" | "busybox" => {
                if word == "busybox"
                    && words
                        .get(i)
                        .is_some_and(|w| matches!(unquote(w), "sh" | "ash"))
                {
                    i += 1;
                }
                while let Some(arg) = words.get(i).map(|w| unquote(w)) {
                    if arg == "--login"
                        || (arg.starts_with('-')
                            && !arg.starts_with("--")
                            && arg[1..].contains('l'))
                    {
                        found.push(format!(
                            "'{word} {arg}' starts a login shell, which reads /etc/profile and ~/.profile: they reset PATH, so cluster commands in it bypass the runner's shims; drop the login option"
                        ));
                        break;
                    }
                    if !arg.starts_with('-') || arg == "--" {
                        break;
                    }
                    i += 1;
                    // `-c STRING`: what follows is the command, not options.
                    if arg == "-c" {
                        break;
                    }
                }
                break;
            }
            "su" => {
                found.push(
                    "su starts the command with a login environment (PATH reset, the tripwire's variables gone), so cluster commands under it bypass the runner's shims; run without su".to_owned(),
                );
                break;
            }
            "." | "source" => {
                if let Some(file) = words.get(i).map(|w| unquote(w))
                    && is_profile(file)
                {
                    found.push(format!(
                        "'{word} {file}' reads a login profile, which resets PATH, so later cluster commands bypass the runner's shims; set what you need from it yourself, appending to PATH"
                    ));
                }
                break;
            }
            "sudo" => {
                found.push(
                    "sudo resets PATH (its secure_path) and drops the tripwire's variables, so cluster commands under it bypass the runner's shims; run without sudo".to_owned(),
                );
                break;
            }
            "exec" | "nice" | "nohup" | "time" | "timeout" | "xargs" => {
                // Their own options and arguments (a duration, a niceness)
                // come before the command they run; skip to it.
                while words.get(i).map(|w| unquote(w)).is_some_and(|a| {
                    a.starts_with('-') || a.starts_with(|c: char| c.is_ascii_digit())
                }) {
                    i += 1;
                }
            }
            _ => break,
        }
    }
    found
}

/// A shell profile or environment file (they set PATH): `/etc/profile`,
/// `/etc/profile.d/*`, `~/.profile`, `$HOME/.bashrc`, `/etc/environment`...
fn is_profile(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.starts_with("/etc/profile.d/")
        || matches!(
            name,
            "profile"
                | ".profile"
                | ".bash_profile"
                | ".bash_login"
                | ".bashrc"
                | "bash.bashrc"
                | "environment"
                | ".zprofile"
                | ".zshrc"
                | "zprofile"
                | ".login"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_to_the_inherited_path_is_fine_and_anything_else_is_a_reset() {
        for ok in [
            "$PATH:/opt/bin",
            "\"$PATH:/opt/bin\"",
            "${PATH}:/x",
            "\"${PATH:-}\":/x",
            "$PATH",
        ] {
            assert_eq!(assignment(ok), None, "{ok}");
        }
        for reset in [
            "/usr/bin:/bin",
            "\"/opt/bin:$PATH\"",
            "'$PATH:/x'",
            "$PATHX",
            "$(echo \"$PATH\" | cut -d: -f2-)",
            "",
        ] {
            assert!(assignment(reset).is_some(), "{reset}");
        }
    }

    #[test]
    fn env_with_an_emptied_environment_or_a_new_path_is_a_reset() {
        for words in [
            &["env", "-i", "kubectl", "get", "ns"][..],
            &["env", "-", "kubectl"],
            &["env", "--ignore-environment", "sh", "-c", "kubectl get ns"],
            &["env", "-iv", "kubectl"],
            &["env", "-u", "PATH", "kubectl"],
            &["env", "PATH=/usr/bin", "kubectl"],
            &["exec", "env", "-i", "kubectl"],
            &["timeout", "30", "env", "-i", "kubectl"],
            &["command", "-p", "kubectl", "get", "ns"],
            &["command", "-pv", "kubectl"],
            &["sudo", "kubectl", "get", "ns"],
            &["unset", "PATH"],
            &["unset", "-v", "FOO", "PATH"],
        ] {
            assert_eq!(command(words).len(), 1, "{words:?}");
        }
    }

    #[test]
    fn ordinary_commands_and_words_that_only_mention_path_are_not_resets() {
        for words in [
            &["env", "FOO=1", "kubectl", "get", "ns"][..],
            &["env", "PATH=\"$PATH:/opt\"", "kubectl"],
            &["env", "-u", "KUBECONFIG", "kubectl"],
            &["env", "kubectl", "-i"],
            &["command", "-v", "kubectl"],
            &["command", "kubectl", "-p"],
            &["echo", "env", "-i", "unset", "PATH"],
            &["kubectl", "exec", "-i", "pod", "--", "env", "-i"],
            &["unset", "FOO"],
        ] {
            assert_eq!(command(words), Vec::<String>::new(), "{words:?}");
        }
    }
}
