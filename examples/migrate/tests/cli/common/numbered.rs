//! The numbered fixture history the `convert*` tests share: integer
//! scripts, a lib helper, a stamp helper, a slot that diverges between
//! a release branch and main, a script edited between release candidates.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::Repo;

/// The numbered directory inside the fixture repository.
pub const NUMBERED: &str = "platform/migrations";

/// A helper every script sources: records which content ran.
const RECORD: &str = "record_run() {\n  echo \"$1\" >> \"$FIXTURE_LOG\"\n}\n";

/// The stamp helper: applies the ledger ConfigMap with a new `version`.
const STAMP: &str = "# Stamps the cozystack-version ConfigMap.\nstamp_version() {\n  kubectl create configmap cozystack-version --namespace cozy-system \\\n    --from-literal=version=\"$1\" --dry-run=client -o yaml | kubectl apply -f -\n}\n";

/// A script of the numbered shape: sources its helpers next to it, records
/// `id`, stamps `next`.
pub fn numbered(n: u64, id: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\n# Migration {n} --> {next}\nset -eu\n\n. \"$(dirname \"$0\")/lib/record.sh\"\n. \"$(dirname \"$0\")/lib/stamp.sh\"\n\n{body}record_run {id}\nstamp_version {next}\n",
        next = n + 1
    )
}

/// `migrate convert --repo REPO --path NUMBERED --out OUT EXTRA... --output
/// json`: exit code, report, stderr.
pub fn convert(repo: &Repo, out: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = convert_args(repo, out);
    args.extend_from_slice(extra);
    super::json(&args)
}

/// `convert --repo REPO --path NUMBERED --out OUT`.
pub fn convert_args<'a>(repo: &'a Repo, out: &'a Path) -> Vec<&'a str> {
    let repo = repo.path().to_str().unwrap();
    vec![
        "convert",
        "--repo",
        repo,
        "--path",
        NUMBERED,
        "--out",
        out.to_str().unwrap(),
    ]
}

/// [`convert`] into `tree`, which must succeed and lint clean; then the
/// folder holding `tree` made a repository with one commit and `tree`'s
/// manifest generated (`order.d`). The report.
pub fn convert_released(repo: &Repo, tree: &Path, extra: &[&str]) -> serde_json::Value {
    let (code, report, err) = convert(repo, tree, extra);
    assert_eq!(code, 0, "{err}\n{report}");
    let lint = super::migrate().arg("lint").arg(tree).output().unwrap();
    super::assert_success(&lint, "the converted tree fails lint");
    let dir = tree.parent().unwrap();
    super::git(dir, &["init", "--quiet", "-b", "main"]);
    super::git(dir, &["add", "-A"]);
    super::git(dir, &["commit", "--quiet", "-m", "converted"]);
    let order = tree.join("order.d");
    let name = tree.file_name().unwrap().to_str().unwrap();
    let (code, manifest, err) = super::manifest_of(dir, name, &["--out", order.to_str().unwrap()]);
    assert_eq!(
        code, 0,
        "the converted tree fails manifest: {err}\n{manifest}"
    );
    report
}

/// A line converted by [`convert_released`] into `tree/` of a directory of
/// its own, kept with the repository it came from; files a test needs
/// beside the tree (a ledger, the scripts' log, a fake cluster) go in the
/// same directory.
pub struct Released {
    _repo: Repo,
    /// The directory holding `tree/`.
    pub dir: tempfile::TempDir,
}

impl Released {
    /// `repo` converted with `extra` into `dir/tree` ([`convert_released`]).
    pub fn new(repo: Repo, dir: tempfile::TempDir, extra: &[&str]) -> Released {
        convert_released(&repo, &dir.path().join("tree"), extra);
        Released { _repo: repo, dir }
    }

    /// The converted tree.
    pub fn tree(&self) -> PathBuf {
        self.file("tree")
    }

    /// `name` beside the tree.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A file ledger beside the tree.
    pub fn ledger(&self) -> PathBuf {
        self.file("ledger.json")
    }

    /// The log [`numbered`] scripts append their ids to (`FIXTURE_LOG`).
    pub fn log(&self) -> PathBuf {
        self.file("ran.log")
    }
}

/// Writes the helpers every [`numbered`] script sources: `lib/record.sh`
/// (`record_run ID` appends ID to `$FIXTURE_LOG`) and `lib/stamp.sh`.
pub fn helpers(repo: &Repo) {
    write(repo, "lib/record.sh", RECORD);
    write(repo, "lib/stamp.sh", STAMP);
}

