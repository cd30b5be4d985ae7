//! The run protocol as a model, checked exhaustively (CONTRACT.md §5.5).
//!
//! What is modelled: runners that each take the run lock, read the ledger
//! and plan, then for each pending migration prove the lock, write the
//! outcomes decided so far with the next attempt mark (conditional on the
//! ledger revision they last saw: a 409 re-reads and retries), spawn the
//! script and let it finish; and a closing write. Faults, each at any
//! moment: a runner crashes (its script dies with it), the holder's lease
//! lapses (a runner paused past the TTL, or a frozen node: it does not
//! know), a write's reply is lost (the write landed; the runner retries it
//! with the same attempt token). Every backend keeps the lock in the ledger
//! object (the memory and file ledgers under their mutex or `flock`, the
//! ConfigMap in an annotation, the custom resource in its status), so there
//! is one shape: every write of a run is conditional on its lease being the
//! lock's and live, and renews it.
//!
//! Who may take the lock and whether a lease still holds it
//! ([`migration_core::fence`]) and how an attempt is counted
//! ([`AttemptMark::next`]) are the code's own functions, called here.
//!
//! A running script makes cluster calls, each a step of its own, through
//! the tripwire's shim, which lets one through only while the run can prove
//! its lease live ([`Protocol::shim_check`]).
//!
//! Properties, every one "always", outside the window CONTRACT.md states (a
//! runner whose lease lapsed since its last proof), except the two about
//! cluster calls, which hold inside it too:
//! - no cluster call of a script lands once its run lost the lock;
//! - no cluster call of a second copy interleaves with the first copy's
//!   calls (a copy's call after another copy's call after its own);
//! - a migration recorded is never executed again;
//! - no second copy of a migration starts while the first copy's runner
//!   still holds a live lease;
//! - no write of a run lands once its lock is lost;
//! - attempts equal executions, plus the attempts noted by a runner that
//!   crashed or stopped before spawning, plus those about to spawn.
//!
//! [`Protocol::fenced`] false is the code before the fence: no check in a
//! write, and holders as `--holder` gave them; the checker then finds
//! counterexamples (the tests show which).

use migration_core::fence::{self, Take};
use migration_core::ledger::AttemptMark;
use stateright::{Model, Property};

/// How many faults of each kind a run of the model may suffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Faults {
    /// Runner crashes.
    pub crashes: u8,
    /// Lease lapses (a holder paused past its TTL).
    pub lapses: u8,
    /// Writes that landed but whose reply was lost.
    pub lost_replies: u8,
}

/// The protocol, sized.
#[derive(Debug, Clone)]
pub struct Protocol {
    /// Runners started (each runs once).
    pub runners: usize,
    /// Pending migrations in the plan.
    pub migrations: usize,
    /// The fence: each write conditional on the run's live lease, and a
    /// holder unique per run. `false`: the code before it.
    pub fenced: bool,
    /// Every runner given the same `--holder`.
    pub same_holder: bool,
    /// The tripwire's lease check: a script's cluster call goes through
    /// only while its run can prove its lease is live (the deadline the
    /// runner advances with each renewal has not passed). `false`: the
    /// shim without that check.
    pub shim_check: bool,
    /// The faults allowed.
    pub faults: Faults,
}

/// Where one runner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started; takes the lock when it can.
    Idle,
    /// Holding the lock, going through its plan.
    Walking,
    /// The lock proved (or, unfenced, not), the write for migration `m` (or
    /// the closing write when `m` is the number of migrations) not yet
    /// acknowledged.
    Proved(u8),
    /// The attempt mark of `m` written: about to spawn.
    Marked(u8),
    /// The script of `m` runs.
    Running(u8),
    /// Finished its run.
    Done,
    /// Crashed.
    Crashed,
    /// Stopped on finding its lock lost.
    Stopped,
}

