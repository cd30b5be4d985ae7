//! API round trips, counted (not timed): every scenario of
//! `benches::round_trips::all` against the in-process test API server,
//! printed as a table with the documented minimum of each. The same
//! scenarios are asserted in `tests/round_trips.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    // `cargo bench` passes `--bench`; a filter argument (as for criterion
    // targets) that does not match "round_trips" skips this target.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| "round_trips".contains(f.as_str())) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scenarios = runtime.block_on(benches::round_trips::all());
    println!("| scenario | requests | minimum | outcome |");
    println!("| --- | --- | --- | --- |");
    for s in &scenarios {
        println!(
            "| {} | {} | {} | {} |",
            s.name, s.counts, s.minimum, s.outcome
        );
    }
    for s in &scenarios {
        println!("\n{}:", s.name);
        for line in &s.counts.log {
            println!("  {line}");
        }
    }
}
