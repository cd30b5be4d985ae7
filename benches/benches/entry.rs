//! `LedgerEntry::encode` / `LedgerEntry::decode` throughput on a realistic
//! entry (digest-pinned image reference, RFC 3339 timestamp, SHA-256 of the
//! script and of `lib/`), and on a `failed` entry carrying the runner's
//! maximal 4 KiB output tail. Before timing, prints the stored size of the
//! realistic records and how many fit the 1 MiB ConfigMap budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use benches::inputs::{attempt_mark, epoch, image, ok_entry};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ledger_configmap::CONFIGMAP_BUDGET_BYTES;
use migration_core::testing::fixtures::s;
use migration_core::{EntryState, LedgerEntry, Sha256Digest, Slug};

fn realistic() -> (Slug, LedgerEntry) {
    let slug = s("redis-failover-group-label");
    let entry = ok_entry(
        Sha256Digest::of(b"#!/bin/sh\n..."),
        Sha256Digest::of(b"lib"),
        "00042-v1.7.12",
        epoch(),
    );
    (slug, entry)
}

fn failed_with_tail() -> LedgerEntry {
    let (_, ok) = realistic();
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
        ..ok
    }
}

fn print_sizes() {
    let (slug, entry) = realistic();
    let key = migration_core::keys::entry_key(&slug);
    let value = entry.encode();
    let mark = attempt_mark(&slug, epoch()).encode();
    let mark_key = format!("a.{slug}");
    let fresh = LedgerEntry {
        state: EntryState::SkippedFreshInstall,
        attempts: 0,
        ..entry.clone()
    }
    .encode();
    let legacy = LedgerEntry {
        batch: Some("00000-legacy".into()),
        ..LedgerEntry::new(EntryState::Legacy, epoch())
    }
    .encode();
    let budget = CONFIGMAP_BUDGET_BYTES as usize;
    let ok_bytes = key.len() + value.len();
    let ran_bytes = ok_bytes + mark_key.len() + mark.len();
    let fresh_bytes = key.len() + fresh.len();
    let legacy_bytes = key.len() + legacy.len();
    println!("realistic entry ({}):\n  {key} = {value}", image());
    println!("  {mark_key} = {mark}");
    println!(
        "entry sizes (key + value, bytes): ok {ok_bytes}; ok + its attempt mark {ran_bytes}; \
         skipped-fresh-install {fresh_bytes}; legacy {legacy_bytes}; failed with 4 KiB tail {}",
        key.len() + failed_with_tail().encode().len()
    );
    println!(
        "fit in the {budget}-byte ConfigMap budget: {} ok entries alone; {} run migrations \
         (entry + attempt mark); {} fresh-install entries",
        budget / ok_bytes,
        budget / ran_bytes,
        budget / fresh_bytes
    );
}

fn encode_decode(c: &mut Criterion) {
    print_sizes();
    let mut group = c.benchmark_group("entry");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let (_, ok) = realistic();
    for (name, entry) in [("ok", ok), ("failed_4KiB_tail", failed_with_tail())] {
        let raw = entry.encode();
        assert_eq!(LedgerEntry::decode("m.x", &raw).unwrap(), entry);
        group.throughput(Throughput::Bytes(raw.len() as u64));
        group.bench_function(BenchmarkId::new("encode", name), |b| {
            b.iter(|| black_box(&entry).encode())
        });
        group.bench_function(BenchmarkId::new("decode", name), |b| {
            b.iter(|| LedgerEntry::decode("m.redis-failover-group-label", black_box(&raw)))
        });
    }
    group.finish();
}

criterion_group!(benches, encode_decode);
criterion_main!(benches);
