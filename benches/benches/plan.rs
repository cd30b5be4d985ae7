//! Plan vs. the floor: `migration_core::plan` on a tree whose ledger holds N
//! entries with K = 10 migrations pending, next to the unavoidable work of
//! parsing the same manifest files and ledger values
//! (`Manifest::parse_files` + `LedgerSnapshot::from_raw_data`).
//!
//! Both routines get their inputs ready-made and have their outputs dropped
//! outside the timed region, so the two numbers compare like with like.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::hint::black_box;

use benches::inputs::PlanInput;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];
const PENDING: usize = 10;

fn plan_vs_floor(c: &mut Criterion) {
    let request = PlanInput::request();
    let context = PlanInput::context();
    let mut group = c.benchmark_group("plan_vs_parse");
    for n in SIZES {
        let input = PlanInput::build(n, PENDING);
        let snapshot = input.snapshot();
        let check = migration_core::plan(&input.tree, Some(&snapshot), &request, &context)
            .expect("the generated input plans");
        assert_eq!(check.pending.len(), PENDING);
        common::size_settings(&mut group, n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("plan", n), |b| {
            b.iter_batched(
                || (),
                |()| {
                    migration_core::plan(
                        black_box(&input.tree),
                        Some(black_box(&snapshot)),
                        &request,
                        &context,
                    )
                },
                BatchSize::PerIteration,
            )
        });
        group.bench_function(BenchmarkId::new("parse", n), |b| {
            b.iter_batched(
                || input.order_files.clone(),
                |files| PlanInput::parse_floor(black_box(files), black_box(&input.ledger_data)),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, plan_vs_floor);
criterion_main!(benches);