/// One runner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Runner {
    /// Where it is.
    pub phase: Phase,
    /// The holder it takes the lock as.
    pub holder: String,
    /// The tenure it holds, once it took the lock.
    pub tenure: Option<u8>,
    /// Migrations its plan has pending.
    pub pending: Vec<bool>,
    /// The next migration of its plan.
    pub next: u8,
    /// Outcomes decided and not written yet.
    pub staged: Vec<u8>,
    /// The ledger revision it last saw.
    pub seen: u8,
    /// Attempts it started (the source of its attempt tokens).
    pub attempts: u8,
    /// Whether the mark of its current migration is stored but not spawned.
    pub marked: bool,
    /// Whether its lease lapsed since its last proof: the stated window.
    pub window: bool,
    /// Whether its running script made a cluster call that landed.
    pub called: bool,
}

/// What went wrong, once it did (the properties read these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Violations {
    /// A migration already recorded was executed again.
    pub recorded_ran_again: bool,
    /// A second copy started while the first one's lease was live.
    pub concurrent_copies: bool,
    /// A write landed after its run lost the lock.
    pub write_after_loss: bool,
    /// A write landed after its run lost the lock, its runner in the window
    /// (possible only where the write does not check the lock: the code
    /// before the fence). What it recorded may make another runner's plan
    /// stale.
    pub window_write: bool,
    /// A script's cluster call landed after another copy's call of the same
    /// migration, which came after this copy's earlier call: two copies'
    /// effects interleaved.
    pub interleaved_calls: bool,
    /// A script's cluster call landed once its run could no longer prove
    /// its lease live.
    pub call_after_loss: bool,
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The lock: holder and tenure.
    pub lock: Option<(String, u8)>,
    /// Whether the holder's lease has lapsed.
    pub lapsed: bool,
    /// Tenures begun.
    pub tenures: u8,
    /// The ledger's revision.
    pub revision: u8,
    /// Whether each migration has an outcome recorded.
    pub recorded: Vec<bool>,
    /// Each migration's attempt mark: count and token.
    pub marks: Vec<Option<(u32, String)>>,
    /// Executions started of each migration (its effects).
    pub executions: Vec<u8>,
    /// The runner whose script made the last cluster call that landed, for
    /// each migration.
    pub last_caller: Vec<Option<u8>>,
    /// Attempts noted by a runner that crashed or stopped before spawning.
    pub noted_unspawned: Vec<u8>,
    /// The runners.
    pub runners: Vec<Runner>,
    /// Faults still allowed.
    pub faults: Faults,
    /// What went wrong.
    pub violations: Violations,
}

/// What can happen next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Runner takes the lock, reads the ledger and plans.
    Take(u8),
    /// Runner proves its lock before its next write.
    Prove(u8),
    /// Runner's write lands and the reply arrives.
    Write(u8),
    /// Runner's write lands and the reply is lost: it retries.
    WriteLostReply(u8),
    /// Runner's conditional write finds the ledger changed (409): it reads
    /// again and retries.
    Conflict(u8),
    /// Runner spawns its script.
    Spawn(u8),
    /// Runner's keeper renews the lock while the script runs.
    RenewWhileRunning(u8),
    /// Runner's script makes a cluster call (through the tripwire's shim).
    Call(u8),
    /// Runner's script finishes; its outcome is staged.
    Finish(u8),
    /// Runner crashes.
    Crash(u8),
    /// The lock holder's lease lapses.
    Lapse,
}

impl Protocol {
    fn holder(&self, r: usize) -> String {
        let given = if self.same_holder {
            "same".to_owned()
        } else {
            format!("runner-{r}")
        };
        // The code appends a random token (migration_core::lock::run_holder);
        // the model needs a fixed one per run.
        if self.fenced {
            format!("{given}/run-{r}")
        } else {
            given
        }
    }

    fn holds(state: &State, runner: &Runner) -> bool {
        let current = state.lock.as_ref().map(|(h, t)| (h.as_str(), *t));
        match (current, runner.tenure) {
            (Some((holder, tenure)), Some(mine)) => fence::holds(
                Some((holder, &tenure.to_string())),
                &runner.holder,
                &mine.to_string(),
            ),
            _ => false,
        }
    }

