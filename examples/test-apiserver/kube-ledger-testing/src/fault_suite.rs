//! The API-fault suite every Kubernetes ledger backend runs (feature
//! `testing`): transient errors, permanent errors, lost replies and slow
//! servers, injected by the in-process test API server. One list of cases,
//! parametrised by the resource, so the ConfigMap and the custom-resource
//! backend are held to exactly the same guarantees.
//!
//! A backend's test file implements [`FaultHarness`] and expands
//! [`crate::ledger_fault_tests!`]:
//!
//! ```ignore
//! struct ConfigMaps;
//! impl kube_ledger_testing::fault_suite::FaultHarness for ConfigMaps { /* ... */ }
//! kube_ledger_testing::ledger_fault_tests!(ConfigMaps);
//! ```
//!
//! Each case panics with a message naming the broken guarantee.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use migration_core::testing::{sample_entry, slug};
use migration_core::{EntryState, Ledger, LedgerEntry, LedgerError, Slug, Timestamp, WriteMode};
use serde_json::{Value, json};
use test_apiserver::{FaultRule, LostReply, TestApiServer, Verb};

use migration_kube::RetryPolicy;

/// Tries per operation of the ledgers under test: the count the give-up
/// case expects on the wire.
pub const TRIES: u32 = 6;

/// Asserts that `err` is a permanent error of `operation` (`read`, `write`, ...); `why` goes
/// into the panic message.
///
/// # Panics
/// If it is another error.
pub fn assert_permanent(err: &LedgerError, operation: &str, why: impl std::fmt::Display) {
    assert!(
        matches!(err, LedgerError::Permanent { operation: op, .. } if *op == operation),
        "{why}: expected a permanent {operation} error, got {err:?}"
    );
}

/// Where a backend's requests go, and what its errors call the object it
/// writes: the names the cases inject faults into and look for.
#[derive(Debug, Clone, Copy)]
pub struct Names {
    /// The resource the ledger reads and creates, as the test server counts
    /// requests (`configmaps`, `migrationledgers`).
    pub resource: &'static str,
    /// The resource its writes go to (`configmaps`,
    /// `migrationledgers/status`).
    pub writes: &'static str,
    /// What the ledger's errors call the object its writes go to
    /// (`configmap cozystack-version`, `migrationledger cozystack/status`).
    pub written_object: &'static str,
}

/// What the suite needs to know about a backend's resource.
pub trait FaultHarness: Send + Sync {
    /// The backend's resources and the object its errors name.
    const NAMES: Names;

    /// [`Names::resource`] of [`FaultHarness::NAMES`].
    fn resource(&self) -> &'static str {
        Self::NAMES.resource
    }

    /// [`Names::writes`] of [`FaultHarness::NAMES`].
    fn writes(&self) -> &'static str {
        Self::NAMES.writes
    }

    /// [`Names::written_object`] of [`FaultHarness::NAMES`].
    fn written_object(&self) -> &'static str {
        Self::NAMES.written_object
    }

    /// Makes `server` serve the resource (nothing for a built-in kind).
    fn serve(&self, server: &TestApiServer) {
        let _ = server;
    }

    /// A new handle on the ledger through `client`, trying each operation
    /// as `retry` says. Every handle names the same stored ledger.
    fn ledger(&self, client: kube::Client, retry: RetryPolicy) -> Arc<dyn Ledger>;

    /// The stored entry of `slug`, read from the server's storage, in its
    /// stored form (`None` if absent).
    fn stored_entry(&self, server: &TestApiServer, slug: &Slug) -> Option<Value>;

    /// The stored form of `entry`, which names no shared record (no batch,
    /// image or `lib/` digest).
    fn entry_as_stored(&self, entry: &LedgerEntry) -> Value;

    /// The stored attempt mark of `slug`, as JSON (`None` if absent).
    fn stored_attempt(&self, server: &TestApiServer, slug: &Slug) -> Option<Value>;
}

/// A server serving the harness's resource.
/// Makes every `verb` request to `resource` answer `code` with `reason`.
fn respond_always(server: &TestApiServer, verb: Verb, resource: &str, code: u16, reason: &str) {
    server
        .faults()
        .inject(FaultRule::on(verb, resource).always().respond(code, reason));
}

