//! The tripwire shim's cost, side by side with calling the command
//! directly, in the same run:
//!
//! - `call/trivial`: one call of a trivial fake `kubectl` (`#!/bin/sh`,
//!   `exit 0`: the floor is the process spawn), directly and through the
//!   shim (the migrate binary behind a `kubectl` symlink, with the runner's
//!   environment: real path, report file).
//! - `call/kubectl-client`: one call of the real `/usr/bin/kubectl version
//!   --client` (no network), directly and through the shim: the cheapest
//!   real kubectl call, so the shim's share of it is an upper bound for a
//!   call that talks to an API server.
//! - `script_100_calls/trivial`: a dash script making 100 calls of the
//!   trivial fake, with and without the shim on PATH.
//! - `script_100_calls/real-apiserver`: a dash script making 100 calls of
//!   the real kubectl (`get namespaces -o name`) against a real API server,
//!   with and without the shim on PATH: the case the 2 % goal is about. It
//!   runs when `MIGRATE_TEST_KUBECONFIG` and `MIGRATE_TEST_KUBECTL` are set
//!   (`eval "$(sh examples/kube-testenv/testenv.sh env)"` after `start`).
//!
//! The shim is the release `migrate-shim` binary next to this bench
//! (`cargo build --release -p migrate` first), or `$MIGRATE_SHIM`; without
//! either, this bench binary itself, which dispatches exactly as
//! `migrate-shim` does (`migrate_runner::tripwire::dispatch()` first thing in
//! `main`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode};

struct Setup {
    _dir: tempfile::TempDir,
    fake: PathBuf,
    shim_dir: PathBuf,
    fake_dir: PathBuf,
    report: PathBuf,
    script: PathBuf,
}

fn shim_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MIGRATE_SHIM") {
        return PathBuf::from(p);
    }
    let me = std::env::current_exe().unwrap();
    let beside = me
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join(migrate_runner::tripwire::SHIM_BINARY))
        .filter(|p| p.is_file());
    beside.unwrap_or(me)
}

fn setup(shim: &Path) -> Setup {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake_dir = dir.path().join("fakebin");
    let shim_dir = dir.path().join("shims");
    std::fs::create_dir_all(&fake_dir).unwrap();
    std::fs::create_dir_all(&shim_dir).unwrap();
    let fake = fake_dir.join("kubectl");
    std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(shim, shim_dir.join("kubectl")).unwrap();
    let report = dir.path().join("report.jsonl");
    std::fs::write(&report, "").unwrap();
    let script = dir.path().join("hundred.sh");
    std::fs::write(
        &script,
        "i=0\nwhile [ $i -lt 100 ]; do\n  kubectl get ns -o name\n  i=$((i + 1))\ndone\n",
    )
    .unwrap();
    Setup {
        _dir: dir,
        fake,
        shim_dir,
        fake_dir,
        report,
        script,
    }
}

fn shimmed(cmd: &mut Command, s: &Setup, real: &Path) {
    cmd.env("MIGRATE_TRIPWIRE_REPORT", &s.report)
        .env("MIGRATE_TRIPWIRE_COMMANDS", "kubectl,helm,flux")
        .env("MIGRATE_TRIPWIRE_REAL_KUBECTL", real);
}

fn run(mut cmd: Command) {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Benches one call of `real` with `args`, directly (`name/direct`) and
/// through the shim (`name/shim`), side by side in `group`.
fn direct_and_shimmed(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    s: &Setup,
    real: &Path,
    args: &[&str],
) {
    group.bench_function(BenchmarkId::new(name, "direct"), |b| {
        b.iter(|| {
            let mut cmd = Command::new(real);
            cmd.args(args);
            run(cmd);
        })
    });
    group.bench_function(BenchmarkId::new(name, "shim"), |b| {
        b.iter(|| {
            let mut cmd = Command::new(s.shim_dir.join("kubectl"));
            cmd.args(args);
            shimmed(&mut cmd, s, real);
            run(cmd);
        })
    });
}

fn bench(c: &mut Criterion) {
    let shim = shim_binary();
    println!("tripwire bench: shim binary {}", shim.display());
    let s = setup(&shim);
    let base_path = std::env::var("PATH").unwrap_or_default();

    let mut group = c.benchmark_group("tripwire/call");
    group.warm_up_time(Duration::from_secs(1));
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(5));
    direct_and_shimmed(&mut group, "trivial", &s, &s.fake, &["get", "ns"]);
    let real = Path::new("/usr/bin/kubectl");
    if real.is_file() {
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(20);
        group.measurement_time(Duration::from_secs(8));
        direct_and_shimmed(
            &mut group,
            "kubectl-client",
            &s,
            real,
            &["version", "--client"],
        );
    } else {
        println!("tripwire bench: no /usr/bin/kubectl, kubectl-client skipped");
    }
    group.finish();

    let mut group = c.benchmark_group("tripwire/script_100_calls");
    group.warm_up_time(Duration::from_secs(1));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function(BenchmarkId::new("trivial", "direct"), |b| {
        b.iter(|| {
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-e")
                .arg(&s.script)
                .env("PATH", format!("{}:{base_path}", s.fake_dir.display()));
            run(cmd);
        })
    });
    group.bench_function(BenchmarkId::new("trivial", "shim"), |b| {
        b.iter(|| {
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-e").arg(&s.script).env(
                "PATH",
                format!(
                    "{}:{}:{base_path}",
                    s.shim_dir.display(),
                    s.fake_dir.display()
                ),
            );
            shimmed(&mut cmd, &s, &s.fake);
            run(cmd);
        })
    });
    match (
        std::env::var_os("MIGRATE_TEST_KUBECONFIG"),
        std::env::var_os("MIGRATE_TEST_KUBECTL"),
    ) {
        (Some(kubeconfig), Some(kubectl)) => {
            let kubectl = PathBuf::from(kubectl);
            let real_dir = kubectl.parent().unwrap().to_path_buf();
            group.sample_size(10);
            group.measurement_time(Duration::from_secs(90));
            let script = |path: String| {
                let mut cmd = Command::new("/bin/sh");
                cmd.arg("-e")
                    .arg(&s.script)
                    .env("PATH", path)
                    .env("KUBECONFIG", &kubeconfig);
                cmd
            };
            group.bench_function(BenchmarkId::new("real-apiserver", "direct"), |b| {
                b.iter(|| run(script(format!("{}:{base_path}", real_dir.display()))))
            });
            group.bench_function(BenchmarkId::new("real-apiserver", "shim"), |b| {
                b.iter(|| {
                    let mut cmd = script(format!(
                        "{}:{}:{base_path}",
                        s.shim_dir.display(),
                        real_dir.display()
                    ));
                    shimmed(&mut cmd, &s, &kubectl);
                    run(cmd)
                })
            });
        }
        _ => println!(
            "tripwire bench: MIGRATE_TEST_KUBECONFIG/MIGRATE_TEST_KUBECTL unset, real-apiserver skipped"
        ),
    }
    group.finish();
    // Every shimmed call was recorded: a start and an end line each.
    let lines = std::fs::read_to_string(&s.report).unwrap().lines().count();
    println!("tripwire bench: {lines} report lines written");
}

fn main() {
    // Invoked through the `kubectl` symlink (when this binary is the shim).
    if let Some(status) = migrate_runner::tripwire::dispatch() {
        std::process::exit(status);
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