    /// The next migration `runner` has pending, or the number of migrations
    /// when none is left (its closing write).
    fn next_pending(&self, runner: &Runner) -> u8 {
        (runner.next..self.migrations as u8)
            .find(|m| runner.pending[*m as usize])
            .unwrap_or(self.migrations as u8)
    }

    /// A write of `r` lands: its staged outcomes and, before a spawn, the
    /// attempt mark of `m`.
    fn land(&self, state: &mut State, r: usize, m: u8) {
        let holds = Self::holds(state, &state.runners[r]);
        let runner = &state.runners[r];
        if !holds {
            if runner.window {
                state.violations.window_write = true;
            } else {
                state.violations.write_after_loss = true;
            }
        }
        let token = format!("{}/{m}/{}", runner.holder, runner.attempts);
        let staged = runner.staged.clone();
        for s in staged {
            state.recorded[s as usize] = true;
        }
        let mut marked = false;
        if (m as usize) < self.migrations {
            let current = state.marks[m as usize]
                .as_ref()
                .map(|(count, token)| AttemptMark {
                    count: *count,
                    token: token.clone(),
                });
            let next = AttemptMark::next(current.as_ref(), &token, 0);
            marked = current.is_none_or(|c| c.count != next.count);
            state.marks[m as usize] = Some((next.count, next.token));
        }
        state.revision += 1;
        let revision = state.revision;
        let renews = holds;
        if renews {
            state.lapsed = false;
        }
        let runner = &mut state.runners[r];
        runner.staged.clear();
        runner.marked |= marked;
        if renews {
            runner.window = false;
        }
        // The reply tells the revision written; a lost one does not.
        runner.seen = revision;
    }

    fn stop(state: &mut State, r: usize) {
        let runner = &mut state.runners[r];
        if runner.marked {
            if let Phase::Proved(m) | Phase::Marked(m) = runner.phase {
                state.noted_unspawned[m as usize] += 1;
            }
            runner.marked = false;
        }
        runner.phase = Phase::Stopped;
    }
}

