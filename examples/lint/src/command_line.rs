//! The one reader of a cluster command's words: which word is the verb,
//! which the resource, which a flag's value.
//!
//! kubectl, helm and flux are cobra programs, and cobra finds a subcommand
//! by walking past flags: a `--flag` without `=` takes the next word unless
//! the flag is a switch, a lone `-x` likewise, `--` ends the flags. Global
//! flags may stand anywhere, before the verb too (`kubectl -n acme delete
//! secret x`, `kubectl --password p get pods`). Reading them with a partial
//! list took `p` for the verb, and a recorded verb is kept in the ledger,
//! so each command's own global flags are listed here complete, with
//! whether each takes a value, and cobra's rule covers a flag the table
//! does not know (before the verb, its next word is taken as its value:
//! never is a value recorded as a verb).
//!
//! Past the verb a subcommand's own flags may stand too (`kubectl get -l
//! app=x pods`). The common ones are listed; a flag the reader does not
//! know past the verb makes it stop ([`Reading::complete`] is false)
//! rather than guess whether the next word is a value or the resource.
//!
//! Everything that reads a cluster command line (the tripwire's record and
//! its tolerance check, lint's command rules, convert's readers) reads it
//! here, so they cannot disagree.
//!
//! Sources: kubectl 1.34.12 (`kubectl options`: k8s.io/cli-runtime
//! `ConfigFlags`, kubectl's own persistent flags, klog's `-v`/`--vmodule`,
//! `--kuberc`), helm v3.19.5 (`helm --help`: `EnvSettings::AddFlags`), flux
//! v2 (`flux --help`, global flags).

use std::path::Path;

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Takes a value: `--flag value` or `--flag=value` (`-f value`, `-fvalue`).
    Value,
    /// A switch: never takes the next word (`--flag=false` still allowed).
    Switch,
    /// A value only with `=` (cobra's `NoOptDefVal`: `--dry-run` alone
    /// means `--dry-run=unchanged`, and `--dry-run server` leaves `server`
    /// as an argument).
    Optional,
}

/// One flag of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    /// The long name, without `--`.
    pub long: &'static str,
    /// The one-letter shorthand, if any.
    pub short: Option<char>,
    /// Whether it takes a value.
    pub arity: Arity,
}

// The flag tables below in one word each: `v` takes a value, `s` is a
// switch, `o` takes an optional value; a second letter `s` adds the shorthand.
const fn flag(long: &'static str, short: Option<char>, arity: Arity) -> Flag {
    Flag { long, short, arity }
}
const fn v(long: &'static str) -> Flag {
    flag(long, None, Arity::Value)
}
const fn vs(long: &'static str, short: char) -> Flag {
    flag(long, Some(short), Arity::Value)
}
const fn s(long: &'static str) -> Flag {
    flag(long, None, Arity::Switch)
}
const fn ss(long: &'static str, short: char) -> Flag {
    flag(long, Some(short), Arity::Switch)
}
const fn o(long: &'static str) -> Flag {
    flag(long, None, Arity::Optional)
}

/// kubectl 1.34.12's global flags, all of them (`kubectl options`).
pub const KUBECTL_GLOBAL_FLAGS: &[Flag] = &[
    v("as"),
    v("as-group"),
    v("as-uid"),
    v("cache-dir"),
    v("certificate-authority"),
    v("client-certificate"),
    v("client-key"),
    v("cluster"),
    v("context"),
    s("disable-compression"),
    ss("help", 'h'),
    s("insecure-skip-tls-verify"),
    v("kubeconfig"),
    v("kuberc"),
    v("log-flush-frequency"),
    s("match-server-version"),
    vs("namespace", 'n'),
    v("password"),
    v("profile"),
    v("profile-output"),
    v("request-timeout"),
    vs("server", 's'),
    v("tls-server-name"),
    v("token"),
    v("user"),
    v("username"),
    vs("v", 'v'),
    v("vmodule"),
    s("warnings-as-errors"),
];

