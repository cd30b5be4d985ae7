//! The shim's ledger guard: no script writes the ledger ConfigMap through
//! `kubectl`, whatever the manifest's source.
//!
//! Lint refuses a literal write of the ledger before the run, but it cannot
//! see through a variable (`printf '%s\n' "$MANIFEST" | kubectl apply -f -`)
//! or a file written at run time. So the shim reads what `apply`, `create`,
//! `replace` and `patch` send (`-f -`, that is stdin or a heredoc, a file, a
//! directory's manifests) and the objects their words name, and refuses the
//! call when one of them is the ledger ConfigMap. The engine writes its
//! ledger through its own client, never through the shim, so every write
//! the shim sees is a script's.

use std::path::Path;

use migrate_lint::command_line;

/// The file beside the run's real-command file that names the ledger
/// ConfigMap to guard (absent: no guard, as outside the runner).
pub const LEDGER_FILE: &str = "ledger-name";

/// Longest manifest read from stdin (beyond it the call is refused: a
/// manifest the guard did not read whole may hold the ledger).
const MAX_INPUT: u64 = 64 * 1024 * 1024;

/// What the guard decided for one call.
#[derive(Debug, PartialEq, Eq)]
pub enum GuardDecision {
    /// Run it; `stdin` is what the guard read from the script's stdin, to
    /// be handed to the real command (`None`: stdin untouched).
    Pass {
        /// The bytes read from stdin.
        stdin: Option<Vec<u8>>,
    },
    /// Do not run it: the message says which object and from where.
    Refuse(String),
}

/// The ledger ConfigMap the run guards, from the report's directory.
pub fn ledger_of(report: &Path) -> Option<String> {
    let name = std::fs::read_to_string(report.parent()?.join(LEDGER_FILE)).ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

/// The verbs whose input the guard reads.
const WRITES: [&str; 4] = ["apply", "create", "replace", "patch"];

/// Spellings of the ConfigMap type in a command's words.
fn is_configmap_type(word: &str) -> bool {
    let word = word.to_ascii_lowercase();
    let base = word.split('.').next().unwrap_or("");
    matches!(base, "configmap" | "configmaps" | "cm")
        && (word == base || word == format!("{base}.v1") || word == format!("{base}.v1."))
}

/// Checks one kubectl call (`argv[0]` the command's name) against the
/// ledger ConfigMap `ledger`; `stdin` supplies the script's stdin when the
/// call reads it.
pub fn check(ledger: &str, argv: &[String], stdin: &mut dyn std::io::Read) -> GuardDecision {
    let (name, args) = argv
        .split_first()
        .map_or(("kubectl", &[][..]), |(n, a)| (n.as_str(), a));
    // The verb and the objects named are read as kubectl reads them (its
    // own flag tables, one reader for the engine): a flag's value is never
    // taken for the verb or an object.
    let reading = command_line::read(name, args);
    let verb = reading.verb().map(|i| args[i].as_str());
    let mut positionals: Vec<&str> = reading
        .positionals
        .iter()
        .skip(1)
        .map(|&i| args[i].as_str())
        .collect();
    if !reading.complete {
        // The reader stopped at a flag it does not know: every later word
        // that is not a flag may name an object, so each is checked.
        let after = reading.positionals.last().map_or(0, |&i| i + 1);
        positionals.extend(
            args.iter()
                .skip(after)
                .map(String::as_str)
                .filter(|w| !w.starts_with('-')),
        );
    }
    let mut files = Vec::new();
    let mut dry_run = false;
    let mut take_file = false;
    for w in args.iter().map(String::as_str) {
        if take_file {
            files.push(w);
            take_file = false;
            continue;
        }
        if w == "--" {
            break;
        }
        if let Some(flag) = w.strip_prefix("--dry-run") {
            // Client and server dry runs persist nothing.
            dry_run = !matches!(flag, "=none" | "=false");
            continue;
        }
        if matches!(w, "-f" | "--filename") {
            take_file = true;
            continue;
        }
        if let Some(f) = w
            .strip_prefix("--filename=")
            .or_else(|| w.strip_prefix("-f="))
            .or_else(|| w.strip_prefix("-f").filter(|f| !f.is_empty()))
        {
            files.push(f);
        }
    }
    let pass = GuardDecision::Pass { stdin: None };
    if !verb.is_some_and(|v| WRITES.contains(&v)) || dry_run {
        return pass;
    }
    let named = match positionals.as_slice() {
        [kind, names @ ..] if is_configmap_type(kind) => names.contains(&ledger),
        _ => false,
    } || positionals.iter().any(|p| {
        p.split_once('/')
            .is_some_and(|(kind, name)| is_configmap_type(kind) && name == ledger)
    });
    if named {
        return GuardDecision::Refuse(format!("its words name the ledger ConfigMap {ledger}"));
    }
    let mut read = None;
    for file in files {
        let (source, text) = if file == "-" {
            let mut buf = Vec::new();
            use std::io::Read;
            if let Err(e) = stdin.take(MAX_INPUT + 1).read_to_end(&mut buf) {
                return GuardDecision::Refuse(format!(
                    "its manifest on stdin cannot be read ({e}), and may hold the ledger ConfigMap {ledger}"
                ));
            }
            if buf.len() as u64 > MAX_INPUT {
                return GuardDecision::Refuse(format!(
                    "its manifest on stdin is over {MAX_INPUT} bytes, too long to check for the ledger ConfigMap {ledger}"
                ));
            }
            let text = String::from_utf8_lossy(&buf).into_owned();
            read = Some(buf);
            ("stdin".to_owned(), vec![text])
        } else if file.contains("://") {
            // kubectl fetches it itself; what it holds is out of reach.
            return GuardDecision::Refuse(format!(
                "its manifest {file} is fetched by kubectl, out of the guard's reach, and may hold the ledger ConfigMap {ledger}"
            ));
        } else {
            (format!("file {file}"), manifests_at(Path::new(file)))
        };
        for text in text {
            if names_ledger(&text, ledger) {
                return GuardDecision::Refuse(format!(
                    "its manifest from {source} holds the ledger ConfigMap {ledger}"
                ));
            }
        }
    }
    GuardDecision::Pass { stdin: read }
}

/// The manifests at a path as kubectl reads them: the file, or a
/// directory's `.yaml`, `.yml` and `.json` files (one level; unreadable
/// ones are left to kubectl's own error).
fn manifests_at(path: &Path) -> Vec<String> {
    if path.is_dir() {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
            {
                out.extend(std::fs::read_to_string(&p));
            }
        }
        out
    } else {
        std::fs::read_to_string(path).into_iter().collect()
    }
}

