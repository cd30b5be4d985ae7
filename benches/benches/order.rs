//! `migration_core::order::stable_topo_sort` of one batch of N slugs with
//! E `requires` edges (E = 0, N, 4N): expected O((N + E) log N).
//!
//! The slugs arrive sorted, as `generate` passes a batch; edges connect
//! random pairs consistently with a random hidden order, so the sort has
//! real reordering to do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::hint::black_box;

use benches::inputs::graph;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use migration_core::stable_topo_sort;

const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];

fn topo_sort(c: &mut Criterion) {
    let mut group = c.benchmark_group("topo_sort");
    for n in SIZES {
        for (label, e) in [("E=0", 0), ("E=N", n), ("E=4N", 4 * n)] {
            let (slugs, edges) = graph(n, e, 42);
            assert_eq!(stable_topo_sort(&slugs, &edges).unwrap().len(), n);
            common::size_settings(&mut group, n);
            group.throughput(Throughput::Elements((n + e) as u64));
            group.bench_function(BenchmarkId::new(label, n), |b| {
                b.iter_batched(
                    || (),
                    |()| stable_topo_sort(black_box(&slugs), black_box(&edges)),
                    BatchSize::PerIteration,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, topo_sort);
criterion_main!(benches);
