//! Suite 2: crash points, in process (a ledger that dies at its Nth call) and
//! as a SIGKILL of the real binary (feature `failpoints`).

use super::*;

/// Crashes at the Nth ledger call: before it takes effect, or right after.
/// From then on nothing works, as after a process death; the lock stays.
#[derive(Debug)]
struct Crashing {
    inner: MemoryLedger,
    state: Mutex<(usize, usize, bool, bool)>, // calls, crash_at, after, crashed
    /// The slug whose attempt mark was the last effect before the crash.
    noted_then_died: Mutex<Option<String>>,
}

impl Crashing {
    fn new(inner: MemoryLedger, crash_at: usize, after: bool) -> Self {
        Crashing {
            inner,
            state: Mutex::new((0, crash_at, after, false)),
            noted_then_died: Mutex::new(None),
        }
    }

    /// Ok(true): perform and then crash; Ok(false): perform; Err: crashed.
    fn gate(&self) -> Result<bool, LedgerError> {
        let mut st = self.state.lock().unwrap();
        if st.3 {
            return Err(crashed("process is dead"));
        }
        st.0 += 1;
        if st.0 == st.1 {
            st.3 = true;
            if !st.2 {
                return Err(crashed("process is dead"));
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// What every ledger call returns once the simulated process is dead.
fn crashed(message: &str) -> LedgerError {
    LedgerError::Permanent {
        ledger: "crashed".into(),
        operation: "crashed",
        message: message.into(),
    }
}

macro_rules! crashing {
    ($self:ident, $call:expr) => {{
        let crash_after = $self.gate()?;
        let result = $call;
        if crash_after {
            return Err(crashed("died after the effect"));
        }
        result
    }};
}

#[async_trait]
impl Ledger for Crashing {
    fn describe(&self) -> String {
        "crashing".into()
    }
    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        crashing!(self, self.inner.read().await)
    }
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        crashing!(self, self.inner.create(entries).await)
    }
    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        crashing!(self, self.inner.write(entries, mode).await)
    }
    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        let crash_after = self.gate()?;
        let result = self.inner.note_attempt(slug, token, floor).await;
        if crash_after {
            *self.noted_then_died.lock().unwrap() = Some(slug.to_string());
            return Err(crashed("died after the effect"));
        }
        result
    }
    async fn note_failure(
        &self,
        slug: &Slug,
        failure: &migration_core::last_failure::LastFailure,
    ) -> Result<(), LedgerError> {
        crashing!(self, self.inner.note_failure(slug, failure).await)
    }
}

#[async_trait]
impl migration_core::Lock for Crashing {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        crashing!(self, self.inner.acquire(holder, ttl).await)
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        crashing!(self, self.inner.renew(lease, ttl).await)
    }
    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        crashing!(self, self.inner.release(lease).await)
    }
}

#[test]
fn crashes_at_every_step_boundary_in_process_end_recorded_exactly_once() {
    let (calls, _) = baseline(Kind::Upgrade);
    let mut tried = 0;
    let mut overcounts = 0;
    for at in 1..=calls {
        for after in [false, true] {
            let scenario = Scenario::new(false);
            let tree = scenario.tree();
            let expiry_clock = shared_clock();
            let memory = MemoryLedger::with_clock(expiry_clock.clone());
            block_on(memory.create(&[])).unwrap();
            let clock = clock();
            let crashing = Crashing::new(memory.clone(), at, after);
            // A crash at the last call (releasing the lock) comes after every
            // record, so that run may report success; all others fail.
            let _ = run(&tree, &crashing, &clock, None);
            // The dead runner's lease lapses; a new runner completes the work.
            expiry_clock.advance(Duration::from_secs(120));
            run(&tree, &memory, &clock, None)
                .unwrap_or_else(|e| panic!("restart after crash at call {at}: {e}"));
            let snapshot = block_on(memory.read()).unwrap().unwrap();
            let window = crashing.noted_then_died.lock().unwrap().clone();
            overcounts += usize::from(window.is_some());
            check_final_allowing(&scenario, &snapshot, &UPGRADE, window.as_deref());
            tried += 1;
        }
    }
    figure(
        "crash-points",
        "in process",
        &format!(
            "{tried} crashes (before and after each of the {calls} ledger calls of an upgrade: lock, seeding, attempt marks, records), each followed by a restart; every migration recorded exactly once; attempts equal to real executions, except {overcounts} crash(es) between noting an attempt and spawning its script, where attempts exceed executions by exactly one"
        ),
    );
}

// The crash points exist only in a build with the `failpoints` feature
// (`cargo test --all-features`); a plain build ignores MIGRATE_FAILPOINT.
#[cfg(feature = "failpoints")]
#[test]
fn sigkill_of_the_real_binary_at_every_step_boundary_then_a_rerun_completes() {
    let mut points = vec![
        "before-lock".to_owned(),
        "after-lock".to_owned(),
        "after-prepare".to_owned(),
    ];
    for slug in ["good-one", "good-two"] {
        for p in ["before-script", "after-script", "after-record"] {
            points.push(format!("{p}:{slug}"));
        }
    }
    for point in &points {
        let scenario = Scenario::new(false);
        let ledger = scenario.file_ledger();
        let crashed = migrate_run(&scenario.root(), &ledger, &["--lock-ttl", "1"], Some(point));
        assert_eq!(
            crashed.status.code(),
            None,
            "{point}: the process must die by SIGKILL"
        );
        let rerun = migrate_run(&scenario.root(), &ledger, &["--lock-wait", "15"], None);
        assert_eq!(
            rerun.status.code(),
            Some(0),
            "{point}: {}",
            String::from_utf8_lossy(&rerun.stdout)
        );
        let snapshot = scenario.file_snapshot();
        check_final(&scenario, &snapshot, &UPGRADE);
    }
    figure(
        "crash-points",
        "real SIGKILL",
        &format!(
            "{} SIGKILLs of the migrate process ({}), each followed by a re-run; every migration recorded exactly once, attempts equal to real executions",
            points.len(),
            points.join(", ")
        ),
    );
}
