//! The fresh install: create the object, then write its status (two
//! requests), completing an object an interrupted create left behind.

use std::sync::Arc;

use migration_core::{LedgerEntry, LedgerError, Slug};
use migration_kube::{Attempts, Backoff, Class, WriteTarget, classify};
use serde_json::{Value, json};

use crate::CrdLedger;
use crate::ledger::seed_write;
use crate::resource::{GROUP, KIND, VERSION};
use crate::state::{
    CREATED_BY, CREATED_BY_ANNOTATION, Lifecycle, StatusWrite, View, plan_status_write,
};
use migration_kube::object_ledger::Conditional;

/// What a create request cannot show us but the API server adds to the
/// object (uid, timestamps, generation, resourceVersion, the creator's field
/// ownership record), for the budget check before the object exists.
const SERVER_METADATA_BYTES: u64 = 1024;

/// Where a create stands.
enum CreateStep {
    /// Send the create.
    Post,
    /// Look at what is there.
    Reread,
    /// Write the status of this uninitialized object.
    Complete(Arc<Value>),
}

impl CrdLedger {
    /// Creates the ledger holding `entries`; see [`Ledger::create`] and the
    /// crate documentation.
    ///
    /// [`Ledger::create`]: migration_core::Ledger::create
    pub(crate) async fn seed(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        const OP: &str = "create";
        let write = seed_write(&self.handle.writer.ledger, OP, entries)?;
        self.check_creation_budget(&write)?;
        let body = self.creation_body();
        let object = self.object();
        let mut step = CreateStep::Post;
        let mut attempts = Attempts::new();
        // Set once a completing status write was sent and its outcome is
        // unknown (a lost reply): finding exactly our entries afterwards
        // means it landed.
        let mut completion_in_doubt = false;
        loop {
            step = match step {
                CreateStep::Post => {
                    if !attempts.left(&self.handle.writer.retry) {
                        // The object keeps appearing and vanishing under us.
                        return Err(LedgerError::Conflict {
                            ledger: self.handle.writer.ledger.clone(),
                            operation: OP,
                            attempts: attempts.made(),
                        });
                    }
                    let posted = self
                        .handle
                        .writer
                        .retry
                        .retry(&mut attempts, OP, &object, || self.post(&body))
                        .await;
                    match posted {
                        Ok(created) => CreateStep::Complete(Arc::new(created)),
                        // Ours after a lost reply, or someone else's: look.
                        Err(e) if classify(&e) == Class::AlreadyExists => CreateStep::Reread,
                        Err(e) => return Err(self.error(OP, &object, &e)),
                    }
                }
                CreateStep::Reread => match self.fetch(OP, &mut attempts).await? {
                    None => CreateStep::Post,
                    Some(object) => {
                        let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
                        // After a lost reply, exactly our entries mean our
                        // write landed (or an identical one did): done.
                        let ours = completion_in_doubt
                            && view
                                .entries()
                                .map_or(write.entries.is_empty(), |e| *e == write.entries)
                            && view
                                .stored_contexts()
                                .map_or(write.contexts.is_empty(), |c| *c == write.contexts)
                            && view.attempt_count() == 0;
                        if view.lifecycle() == Lifecycle::Seeding {
                            CreateStep::Complete(object)
                        } else if ours {
                            return Ok(());
                        } else {
                            return Err(LedgerError::AlreadyExists {
                                ledger: self.handle.writer.ledger.clone(),
                            });
                        }
                    }
                },
                CreateStep::Complete(object) => {
                    let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
                    let planned = self.plan(OP, &view, &write)?;
                    attempts.count_one();
                    match self.patch_status(&planned.ops).await {
                        Ok(stored) => {
                            // The base of the run's next write.
                            self.handle.remember(Some(Arc::new(stored)));
                            return Ok(());
                        }
                        // Deleted under us: start over.
                        Err(e)
                            if self.is_absent(&e) && attempts.left(&self.handle.writer.retry) =>
                        {
                            CreateStep::Post
                        }
                        Err(e) => {
                            self.handle.remember(None);
                            if classify(&e) == Class::Transient {
                                completion_in_doubt = true;
                            }
                            Conditional(self).retry_after(OP, &e, attempts).await?;
                            CreateStep::Reread
                        }
                    }
                }
            };
        }
    }

    /// The object a fresh install creates: name, the created-by marker and
    /// the declared bundle. No status: the API server would drop it.
    fn creation_body(&self) -> Value {
        json!({
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": KIND,
            "metadata": {
                "name": self.name,
                "annotations": { CREATED_BY_ANNOTATION: CREATED_BY },
            },
            "spec": { "bundle": self.name },
        })
    }

    /// Checks the budget of a whole fresh install before anything is sent.
    fn check_creation_budget(&self, write: &StatusWrite) -> Result<(), LedgerError> {
        let mut object = self.creation_body();
        object["metadata"]["resourceVersion"] = json!("0");
        let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
        let planned = plan_status_write(&view, write, self.handle.clock.now())
            .map_err(|reason| self.unreadable(reason))?;
        let would_be = planned.would_be_bytes + SERVER_METADATA_BYTES;
        if would_be > self.budget {
            return Err(self.full(None, would_be));
        }
        Ok(())
    }
}
