//! `LedgerEntry` encoding and decoding throughput on a realistic entry
//! (digest-pinned image reference, RFC 3339 timestamp, SHA-256 of the
//! script and of `lib/`), in the full form and in the compact form that
//! names a shared record, and on a `failed` entry carrying the runner's
//! maximal 4 KiB output tail. Before timing, prints the stored size of the
//! realistic records and how many fit the 1 MiB ConfigMap budget, built the
//! way the engine writes them ([`migration_core::testing::realistic`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use benches::density::fresh_install_capacity;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ledger_configmap::CONFIGMAP_BUDGET_BYTES;
use ledger_memory::MemoryLedger;
use migration_core::entry::{ContextIndex, Contexts};
use migration_core::ledger::AttemptMark;
use migration_core::testing::previous_engine;
use migration_core::testing::realistic::{
    self, fill_with_runner_writes, runner_entry, runner_token,
};
use migration_core::{EntryState, Ledger, LedgerEntry, keys};

fn realistic() -> LedgerEntry {
    runner_entry(42, 3, 42, EntryState::Ok)
}

fn failed_with_tail() -> LedgerEntry {
    LedgerEntry {
        state: EntryState::Failed,
        reason: Some("exit-status-1".into()),
        message: Some(
            "Error from server (NotFound): deployments.apps \"x\" not found\n"
                .repeat(70)
                .chars()
                .take(4096)
                .collect(),
        ),
        ..realistic()
    }
}

fn print_sizes() {
    let slug = realistic::slug(42);
    let entry = realistic();
    let key = keys::entry_key(&slug);
    let mark_key = keys::attempt_key(&slug);
    let full = entry.encode();
    let old_mark = AttemptMark {
        count: 1,
        token: runner_token(&slug, 42),
    }
    .encode();
    let mark = AttemptMark::next(None, &runner_token(&slug, 42), 0).encode();
    let mut index = ContextIndex::default();
    let stored = entry.stored(&mut index);
    let fresh = runner_entry(42, 3, 42, EntryState::SkippedFreshInstall).stored(&mut index);
    println!("realistic entry, full form (every engine before; still read):\n  {key} = {full}");
    println!("  {mark_key} = {old_mark}");
    println!("the same entry as this engine stores it, with its shared records:");
    println!("  {key} = {}", stored.value);
    for (id, text) in &stored.contexts {
        println!("  {} = {text}", keys::context_key(id));
    }
    println!("  {mark_key} = {mark}");
    let records: usize = stored
        .contexts
        .iter()
        .map(|(id, t)| keys::context_key(id).len() + t.len())
        .sum();
    println!(
        "sizes (key + value, bytes): full-form ok entry {} + mark {} = {}; compact ok entry {} + \
         mark {} = {}; compact skipped-fresh-install entry {}; its shared records {records} \
         (once per run and batch); failed with 4 KiB tail {}",
        key.len() + full.len(),
        mark_key.len() + old_mark.len(),
        key.len() + full.len() + mark_key.len() + old_mark.len(),
        key.len() + stored.value.len(),
        mark_key.len() + mark.len(),
        key.len() + stored.value.len() + mark_key.len() + mark.len(),
        key.len() + fresh.value.len(),
        key.len() + failed_with_tail().stored(&mut index).value.len(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for per_run in [1, 5, 10, 50, 200] {
        let ledger = MemoryLedger::new();
        rt.block_on(ledger.create(&[])).unwrap();
        let n = rt.block_on(fill_with_runner_writes(&ledger, per_run, 0, 20_000));
        println!(
            "fit in the {CONFIGMAP_BUDGET_BYTES}-byte ConfigMap budget: {n} runner-written \
             migrations (entry + attempt mark), {per_run} per run"
        );
    }
    for per_batch in [1, 5, 10, 50, 200] {
        println!(
            "fit in the {CONFIGMAP_BUDGET_BYTES}-byte ConfigMap budget: {} fresh-install \
             entries, {per_batch} per batch",
            fresh_install_capacity(per_batch, CONFIGMAP_BUDGET_BYTES)
        );
    }
}

fn encode_decode(c: &mut Criterion) {
    print_sizes();
    let mut group = c.benchmark_group("entry");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for (name, entry) in [
        ("ok", realistic()),
        ("failed_4KiB_tail", failed_with_tail()),
    ] {
        let raw = entry.encode();
        assert_eq!(LedgerEntry::decode("m.x", &raw).unwrap(), entry);
        group.throughput(Throughput::Bytes(raw.len() as u64));
        group.bench_function(BenchmarkId::new("encode_full", name), |b| {
            b.iter(|| black_box(&entry).encode())
        });
        group.bench_function(BenchmarkId::new("decode_full", name), |b| {
            b.iter(|| LedgerEntry::decode("m.redis-failover-label-00042", black_box(&raw)))
        });
        // The same value through the decoder of the engine before the
        // compact form (frozen), for a before/after in one run.
        assert!(previous_engine::decode(&raw).is_ok());
        group.bench_function(BenchmarkId::new("decode_full_previous_engine", name), |b| {
            b.iter(|| previous_engine::decode(black_box(&raw)))
        });
        let mut index = ContextIndex::default();
        let stored = entry.stored(&mut index);
        let mut contexts = Contexts::default();
        for (id, text) in &stored.contexts {
            contexts.insert_raw(id, text);
        }
        assert_eq!(
            LedgerEntry::decode_in("m.x", &stored.value, &contexts).unwrap(),
            entry
        );
        group.throughput(Throughput::Bytes(stored.value.len() as u64));
        group.bench_function(BenchmarkId::new("encode_compact", name), |b| {
            // The common case: its shared records are stored already.
            b.iter(|| black_box(&entry).stored(&mut index))
        });
        group.bench_function(BenchmarkId::new("decode_compact", name), |b| {
            b.iter(|| {
                LedgerEntry::decode_in(
                    "m.redis-failover-label-00042",
                    black_box(&stored.value),
                    &contexts,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, encode_decode);
criterion_main!(benches);
