//! # benches
//!
//! Support for the engine's benchmarks (`cargo bench -p benches`) and for
//! the round-trip regression test: deterministic input generators
//! ([`inputs`]), a generated git repository ([`gitrepo`]), the counted
//! API round-trip scenarios ([`round_trips`]) and the ledger's density
//! ([`density`]). See `benches/README.md`.

// Generators of fixed inputs: a failure is a bug in the generator, and a
// panic naming it is the right answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod density;
pub mod gitrepo;
pub mod inputs;
pub mod round_trips;