/// Whether a manifest text holds the ConfigMap `ledger` (in a `List` too).
/// A text that does not parse is taken to hold it when it mentions both
/// `ConfigMap` and the name: kubectl may read what the guard cannot.
fn names_ledger(text: &str, ledger: &str) -> bool {
    let docs: Vec<serde_json::Value> = match serde_saphyr::from_multiple(text) {
        Ok(d) => d,
        Err(_) => match serde_json::from_str(text) {
            Ok(v) => vec![v],
            Err(_) => return text.contains("ConfigMap") && text.contains(ledger),
        },
    };
    fn is_ledger(v: &serde_json::Value, ledger: &str) -> bool {
        if let Some(items) = v.get("items").and_then(|i| i.as_array()) {
            return items.iter().any(|i| is_ledger(i, ledger));
        }
        v.get("kind").and_then(|k| k.as_str()) == Some("ConfigMap")
            && v.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(ledger)
    }
    docs.iter().any(|d| is_ledger(d, ledger))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(line: &str, input: &str) -> GuardDecision {
        let argv: Vec<String> = line.split(' ').map(str::to_owned).collect();
        check("cozystack-version", &argv, &mut input.as_bytes())
    }

    const LEDGER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\n  namespace: cozy-system\ndata:\n  version: \"43\"\n";

    #[test]
    fn a_ledger_manifest_on_stdin_is_refused_whatever_the_flag_spelling() {
        for line in [
            "kubectl apply -f -",
            "kubectl apply --filename -",
            "kubectl -n cozy-system apply --filename=-",
            "kubectl replace -f-",
            "kubectl create -f -",
            "kubectl apply --dry-run=none -f -",
        ] {
            assert!(
                matches!(call(line, LEDGER), GuardDecision::Refuse(_)),
                "{line}"
            );
        }
        let list = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{}]}}",
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cozystack-version\"}}"
        );
        assert!(matches!(
            call("kubectl apply -f -", &list),
            GuardDecision::Refuse(_)
        ));
        let two = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n{LEDGER}");
        assert!(matches!(
            call("kubectl apply -f -", &two),
            GuardDecision::Refuse(_)
        ));
    }

    #[test]
    fn other_objects_pass_with_their_stdin_kept_for_the_real_command() {
        let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n";
        assert_eq!(
            call("kubectl apply -f -", other),
            GuardDecision::Pass {
                stdin: Some(other.as_bytes().to_vec())
            }
        );
        // Rendering the stamp is no write; reading it neither.
        for line in [
            "kubectl create configmap cozystack-version --from-literal=version=3 --dry-run=client -o yaml",
            "kubectl get configmap cozystack-version",
            "kubectl apply --dry-run=server -f -",
        ] {
            assert_eq!(
                call(line, LEDGER),
                GuardDecision::Pass { stdin: None },
                "{line}"
            );
        }
    }

    #[test]
    fn a_call_whose_words_name_the_ledger_is_refused() {
        for line in [
            "kubectl patch configmap cozystack-version --type merge -p {}",
            "kubectl -n cozy-system patch cm/cozystack-version -p {}",
            "kubectl create configmap cozystack-version --from-literal=version=3",
            "kubectl patch configmaps.v1 cozystack-version -p {}",
        ] {
            assert!(matches!(call(line, ""), GuardDecision::Refuse(_)), "{line}");
        }
    }

    #[test]
    fn a_ledger_manifest_in_a_file_or_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cm.yaml");
        std::fs::write(&file, LEDGER).unwrap();
        let line = format!("kubectl apply -f {}", file.display());
        assert!(matches!(call(&line, ""), GuardDecision::Refuse(_)));
        let line = format!("kubectl apply -f {}", dir.path().display());
        assert!(matches!(call(&line, ""), GuardDecision::Refuse(_)));
        std::fs::write(&file, "kind: ConfigMap\nmetadata: {name: other}\n").unwrap();
        let line = format!("kubectl apply -f {}", file.display());
        assert_eq!(call(&line, ""), GuardDecision::Pass { stdin: None });
    }
}
