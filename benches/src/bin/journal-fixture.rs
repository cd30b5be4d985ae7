//! Writes a file ledger holding `N` applied migrations `m-00001`… through the
//! file ledger itself, for the memory measurements of `benches/README.md`
//! ("Plan memory at 10⁵"), where applying 10⁵ scripts takes minutes:
//!
//! ```sh
//! cargo run --release -p benches --bin journal-fixture -- PATH N compact  # as the runner writes now
//! cargo run --release -p benches --bin journal-fixture -- PATH N full     # as the runner wrote before the compact form
//! ```
//!
//! `compact` makes the runner's steps (a migration's record with the next
//! one's attempt mark, one append each), with the entries `migrate run`
//! records for the trees `benches/peers.sh` makes: the scripts' digest, an
//! empty `lib/`, batch `00001-v1`. `full` plants what the runner wrote up to
//! e5c2eda: full-form entries and attempt marks carrying the whole token, a
//! mark and then an entry per migration. `PATH` must not exist.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ledger_file::FileLedger;
use migration_core::ledger::AttemptMark;
use migration_core::step::{AttemptNote, StepMode, StepWrite};
use migration_core::{EntryState, Ledger, LedgerEntry, Sha256Digest, Slug, Timestamp, keys};

/// The digest of the script `benches/peers.sh` writes.
const SCRIPT_SHA256: &str = "b8e4fddccbadcafcf5cb86717628d84967bf5293982bcbb837aef9799389a922";

fn slug(i: usize) -> Slug {
    Slug::parse(&format!("m-{i:05}")).unwrap()
}

fn token(slug: &Slug, i: usize) -> String {
    format!("migrate-runner-host-0123456789abcdef/{slug}/1764600000{i:09}/{i}")
}

fn entry() -> LedgerEntry {
    LedgerEntry {
        sha256: Some(SCRIPT_SHA256.parse().unwrap()),
        lib_sha256: Some(Sha256Digest::of(b"")),
        batch: Some("00001-v1".into()),
        attempts: 1,
        ..LedgerEntry::new(EntryState::Ok, Timestamp::from_unix(1_796_136_600))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, n, form] = args.as_slice() else {
        eprintln!("usage: journal-fixture PATH N compact|full");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N: a whole number");
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} exists: refusing to write over it"
    );
    let ledger = FileLedger::new(path).with_budget(None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match form.as_str() {
        "compact" => rt.block_on(async {
            ledger.create(&[]).await.unwrap();
            for i in 1..=n + 1 {
                let done = [(slug(i - 1), entry())];
                let next = slug(i);
                let token = token(&next, i);
                let step = StepWrite {
                    records: if i == 1 { &[] } else { &done },
                    attempt: (i <= n).then_some(AttemptNote {
                        slug: &next,
                        token: &token,
                        floor: 0,
                    }),
                    mode: StepMode::Overwrite,
                    failure: None,
                };
                ledger.write_step(&step).await.unwrap();
            }
        }),
        "full" => {
            for i in 1..=n {
                let slug = slug(i);
                let mark = AttemptMark {
                    count: 1,
                    token: token(&slug, i),
                };
                ledger
                    .put_raw(&keys::attempt_key(&slug), &mark.encode())
                    .unwrap();
                ledger
                    .put_raw(&keys::entry_key(&slug), &entry().encode())
                    .unwrap();
            }
        }
        other => {
            eprintln!("form must be compact or full, not {other}");
            std::process::exit(2);
        }
    }
}