/// Makes the next `verb` request to `resource` answer `code` with `reason`.
fn respond_once(server: &TestApiServer, verb: Verb, resource: &str, code: u16, reason: &str) {
    server
        .faults()
        .inject(FaultRule::on(verb, resource).once().respond(code, reason));
}

/// Makes the next `verb` request to `resource` take effect but lose its reply as `how`.
fn lose_reply_once(server: &TestApiServer, verb: Verb, resource: &str, how: LostReply) {
    server
        .faults()
        .inject(FaultRule::on(verb, resource).once().lost_reply(how));
}

/// An existing ledger whose every write is answered `code` with `reason`, a handle on it, and
/// the error a replacing write of `s-1` ends in.
async fn a_write_always_answered(
    h: &impl FaultHarness,
    code: u16,
    reason: &str,
) -> (TestApiServer, Arc<dyn Ledger>, LedgerError) {
    let server = existing(h).await;
    respond_always(&server, Verb::Patch, h.writes(), code, reason);
    let l = ledger(h, &server);
    let err = l
        .write(&one(1, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap_err();
    (server, l, err)
}

/// The write requests (patches of [`Names::writes`]) `server` counted.
fn writes(h: &impl FaultHarness, server: &TestApiServer) -> usize {
    server.requests().count(Verb::Patch, h.writes())
}

async fn served(h: &impl FaultHarness) -> TestApiServer {
    let server = TestApiServer::start().await;
    h.serve(&server);
    server
}

/// A client for `server` as the product builds one ([`migration_kube::client`]: no
/// retry layer of kube's own under the ledger's).
fn client(server: &TestApiServer) -> kube::Client {
    migration_kube::client::from_config(server.config()).unwrap()
}

/// A handle trying [`TRIES`] times without waiting.
fn ledger(h: &impl FaultHarness, server: &TestApiServer) -> Arc<dyn Ledger> {
    h.ledger(client(server), RetryPolicy::immediate(TRIES))
}

/// A server holding an empty ledger, created through another handle (so
/// the handle under test has seen nothing), with the request counters
/// reset.
async fn existing(h: &impl FaultHarness) -> TestApiServer {
    let server = served(h).await;
    ledger(h, &server).create(&[]).await.unwrap();
    server.requests().reset();
    server
}

fn one(n: usize, state: EntryState) -> [(Slug, LedgerEntry); 1] {
    [(slug(n), sample_entry(state, n as u32))]
}

/// A 500 on create, two 500s on the write and a 503 on its read are retried
/// until the write lands: three writes on the wire.
pub async fn transient_errors_are_retried_and_succeed(h: &impl FaultHarness) {
    let server = served(h).await;
    respond_once(&server, Verb::Create, h.resource(), 500, "InternalError");
    ledger(h, &server)
        .create(&one(0, EntryState::Ok))
        .await
        .expect("a create is retried after a 500");
    server.faults().inject(
        FaultRule::on(Verb::Patch, h.writes())
            .times(2)
            .respond(500, "InternalError"),
    );
    respond_once(&server, Verb::Get, h.resource(), 503, "ServiceUnavailable");
    server.requests().reset();
    let report = ledger(h, &server)
        .write(&one(1, EntryState::Ok), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    assert_eq!(report.written, [slug(1)]);
    assert_eq!(writes(h, &server), 3, "two 500s, then success");
}

/// A write that always meets a 500 gives up after exactly [`TRIES`]
/// writes, as a transient error naming the ledger.
pub async fn transient_errors_give_up_after_bounded_attempts_and_say_so(h: &impl FaultHarness) {
    let (server, l, err) = a_write_always_answered(h, 500, "InternalError").await;
    assert!(
        matches!(
            err,
            LedgerError::Transient {
                operation: "write",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(&l.describe()), "{err}");
    assert_eq!(
        writes(h, &server),
        TRIES as usize,
        "one write per try, no more, no fewer"
    );
}

/// A write that always meets a 503 or a 429 (what kube's own retry layer
/// would retry) also costs exactly [`TRIES`] writes: the ledger's retries
/// are the only layer.
pub async fn kube_retryable_errors_cost_one_request_per_try(h: &impl FaultHarness) {
    for (code, reason) in [(503, "ServiceUnavailable"), (429, "TooManyRequests")] {
        let (server, _, err) = a_write_always_answered(h, code, reason).await;
        assert!(
            matches!(err, LedgerError::Transient { .. }),
            "{code}: {err:?}"
        );
        assert_eq!(
            writes(h, &server),
            TRIES as usize,
            "{code}: one write per try of the ledger's, none added below it"
        );
    }
}

/// A 403 on a write, a read or a create is final at once and names the
/// operation, the object and the status.
pub async fn permanent_errors_fail_closed_naming_operation_and_object(h: &impl FaultHarness) {
    let (server, l, err) = a_write_always_answered(h, 403, "Forbidden").await;
    let text = err.to_string();
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
    assert!(
        text.contains("write") && text.contains(h.written_object()) && text.contains("403"),
        "{text}"
    );
    assert_eq!(writes(h, &server), 1, "a permanent error is not retried");

    server.faults().clear();
    respond_always(&server, Verb::Get, h.resource(), 403, "Forbidden");
    server.requests().reset();
    let err = l.read().await.unwrap_err();
    assert_permanent(&err, "read", "an error is never an absent ledger");
    assert_eq!(
        server.requests().count(Verb::Get, h.resource()),
        1,
        "a permanent error on a read is not retried"
    );

    let other = served(h).await;
    other.faults().inject(
        FaultRule::on(Verb::Create, h.resource())
            .always()
            .respond(403, "Forbidden"),
    );
    let l = ledger(h, &other);
    let err = l.create(&[]).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("create") && text.contains(&l.describe()) && text.contains("403"),
        "{text}"
    );
    assert_eq!(
        other.requests().count(Verb::Create, h.resource()),
        1,
        "a permanent error on a create is not retried"
    );
}

/// An only-if-absent write whose reply was lost (the write landed) finds
/// its own entry on the retry and reports it present, unchanged.
pub async fn a_lost_reply_on_an_only_if_absent_write_never_duplicates_or_overwrites(
    h: &impl FaultHarness,
) {
    let server = existing(h).await;
    lose_reply_once(&server, Verb::Patch, h.writes(), LostReply::DropConnection);
    // No shared fields, so the stored form is the entry's alone.
    let entry = LedgerEntry::new(EntryState::Legacy, Timestamp::from_unix(1));
    let report = ledger(h, &server)
        .write(&[(slug(1), entry.clone())], WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    // The first patch landed; the retry re-read and found the key present.
    assert_eq!(report.already_present, [slug(1)]);
    assert_eq!(
        h.stored_entry(&server, &slug(1)),
        Some(h.entry_as_stored(&entry))
    );
}

/// A replacing write answered with a 500 although it landed is written
/// again and leaves exactly the entry written.
pub async fn a_lost_reply_on_a_replacing_write_leaves_exactly_the_entry_written(
    h: &impl FaultHarness,
) {
    let server = existing(h).await;
    lose_reply_once(&server, Verb::Patch, h.writes(), LostReply::InternalError);
    let entry = LedgerEntry {
        attempts: 1,
        ..LedgerEntry::new(EntryState::Ok, Timestamp::from_unix(1))
    };
    ledger(h, &server)
        .write(&[(slug(1), entry.clone())], WriteMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        h.stored_entry(&server, &slug(1)),
        Some(h.entry_as_stored(&entry))
    );
}

/// Noting an attempt whose reply was lost counts the execution once: the
/// retry finds the token already noted.
pub async fn a_lost_reply_on_note_attempt_counts_the_execution_once(h: &impl FaultHarness) {
    let server = existing(h).await;
    lose_reply_once(&server, Verb::Patch, h.writes(), LostReply::InternalError);
    let l = ledger(h, &server);
    assert_eq!(l.note_attempt(&slug(1), "run-7", 0).await.unwrap(), 1);
    assert_eq!(
        h.stored_attempt(&server, &slug(1)),
        Some(json!({"count": 1, "token": migration_core::ledger::fingerprint("run-7")}))
    );
}

/// A run's step (the record of one migration and the attempt mark of the
/// next) whose reply was lost: the retry finds it stored, and neither the
/// record nor the attempt is written twice or counted twice.
pub async fn a_lost_reply_on_a_step_leaves_its_record_and_counts_the_attempt_once(
    h: &impl FaultHarness,
) {
    let server = existing(h).await;
    lose_reply_once(&server, Verb::Patch, h.writes(), LostReply::InternalError);
    let l = ledger(h, &server);
    let record = one(1, EntryState::Ok);
    let step = step_of(&record, "run-7");
    assert_eq!(l.write_step(&step).await.unwrap().attempts, Some(1));
    // The record names shared records (its image and `lib/` digest), so it
    // is compared as the ledger reads it back, whole.
    let read = l.read().await.unwrap().unwrap();
    assert_eq!(read.entry(&slug(1)), Some(&record[0].1));
    assert_eq!(
        h.stored_attempt(&server, &slug(2)),
        Some(json!({"count": 1, "token": migration_core::ledger::fingerprint("run-7")}))
    );
}

/// A step that meets a 409 (someone wrote the ledger since this handle saw
/// it) reads again and writes on what is there, losing nothing.
pub async fn a_conflict_on_a_step_reads_again_and_loses_no_update(h: &impl FaultHarness) {
    let server = existing(h).await;
    let l = ledger(h, &server);
    l.read().await.unwrap();
    // Another handle writes meanwhile: this one's copy is stale.
    ledger(h, &server)
        .write(&one(5, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    let record = one(1, EntryState::Ok);
    assert_eq!(
        l.write_step(&step_of(&record, "run-8"))
            .await
            .unwrap()
            .attempts,
        Some(1)
    );
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.entry(&slug(1)), Some(&record[0].1));
    assert!(
        snapshot.entry(&slug(5)).is_some(),
        "the other write was lost"
    );
    assert_eq!(snapshot.attempts_started.get(&slug(2)), Some(&1));
}

/// The step recording `record` and noting `s-2`'s attempt under `token`.
fn step_of<'a>(
    record: &'a [(Slug, LedgerEntry)],
    token: &'a str,
) -> migration_core::step::StepWrite<'a> {
    static NEXT: std::sync::LazyLock<Slug> = std::sync::LazyLock::new(|| slug(2));
    migration_core::step::StepWrite {
        records: record,
        attempt: Some(migration_core::step::AttemptNote {
            slug: &NEXT,
            token,
            floor: 0,
        }),
        mode: migration_core::step::StepMode::Overwrite,
        failure: None,
    }
}

/// A read that outlasts the client's timeout is retried and succeeds.
pub async fn a_slow_server_times_out_and_the_retry_succeeds(h: &impl FaultHarness) {
    let server = existing(h).await;
    server.faults().inject(
        FaultRule::on(Verb::Get, h.resource())
            .once()
            .delay(Duration::from_secs(3)),
    );
    let mut config = server.config();
    config.read_timeout = Some(Duration::from_millis(500));
    let client = migration_kube::client::from_config(config).unwrap();
    let l = h.ledger(client, RetryPolicy::immediate(4));
    assert!(l.read().await.unwrap().is_some());
}

/// Expands to one `#[tokio::test]` per fault case, in a module `faults`.
/// `$harness` names a unit struct implementing [`FaultHarness`].
#[macro_export]
macro_rules! ledger_fault_tests {
    ($harness:ident) => {
        $crate::ledger_fault_tests!(@tests $harness;
            transient_errors_are_retried_and_succeed,
            transient_errors_give_up_after_bounded_attempts_and_say_so,
            kube_retryable_errors_cost_one_request_per_try,
            permanent_errors_fail_closed_naming_operation_and_object,
            a_lost_reply_on_an_only_if_absent_write_never_duplicates_or_overwrites,
            a_lost_reply_on_a_replacing_write_leaves_exactly_the_entry_written,
            a_lost_reply_on_note_attempt_counts_the_execution_once,
            a_lost_reply_on_a_step_leaves_its_record_and_counts_the_attempt_once,
            a_conflict_on_a_step_reads_again_and_loses_no_update,
            a_slow_server_times_out_and_the_retry_succeeds,
        );
    };
    (@tests $harness:ident; $($case:ident),* $(,)?) => {
        mod faults {
            $(
                #[tokio::test]
                async fn $case() {
                    $crate::fault_suite::$case(&super::$harness).await;
                }
            )*
        }
    };
}
