//! Manifest generation.
//!
//! - `generate`: the pure function `migration_core::generate::generate` on
//!   a history of T tags × N slugs (T = 30 with N = 10^2..10^5; N = 10^3
//!   with T = 10, 100, 300), no git.
//! - `git_300_tags`: the git adapter `migrate_repo::git::Repo::history` on a
//!   generated repository of 300 tags (2 new scripts each, 600 at HEAD),
//!   next to the floor: listing the same 300 trees with plain
//!   `git ls-tree`, one process per tag.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::hint::black_box;
use std::time::Duration;

use benches::gitrepo::GitRepo;
use benches::inputs::history;
use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use migration_core::generate;

fn tag_entries(h: &migration_core::ReleaseHistory) -> u64 {
    h.line
        .iter()
        .chain(&h.other_tags)
        .map(|t| t.scripts.len() as u64)
        .sum()
}

fn pure(c: &mut Criterion) {
    let mut group = c.benchmark_group("generate");
    let series = [
        (30, 100),
        (30, 1_000),
        (30, 10_000),
        (30, 100_000),
        (10, 1_000),
        (100, 1_000),
        (300, 1_000),
    ];
    for (tags, slugs) in series {
        let h = history(tags, slugs);
        generate(&h).expect("the generated history generates");
        let entries = tag_entries(&h);
        common::size_settings(&mut group, entries as usize);
        group.throughput(Throughput::Elements(entries));
        group.bench_function(
            BenchmarkId::new(format!("T={tags}"), format!("N={slugs}")),
            |b| b.iter_batched(|| (), |()| generate(black_box(&h)), BatchSize::PerIteration),
        );
        drop(h);
    }
    group.finish();
}

fn git(c: &mut Criterion) {
    let repo = GitRepo::build(300, 2);
    let h = repo.history();
    assert_eq!(h.line.len(), 300);
    generate(&h).expect("the repository's history generates");
    let mut group = c.benchmark_group("git_300_tags");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("adapter_history", |b| b.iter(|| black_box(repo.history())));
    group.bench_function("ls_tree_floor", |b| {
        b.iter(|| black_box(repo.ls_tree_all()))
    });
    group.finish();
}

criterion_group!(benches, pure, git);
criterion_main!(benches);