/// Whether a runner at `phase` whose lease lapses is in the window
/// CONTRACT.md states: between the write that proved its lock and its
/// spawn, or while its script runs (the script does not stop with a frozen
/// runner). A runner whose lease lapses anywhere else has its next proof
/// (its next write, which checks the lease is live) still ahead of it.
fn in_the_window(phase: Phase) -> bool {
    matches!(phase, Phase::Marked(_) | Phase::Running(_))
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let runners = (0..self.runners)
            .map(|r| Runner {
                phase: Phase::Idle,
                holder: self.holder(r),
                tenure: None,
                pending: vec![false; self.migrations],
                next: 0,
                staged: Vec::new(),
                seen: 0,
                attempts: 0,
                marked: false,
                window: false,
                called: false,
            })
            .collect();
        vec![State {
            lock: None,
            lapsed: false,
            tenures: 0,
            revision: 0,
            recorded: vec![false; self.migrations],
            marks: vec![None; self.migrations],
            executions: vec![0; self.migrations],
            last_caller: vec![None; self.migrations],
            noted_unspawned: vec![0; self.migrations],
            runners,
            faults: self.faults,
            violations: Violations::default(),
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (r, runner) in state.runners.iter().enumerate() {
            let r8 = r as u8;
            match runner.phase {
                Phase::Idle => {
                    let current = state.lock.as_ref().map(|(h, _)| h.as_str());
                    if fence::take(current, state.lapsed, &runner.holder) != Take::Held {
                        actions.push(Action::Take(r8));
                    }
                }
                Phase::Walking => actions.push(Action::Prove(r8)),
                Phase::Proved(_) => {
                    if runner.seen == state.revision {
                        actions.push(Action::Write(r8));
                        if state.faults.lost_replies > 0 {
                            actions.push(Action::WriteLostReply(r8));
                        }
                    } else {
                        actions.push(Action::Conflict(r8));
                    }
                }
                Phase::Marked(_) => actions.push(Action::Spawn(r8)),
                Phase::Running(_) => {
                    actions.push(Action::Call(r8));
                    actions.push(Action::Finish(r8));
                    actions.push(Action::RenewWhileRunning(r8));
                }
                Phase::Done | Phase::Crashed | Phase::Stopped => continue,
            }
            if state.faults.crashes > 0 && runner.phase != Phase::Idle {
                actions.push(Action::Crash(r8));
            }
        }
        if state.lock.is_some() && !state.lapsed && state.faults.lapses > 0 {
            actions.push(Action::Lapse);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Take(r) => {
                let r = r as usize;
                let holder = state.runners[r].holder.clone();
                let current = state.lock.as_ref().map(|(h, _)| h.as_str());
                let tenure = match fence::take(current, state.lapsed, &holder) {
                    Take::Held => return None,
                    Take::Renew => state.lock.as_ref().map(|(_, t)| *t)?,
                    _ => {
                        state.tenures += 1;
                        state.tenures
                    }
                };
                state.lock = Some((holder, tenure));
                state.lapsed = false;
                let recorded = state.recorded.clone();
                let revision = state.revision;
                let runner = &mut state.runners[r];
                runner.tenure = Some(tenure);
                runner.pending = recorded.iter().map(|done| !done).collect();
                runner.seen = revision;
                runner.window = false;
                runner.phase = Phase::Walking;
            }
            Action::Prove(r) => {
                let r = r as usize;
                let m = self.next_pending(&state.runners[r]);
                if m as usize == self.migrations && state.runners[r].staged.is_empty() {
                    // Nothing left to write: the run only releases its lock.
                    if Self::holds(&state, &state.runners[r]) {
                        state.lock = None;
                        state.lapsed = false;
                    }
                    state.runners[r].phase = Phase::Done;
                    return Some(state);
                }
                let runner = &mut state.runners[r];
                if (m as usize) < self.migrations {
                    runner.attempts += 1;
                }
                runner.phase = Phase::Proved(m);
            }
            Action::Write(r) | Action::WriteLostReply(r) => {
                let r = r as usize;
                let Phase::Proved(m) = state.runners[r].phase else {
                    return None;
                };
                // The write is conditional on the lease: refused when another
                // holder has the lock, and when it lapsed (a stall since the
                // last write), since another runner may take it at any
                // moment. A write that lands renews it.
                let live = Self::holds(&state, &state.runners[r]) && !state.lapsed;
                if self.fenced && !live {
                    Self::stop(&mut state, r);
                    return Some(state);
                }
                self.land(&mut state, r, m);
                if matches!(action, Action::WriteLostReply(_)) {
                    state.faults.lost_replies -= 1;
                    // The runner does not know the revision it wrote.
                    state.runners[r].seen = state.revision.wrapping_sub(1);
                } else if (m as usize) < self.migrations {
                    state.runners[r].phase = Phase::Marked(m);
                } else {
                    let holds = Self::holds(&state, &state.runners[r]);
                    if holds {
                        state.lock = None;
                        state.lapsed = false;
                    }
                    state.runners[r].phase = Phase::Done;
                }
            }
            Action::Conflict(r) => {
                state.runners[r as usize].seen = state.revision;
            }
            Action::Spawn(r) => {
                let r = r as usize;
                let Phase::Marked(m) = state.runners[r].phase else {
                    return None;
                };
                let runner = &state.runners[r];
                if state.recorded[m as usize] && !runner.window && !state.violations.window_write {
                    state.violations.recorded_ran_again = true;
                }
                let live_copy =
                    !runner.window
                        && state.runners.iter().enumerate().any(|(other, o)| {
                            other != r && o.phase == Phase::Running(m) && !o.window
                        });
                if live_copy {
                    state.violations.concurrent_copies = true;
                }
                state.executions[m as usize] += 1;
                let runner = &mut state.runners[r];
                runner.marked = false;
                runner.called = false;
                runner.phase = Phase::Running(m);
            }
            Action::Call(r) => {
                let r = r as usize;
                let Phase::Running(m) = state.runners[r].phase else {
                    return None;
                };
                // The shim's check: the deadline passed once the lease
                // lapsed since the runner's last renewal (it is earlier than
                // the lapse), and a lock lost was lapsed first.
                let live = Self::holds(&state, &state.runners[r]) && !state.runners[r].window;
                if self.shim_check && !live {
                    // Refused: nothing lands; the script fails (its outcome
                    // is the runner's, whose record is fenced).
                    return None;
                }
                let last = state.last_caller[m as usize];
                if state.runners[r].called && last.is_some_and(|o| o as usize != r) {
                    state.violations.interleaved_calls = true;
                }
                if !live {
                    state.violations.call_after_loss = true;
                }
                if state.runners[r].called && last == Some(r as u8) && live {
                    // Nothing changes: not worth a state of its own.
                    return None;
                }
                state.last_caller[m as usize] = Some(r as u8);
                state.runners[r].called = true;
            }
            Action::RenewWhileRunning(r) => {
                let r = r as usize;
                if Self::holds(&state, &state.runners[r]) {
                    if !state.lapsed && !state.runners[r].window {
                        // Nothing changes: not worth a state of its own.
                        return None;
                    }
                    state.lapsed = false;
                    state.runners[r].window = false;
                } else {
                    // Renewal refused: the script is stopped, nothing recorded.
                    Self::stop(&mut state, r);
                }
            }
            Action::Finish(r) => {
                let r = r as usize;
                let Phase::Running(m) = state.runners[r].phase else {
                    return None;
                };
                let runner = &mut state.runners[r];
                runner.staged.push(m);
                runner.next = m + 1;
                runner.phase = Phase::Walking;
            }
            Action::Crash(r) => {
                state.faults.crashes -= 1;
                Self::stop(&mut state, r as usize);
                state.runners[r as usize].phase = Phase::Crashed;
            }
            Action::Lapse => {
                state.faults.lapses -= 1;
                state.lapsed = true;
                let lock = state.lock.clone();
                for runner in &mut state.runners {
                    let holds = match (&lock, runner.tenure) {
                        (Some((holder, tenure)), Some(mine)) => {
                            *holder == runner.holder && *tenure == mine
                        }
                        _ => false,
                    };
                    if holds && in_the_window(runner.phase) {
                        runner.window = true;
                    }
                }
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "a migration recorded is never executed again",
                |_, s: &State| !s.violations.recorded_ran_again,
            ),
            Property::always(
                "no second copy starts while the first one's lease is live",
                |_, s: &State| !s.violations.concurrent_copies,
            ),
            Property::always(
                "no write lands after its run lost the lock",
                |_, s: &State| !s.violations.write_after_loss,
            ),
            Property::always(
                "no write lands without its lock, even in the window",
                |_, s: &State| !s.violations.window_write,
            ),
            Property::always(
                "no cluster call of a script lands once its run lost the lock",
                |_, s: &State| !s.violations.call_after_loss,
            ),
            Property::always("no two copies' cluster calls interleave", |_, s: &State| {
                !s.violations.interleaved_calls
            }),
            Property::always("attempts never under-count executions", |_, s: &State| {
                (0..s.executions.len()).all(|m| {
                    s.marks[m].as_ref().map_or(0, |(c, _)| *c) >= u32::from(s.executions[m])
                })
            }),
            Property::always(
                "attempts equal executions, noted-unspawned and about-to-spawn",
                |_, s: &State| {
                    // A write in the window may retry a lost reply after
                    // another runner's mark: that execution counts twice.
                    s.violations.window_write || (0..s.executions.len()).all(|m| {
                        let count = s.marks[m].as_ref().map_or(0, |(c, _)| *c);
                        let about_to = s
                            .runners
                            .iter()
                            .filter(|r| {
                                r.marked
                                    && matches!(r.phase, Phase::Proved(x) | Phase::Marked(x) if x as usize == m)
                            })
                            .count() as u32;
                        count
                            == u32::from(s.executions[m])
                                + u32::from(s.noted_unspawned[m])
                                + about_to
                    })
                },
            ),
            Property::sometimes("every migration is recorded", |_, s: &State| {
                s.recorded.iter().all(|r| *r)
            }),
        ]
    }
}
