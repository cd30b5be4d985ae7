//! `migrate convert`: a numbered migrations directory into the slug layout
//! (see [`migrate_repo::convert`]).

use std::path::PathBuf;

use clap::Args;
use migration_core::Settings;
use migration_core::header::HeaderMarker;
use migration_kube::defaults;

use super::{Failure, Out};
use migrate_repo::convert::{self, ConvertError, Options};

/// `migrate convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The git repository holding the numbered directory (a full clone with
    /// its release tags and branches).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The numbered directory inside the repository (scripts named 1, 2, ...
    /// and lib/); repeat it with the directory's earlier paths when it
    /// moved (older tags are read at the one they have).
    #[arg(long, required = true)]
    pub path: Vec<String>,
    /// Glob of release tags whose copies of the directory are read
    /// (default v*; when given, written into the new tree's migrate.toml).
    #[arg(long)]
    pub tag_pattern: Option<String>,
    /// Where to write the slug layout: an empty or missing directory, or
    /// one holding an identical earlier conversion (then nothing changes).
    #[arg(long)]
    pub out: PathBuf,
    /// Apply the safe rewrites (default: only show them as diffs).
    #[arg(long)]
    pub rewrite: bool,
    /// The ledger ConfigMap whose 'version' key the scripts stamp (default
    /// cozystack-version; when given, written into the new tree's
    /// migrate.toml).
    #[arg(long)]
    pub ledger_name: Option<String>,
    /// The marker the converted scripts' headers start with (default
    /// cozystack-migration; when given, written into the new tree's
    /// migrate.toml, which every later command then reads).
    #[arg(long, value_parser = parse_marker)]
    pub header_marker: Option<HeaderMarker>,
    /// A file of 'N SLUG' lines naming numbered scripts by what they do
    /// ('1 mariadb-operator-secrets'); a diverged slot's contents become
    /// SLUG-TAG (TAG: the first tag holding it). Unmapped slots keep
    /// their integer.
    #[arg(long, value_name = "FILE")]
    pub slug_map: Option<PathBuf>,
    /// Do not make each converted script require the one before it: a
    /// script answering not-yet then holds back only what requires it.
    #[arg(long)]
    pub no_chain: bool,
    /// Read no pre-release tag (v1.0.0-rc.1 and the like): use it only when
    /// no cluster ever ran a pre-release, since contents only a pre-release
    /// held are then not considered at all.
    #[arg(long)]
    pub skip_prereleases: bool,
    /// Clusters ran pre-releases: a content only a pre-release held counts
    /// as one a cluster may have run at its slot (legacy-map others=). By
    /// default it does not: production clusters install final releases.
    #[arg(long, conflicts_with = "skip_prereleases")]
    pub count_prereleases: bool,
    /// A file of 'TAG TARGET' lines: the numbered runner's target at each
    /// release tag (where the platform keeps it is its own), written into
    /// legacy-releases so that `migrate adopt --helm-history` knows which
    /// slots an upgrade to a release ran. A tag it does not name is taken
    /// to run every slot it holds.
    #[arg(long, value_name = "FILE")]
    pub release_targets: Option<PathBuf>,
    /// Do not run each script and its conversion under fake cluster
    /// commands to compare them: for trees whose scripts cannot run off a
    /// cluster. Every script is then reported as skipped, never as passed.
    #[arg(long)]
    pub no_behaviour_check: bool,
    /// A cluster command the behaviour check fakes, besides kubectl, helm,
    /// flux and MIGRATE_CLUSTER_COMMANDS (repeatable; when given, written
    /// into the new tree's migrate.toml).
    #[arg(long = "cluster-command")]
    pub cluster_commands: Vec<String>,
    /// The interpreter '#!/bin/sh' scripts run under in the behaviour check,
    /// when the image's /bin/sh is not this host's ('busybox ash' for an
    /// alpine image; default /bin/sh).
    #[arg(long, value_name = "INTERPRETER")]
    pub behaviour_sh: Option<String>,
}

/// The list file a flag names (`--slug-map`, `--release-targets`), read
/// and parsed by `parse` (given the file's name for its messages); the
/// empty list without the flag. Unreadable or malformed is bad input.
fn list_file<T: Default>(
    file: Option<&std::path::Path>,
    parse: impl FnOnce(&str, &str) -> Result<T, convert::ConvertError>,
) -> Result<T, Failure> {
    let Some(file) = file else {
        return Ok(T::default());
    };
    use migration_core::tree::supplied::{self, Within};
    let bad = |why: String| Failure::bad_input(vec![format!("{}: {why}", file.display())]);
    let bytes = supplied::read_file(file, Within::Anywhere, supplied::MAX_FILE_BYTES)
        .map_err(|e| Failure::bad_input(vec![e.to_string()]))?
        .ok_or_else(|| bad("no such file".into()))?;
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
    parse(&file.display().to_string(), &text).map_err(|e| Failure::bad_input(vec![e.to_string()]))
}

/// `--header-marker WORD`.
fn parse_marker(word: &str) -> Result<HeaderMarker, String> {
    HeaderMarker::new(word)
}

/// Converts and prints the report.
pub fn convert(args: ConvertArgs, out: &Out) -> Result<(), Failure> {
    // What it was given is what the new tree's migrate.toml keeps (the
    // numbered directory's paths are not the new tree's, so not them).
    let mut settings = Settings::default();
    settings.tag_pattern = args.tag_pattern.clone();
    settings.ledger_name = args.ledger_name.clone();
    settings.header_marker = args.header_marker.clone();
    if !args.cluster_commands.is_empty() {
        settings.cluster_commands = Some(args.cluster_commands.clone());
    }
    let commands = super::cluster_commands::settings(None, &args.cluster_commands)?;
    let slug_map = list_file(args.slug_map.as_deref(), convert::slots::SlugMap::parse)?;
    let release_targets = list_file(
        args.release_targets.as_deref(),
        convert::slots::ReleaseTargets::parse,
    )?;
    let ledger_name = args
        .ledger_name
        .unwrap_or_else(|| defaults::LEDGER_NAME.to_owned());
    // The engine's own command line, so the conversion runs as `migrate
    // run` would run it.
    let behaviour = (!args.no_behaviour_check).then(|| {
        let mut settings =
            convert::behaviour::Settings::new(&ledger_name, defaults::NAMESPACE, commands);
        settings.bin_sh = args.behaviour_sh.clone();
        settings
    });
    let options = Options {
        release_targets,
        behaviour,
        slug_map,
        chain: !args.no_chain,
        repo: args.repo,
        path: args.path.first().cloned().unwrap_or_default(),
        old_paths: args.path.iter().skip(1).cloned().collect(),
        tag_pattern: args.tag_pattern.unwrap_or_else(|| "v*".to_owned()),
        out: args.out,
        rewrite: args.rewrite,
        ledger_name,
        skip_prereleases: args.skip_prereleases,
        count_prereleases: args.count_prereleases,
        header_marker: args.header_marker.unwrap_or_default(),
        settings,
    };
    let report = convert::convert(&options).map_err(|e| match e {
        ConvertError::Git(g) => Failure::from(g),
        ConvertError::Io { .. } => Failure::environment(vec![e.to_string()]),
        other => Failure::bad_input(vec![other.to_string()]),
    })?;
    out.emit(&report, |_| report.text());
    Ok(())
}