/// Flags of kubectl's subcommands as scripts write them between the verb
/// and the resource (`kubectl get -A pods`, `kubectl delete
/// --ignore-not-found secret x`). A name whose meaning differs between
/// subcommands (`-p`: `--patch` of `patch`, `--previous` of `logs`) is left
/// out, so the reader stops there instead of guessing.
pub const KUBECTL_VERB_FLAGS: &[Flag] = &[
    s("all"),
    ss("all-namespaces", 'A'),
    s("allow-missing-template-keys"),
    v("applyset"),
    o("cascade"),
    vs("container", 'c'),
    v("chunk-size"),
    o("dry-run"),
    vs("env", 'e'),
    v("field-manager"),
    v("field-selector"),
    vs("filename", 'f'),
    s("follow"),
    s("force"),
    s("force-conflicts"),
    v("from-env-file"),
    v("from-file"),
    v("from-literal"),
    v("grace-period"),
    s("ignore-not-found"),
    v("image"),
    vs("kustomize", 'k'),
    vs("label-columns", 'L'),
    s("list"),
    s("local"),
    s("no-headers"),
    s("now"),
    vs("output", 'o'),
    s("overwrite"),
    v("patch-file"),
    s("prune"),
    ss("quiet", 'q'),
    s("raw"),
    ss("recursive", 'R'),
    v("replicas"),
    v("resource-version"),
    vs("selector", 'l'),
    s("server-side"),
    s("show-kind"),
    s("show-labels"),
    s("show-managed-fields"),
    v("sort-by"),
    ss("stdin", 'i'),
    v("subresource"),
    v("template"),
    v("timeout"),
    ss("tty", 't'),
    v("type"),
    o("validate"),
    s("wait"),
    ss("watch", 'w'),
    s("watch-only"),
];

/// helm v3.19.5's global flags, all of them (`helm --help`).
pub const HELM_GLOBAL_FLAGS: &[Flag] = &[
    v("burst-limit"),
    s("debug"),
    ss("help", 'h'),
    v("kube-apiserver"),
    v("kube-as-group"),
    v("kube-as-user"),
    v("kube-ca-file"),
    v("kube-context"),
    s("kube-insecure-skip-tls-verify"),
    v("kube-tls-server-name"),
    v("kube-token"),
    v("kubeconfig"),
    vs("namespace", 'n'),
    v("qps"),
    v("registry-config"),
    v("repository-cache"),
    v("repository-config"),
];

/// Flags of helm's subcommands (`install`, `upgrade`, `uninstall`, `list`,
/// `get`, `rollback`, `status`, `template`, `pull`, `repo add`) as scripts
/// write them between the verb and the release; the chart-repository
/// credentials (`--username`, `--password`) among them.
pub const HELM_VERB_FLAGS: &[Flag] = &[
    ss("all", 'a'),
    ss("all-namespaces", 'A'),
    s("atomic"),
    v("ca-file"),
    v("cascade"),
    v("cert-file"),
    s("cleanup-on-fail"),
    s("create-namespace"),
    s("dependency-update"),
    v("description"),
    s("devel"),
    s("disable-openapi-validation"),
    o("dry-run"),
    s("force"),
    ss("generate-name", 'g'),
    s("hide-notes"),
    v("history-max"),
    s("ignore-not-found"),
    s("insecure-skip-tls-verify"),
    ss("install", 'i'),
    s("keep-history"),
    v("key-file"),
    v("keyring"),
    vs("labels", 'l'),
    v("max"),
    s("no-hooks"),
    vs("output", 'o'),
    s("pass-credentials"),
    v("password"),
    s("plain-http"),
    v("post-renderer"),
    v("post-renderer-args"),
    s("render-subchart-notes"),
    v("repo"),
    s("reset-then-reuse-values"),
    s("reset-values"),
    s("reuse-values"),
    v("revision"),
    v("set"),
    v("set-file"),
    v("set-json"),
    v("set-literal"),
    v("set-string"),
    s("skip-crds"),
    s("skip-schema-validation"),
    s("take-ownership"),
    v("timeout"),
    v("username"),
    vs("values", 'f'),
    s("verify"),
    v("version"),
    s("wait"),
    s("wait-for-jobs"),
];

/// flux v2's global flags, all of them (`flux --help`).
pub const FLUX_GLOBAL_FLAGS: &[Flag] = &[
    v("as"),
    v("as-group"),
    v("as-uid"),
    v("cache-dir"),
    v("certificate-authority"),
    v("client-certificate"),
    v("client-key"),
    v("cluster"),
    v("context"),
    s("disable-compression"),
    ss("help", 'h'),
    s("insecure-skip-tls-verify"),
    v("kube-api-burst"),
    v("kube-api-qps"),
    v("kubeconfig"),
    vs("namespace", 'n'),
    v("server"),
    v("timeout"),
    v("tls-server-name"),
    v("token"),
    v("user"),
    s("verbose"),
];

/// Flags of flux's subcommands as scripts write them between the verb and
/// the resource (`flux reconcile --with-source kustomization x`).
pub const FLUX_VERB_FLAGS: &[Flag] = &[
    ss("all-namespaces", 'A'),
    s("export"),
    vs("label-selector", 'l'),
    s("with-source"),
    s("wait"),
];

/// A command's flag tables.
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    /// Flags valid anywhere, before the verb too.
    pub global: &'static [Flag],
    /// Subcommand flags known past the verb.
    pub verb: &'static [Flag],
}