pub fn write(repo: &Repo, rel: &str, text: &str) {
    let path = repo.path().join(NUMBERED).join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The history: v1.0.0 (1, 2); release-1.0 backports slot 3 as v1.0.1;
/// main gives slot 3 other content and adds 4 in v1.1.0-rc.1, edits 4 in
/// v1.1.0-rc.2 (= v1.1.0).
pub fn history() -> Repo {
    let repo = Repo::new();
    helpers(&repo);
    // The oldest shape: a stamp written out inline.
    write(
        &repo,
        "1",
        "#!/bin/sh\nset -eu\n. \"$(dirname \"$0\")/lib/record.sh\"\nrecord_run 1\n# Write version to cozystack-version config\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n",
    );
    write(
        &repo,
        "2",
        &numbered(
            2,
            "2",
            "DRY_RUN=\"${MIGRATION_DRY_RUN:-0}\"\nif [ \"$DRY_RUN\" = \"1\" ]; then\n  echo \"dry run; version stamp not advanced\"\n  exit 0\nfi\nif [ -n \"${FIXTURE_NOT_READY:-}\" ]; then\n  echo \"not ready; retry on the next upgrade\"\n  exit 0\nfi\n",
        ),
    );
    repo.release("v1.0.0");
    repo.branch("release-1.0");
    write(&repo, "3", &numbered(3, "3-backport", ""));
    repo.release("v1.0.1");
    repo.checkout("main");
    write(&repo, "3", &numbered(3, "3-main", ""));
    write(&repo, "4", &numbered(4, "4-rc1", ""));
    repo.release("v1.1.0-rc.1");
    write(&repo, "4", &numbered(4, "4-final", ""));
    repo.release("v1.1.0-rc.2");
    repo.tag("v1.1.0");
    repo
}

/// `(kind, line, rewritable)` of the changes convert's `report` lists for
/// script `slug`.
pub fn changes(report: &serde_json::Value, slug: &str) -> Vec<(String, u64, bool)> {
    let script = super::by_slug(&report["scripts"], slug)
        .unwrap_or_else(|| panic!("no script {slug} in {report}"));
    script["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_owned(),
                c["line"].as_u64().unwrap(),
                c["rewritable"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// One expected item of [`changes`].
pub fn change(kind: &str, line: u64, rewritable: bool) -> (String, u64, bool) {
    (kind.to_owned(), line, rewritable)
}

/// The slugs whose entry in the file ledger at `ledger` says they ran where
/// they may have run before (a diverged slot nobody recorded which content
/// of ran): `diverged-legacy-rerun:` messages.
pub fn reruns(ledger: &Path) -> Vec<String> {
    let (code, doc, err) = super::json(&["status", "--ledger", &super::file_spec(ledger)]);
    assert_eq!(code, 0, "{err}");
    doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("diverged-legacy-rerun:"))
        })
        .map(|e| e["slug"].as_str().unwrap().to_owned())
        .collect()
}

/// A simulated cluster: a file ledger and the log of every content run on
/// it, by the numbered runner before and by the engine after.
pub struct Cluster {
    dir: tempfile::TempDir,
}

impl Cluster {
    /// A cluster the numbered runner left at `version` after running `ran`;
    /// `entries` are records an adoption step wrote (slug, state).
    pub fn numbered(version: u64, ran: &[&str], entries: &[&str]) -> Cluster {
        let cluster = Cluster::fresh();
        let mut data = serde_json::Map::new();
        data.insert("version".into(), version.to_string().into());
        for slug in entries {
            data.insert(
                format!("m.{slug}"),
                r#"{"state":"legacy","at":"2026-01-01T00:00:00Z","attempts":0}"#.into(),
            );
        }
        // The file ledger's whole-document format, which the engine reads
        // today (a bare {"version":"N"} file is refused as not a ledger).
        let doc = serde_json::json!({
            "format": "migration-ledger/v1",
            "ledger": {"revision": 1, "data": data},
            "lock": null,
            "lock_generation": 0,
        });
        std::fs::write(cluster.ledger_path(), doc.to_string()).unwrap();
        let log: String = ran.iter().map(|id| format!("{id}\n")).collect();
        std::fs::write(cluster.log_path(), log).unwrap();
        cluster
    }

    /// A cluster with no ledger yet: the install.
    pub fn fresh() -> Cluster {
        let cluster = Cluster {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::write(cluster.log_path(), "").unwrap();
        cluster
    }

    /// The cluster's file ledger.
    pub fn ledger_path(&self) -> PathBuf {
        self.dir.path().join("ledger")
    }

    /// The log of every content run on the cluster.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("ran.log")
    }

    /// `migrate run` of the pre-apply tier of `tree`: (exit code, output).
    pub fn upgrade(&self, tree: &Path) -> (i32, String) {
        self.run_with(tree, &[])
    }

    /// The install of a new cluster: `migrate run --fresh-install`.
    pub fn install_ok(&self, tree: &Path) {
        let (code, text) = self.run_with(tree, &["--fresh-install"]);
        assert_eq!(code, 0, "{text}");
    }

    /// `migrate run` of the pre-apply tier of `tree` with `extra` flags.
    pub fn run_with(&self, tree: &Path, extra: &[&str]) -> (i32, String) {
        let out = super::migrate()
            .arg("run")
            .arg(tree)
            .arg("--ledger")
            .arg(super::file_spec(&self.ledger_path()))
            .args(["--tier", "pre-apply", "--lock-wait", "5"])
            .args(extra)
            .env("FIXTURE_LOG", self.log_path())
            .env_remove("FIXTURE_NOT_READY")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// [`Self::upgrade`], which must succeed.
    pub fn upgrade_ok(&self, tree: &Path) {
        let (code, text) = self.upgrade(tree);
        assert_eq!(code, 0, "upgrade to {}: {text}", tree.display());
    }

    /// Every content that ran on this cluster, in order.
    pub fn ran(&self) -> Vec<String> {
        std::fs::read_to_string(self.log_path())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Cluster {
    /// The slugs whose entry says they ran where they may have run before
    /// (a diverged slot nobody recorded which content of ran).
    pub fn reruns(&self) -> Vec<String> {
        reruns(&self.ledger_path())
    }
}