/// The grammar of a cluster command, by its name or path (`oc` reads as
/// kubectl, whose flags it shares). Any other command gets empty tables:
/// cobra's rule alone before its verb, and the reader stops at its first
/// flag past the verb.
pub fn grammar(command: &str) -> Grammar {
    let name = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command);
    match name {
        "kubectl" | "oc" => Grammar {
            global: KUBECTL_GLOBAL_FLAGS,
            verb: KUBECTL_VERB_FLAGS,
        },
        "helm" => Grammar {
            global: HELM_GLOBAL_FLAGS,
            verb: HELM_VERB_FLAGS,
        },
        "flux" => Grammar {
            global: FLUX_GLOBAL_FLAGS,
            verb: FLUX_VERB_FLAGS,
        },
        _ => Grammar {
            global: &[],
            verb: &[],
        },
    }
}

/// The words of a command line as the command reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// Indices (into the arguments) of the words that are neither a flag
    /// nor a flag's value, in order: the verb first, then the resource (or
    /// helm's release) and the rest.
    pub positionals: Vec<usize>,
    /// False when the reader stopped before the end: at a flag past the
    /// verb it does not know (whether the next word is its value cannot be
    /// told), or at `--`.
    pub complete: bool,
}

impl Reading {
    /// The verb's index.
    pub fn verb(&self) -> Option<usize> {
        self.positionals.first().copied()
    }
}

enum Found {
    Known(Arity),
    Unknown,
}

fn by_long(tables: &[&[Flag]], name: &str) -> Found {
    tables
        .iter()
        .flat_map(|t| t.iter())
        .find(|f| f.long == name)
        .map_or(Found::Unknown, |f| Found::Known(f.arity))
}

fn by_short(tables: &[&[Flag]], c: char) -> Found {
    tables
        .iter()
        .flat_map(|t| t.iter())
        .find(|f| f.short == Some(c))
        .map_or(Found::Unknown, |f| Found::Known(f.arity))
}

fn next_is_flag(args: &[String], i: usize) -> bool {
    args.get(i + 1)
        .is_some_and(|n| n.starts_with('-') && n.len() > 1)
}

/// Reads `args` (the words after the command's name) as `command` reads
/// them.
pub fn read(command: &str, args: &[String]) -> Reading {
    let g = grammar(command);
    let mut positionals = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let before_verb = positionals.is_empty();
        let tables: &[&[Flag]] = if before_verb {
            &[g.global]
        } else {
            &[g.global, g.verb]
        };
        let unknown = |positionals: Vec<usize>| Reading {
            positionals,
            complete: false,
        };
        if a == "--" {
            return unknown(positionals);
        }
        if let Some(long) = a.strip_prefix("--") {
            if long.contains('=') {
                i += 1;
                continue;
            }
            i += match by_long(tables, long) {
                Found::Known(Arity::Value) => 2,
                Found::Known(_) => 1,
                // Cobra's rule: an unknown `--flag` before the subcommand
                // takes the next word with it (not a flag: that one is
                // read as a flag, so its own value is never the verb).
                Found::Unknown if before_verb => 1 + usize::from(!next_is_flag(args, i)),
                Found::Unknown => return unknown(positionals),
            };
            continue;
        }
        if let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            // pflag: `-abc` is `-a -b -c`; the first that takes a value
            // takes the rest of the word (`-nacme`, `-n=acme`) or, at the
            // word's end, the next word.
            let mut step = 1;
            for (at, c) in shorts.char_indices() {
                match by_short(tables, c) {
                    Found::Known(Arity::Value) => {
                        if at + c.len_utf8() == shorts.len() {
                            step = 2;
                        }
                        break;
                    }
                    Found::Known(_) => {}
                    Found::Unknown if before_verb => {
                        // Cobra's rule: a lone unknown `-x` takes the next
                        // word; pflag fails on it anyway.
                        if shorts.len() == c.len_utf8() && !next_is_flag(args, i) {
                            step = 2;
                        }
                        break;
                    }
                    Found::Unknown => return unknown(positionals),
                }
            }
            i += step;
            continue;
        }
        positionals.push(i);
        i += 1;
    }
    Reading {
        positionals,
        complete: true,
    }
}

/// The index of the verb in `args` (the words after the command's name).
pub fn verb_at(command: &str, args: &[String]) -> Option<usize> {
    read(command, args).verb()
}

/// The verb of a whole command line (`argv[0]` the command).
pub fn verb_of(argv: &[String]) -> Option<&str> {
    let (name, args) = argv.split_first()?;
    verb_at(name, args).map(|i| args[i].as_str())
}
