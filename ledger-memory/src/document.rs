//! The stored document shared by the in-memory and the file ledger.
//!
//! It mirrors a ConfigMap: `data` maps `version` and `m.<slug>` keys to
//! strings, each entry being its compact JSON. Keeping raw strings (not typed
//! entries) is what lets tests plant corrupt values and lets the file ledger
//! be rendered as a ConfigMap without translation.

use std::collections::BTreeMap;
use std::time::Duration;

use migration_core::ledger::{
    AttemptMark, Lease, LedgerError, LedgerSnapshot, Usage, WriteMode, WriteReport,
};
use migration_core::{LedgerEntry, Slug, Timestamp, keys};
use serde::{Deserialize, Serialize};

/// The format tag written into persisted documents.
pub const FORMAT: &str = "migration-ledger/v1";

/// The ledger object: present or not, with a revision counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Stored {
    pub(crate) revision: u64,
    pub(crate) data: BTreeMap<String, String>,
}

/// The run lock record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LockRecord {
    pub(crate) holder: String,
    pub(crate) token: String,
    pub(crate) acquired_at: Timestamp,
    pub(crate) expires_at: Timestamp,
}

/// Everything one ledger stores: the object (absent before a fresh install)
/// and the lock, which lives beside it like a Lease beside a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Document {
    pub(crate) format: String,
    pub(crate) ledger: Option<Stored>,
    pub(crate) lock: Option<LockRecord>,
    pub(crate) lock_generation: u64,
}

impl Default for Document {
    fn default() -> Self {
        Document {
            format: FORMAT.to_owned(),
            ledger: None,
            lock: None,
            lock_generation: 0,
        }
    }
}

/// Bytes a ConfigMap would count for `data`: every key plus every value.
pub(crate) fn data_size(data: &BTreeMap<String, String>) -> u64 {
    data.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
}

fn encode_all(
    name: &str,
    operation: &'static str,
    entries: &[(Slug, LedgerEntry)],
) -> Result<Vec<(String, String)>, LedgerError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (slug, entry) in entries {
        if !seen.insert(slug) {
            return Err(LedgerError::Permanent {
                ledger: name.to_owned(),
                operation,
                message: format!("slug '{slug}' appears twice in one write"),
            });
        }
        out.push((keys::entry_key(slug), entry.encode()));
    }
    Ok(out)
}

fn check_budget(
    name: &str,
    budget: Option<u64>,
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Result<(), LedgerError> {
    let Some(budget) = budget else { return Ok(()) };
    let would_be = data_size(after);
    if would_be > budget {
        return Err(LedgerError::Full {
            ledger: name.to_owned(),
            current_bytes: data_size(before),
            would_be_bytes: would_be,
            budget_bytes: budget,
            entry_count: before.keys().filter(|k| keys::is_entry_key(k)).count(),
        });
    }
    Ok(())
}

impl Document {
    pub(crate) fn snapshot(&self, budget: Option<u64>) -> Option<LedgerSnapshot> {
        self.ledger.as_ref().map(|stored| {
            let mut snapshot = LedgerSnapshot::from_raw_data(
                stored.data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                Some(stored.revision.to_string()),
            );
            snapshot.usage = budget.map(|budget_bytes| Usage {
                used_bytes: data_size(&stored.data),
                budget_bytes,
                record_overhead_bytes: 0,
            });
            snapshot
        })
    }

    pub(crate) fn create(
        &mut self,
        name: &str,
        budget: Option<u64>,
        entries: &[(Slug, LedgerEntry)],
    ) -> Result<(), LedgerError> {
        if self.ledger.is_some() {
            return Err(LedgerError::AlreadyExists {
                ledger: name.to_owned(),
            });
        }
        let data: BTreeMap<String, String> =
            encode_all(name, "create", entries)?.into_iter().collect();
        check_budget(name, budget, &BTreeMap::new(), &data)?;
        self.ledger = Some(Stored { revision: 1, data });
        Ok(())
    }

    pub(crate) fn write(
        &mut self,
        name: &str,
        budget: Option<u64>,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        let encoded = encode_all(name, "write", entries)?;
        let Some(stored) = self.ledger.as_mut() else {
            return Err(LedgerError::NotFound {
                ledger: name.to_owned(),
                operation: "write",
            });
        };
        let mut report = WriteReport::default();
        let mut next = stored.data.clone();
        for ((slug, _), (key, value)) in entries.iter().zip(encoded) {
            if mode == WriteMode::OnlyIfAbsent && next.contains_key(&key) {
                report.already_present.push(slug.clone());
                continue;
            }
            next.insert(key, value);
            report.written.push(slug.clone());
        }
        check_budget(name, budget, &stored.data, &next)?;
        if !report.written.is_empty() {
            stored.data = next;
            stored.revision += 1;
        }
        Ok(report)
    }

    pub(crate) fn note_attempt(
        &mut self,
        name: &str,
        budget: Option<u64>,
        slug: &Slug,
        token: &str,
        floor: u32,
    ) -> Result<u32, LedgerError> {
        let Some(stored) = self.ledger.as_mut() else {
            return Err(LedgerError::NotFound {
                ledger: name.to_owned(),
                operation: "note attempt",
            });
        };
        let key = keys::attempt_key(slug);
        let current = match stored.data.get(&key) {
            Some(raw) => {
                Some(
                    AttemptMark::decode(&key, raw).map_err(|c| LedgerError::Permanent {
                        ledger: name.to_owned(),
                        operation: "note attempt",
                        message: c.to_string(),
                    })?,
                )
            }
            None => None,
        };
        let next = AttemptMark::next(current.as_ref(), token, floor);
        if current.as_ref() == Some(&next) {
            return Ok(next.count);
        }
        let mut data = stored.data.clone();
        data.insert(key, next.encode());
        check_budget(name, budget, &stored.data, &data)?;
        stored.data = data;
        stored.revision += 1;
        Ok(next.count)
    }

    pub(crate) fn acquire(
        &mut self,
        name: &str,
        holder: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Lease, LedgerError> {
        match &mut self.lock {
            Some(lock) if lock.holder == holder => {
                lock.expires_at = now.plus(ttl);
                return Ok(lease_of(lock));
            }
            Some(lock) if lock.expires_at > now => {
                return Err(LedgerError::LockHeld {
                    ledger: name.to_owned(),
                    holder: lock.holder.clone(),
                    expires_at: lock.expires_at,
                });
            }
            _ => {}
        }
        self.lock_generation += 1;
        let lock = LockRecord {
            holder: holder.to_owned(),
            token: self.lock_generation.to_string(),
            acquired_at: now,
            expires_at: now.plus(ttl),
        };
        let lease = lease_of(&lock);
        self.lock = Some(lock);
        Ok(lease)
    }

    pub(crate) fn renew(
        &mut self,
        name: &str,
        lease: &Lease,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Lease, LedgerError> {
        match &mut self.lock {
            Some(lock) if lock.holder == lease.holder && lock.token == lease.token => {
                lock.expires_at = now.plus(ttl);
                Ok(lease_of(lock))
            }
            Some(lock) => Err(LedgerError::LockLost {
                ledger: name.to_owned(),
                holder: lease.holder.clone(),
                reason: format!("now held by {}", lock.holder),
            }),
            None => Err(LedgerError::LockLost {
                ledger: name.to_owned(),
                holder: lease.holder.clone(),
                reason: "the lock was released".to_owned(),
            }),
        }
    }

    /// Returns whether anything changed.
    pub(crate) fn release(&mut self, lease: &Lease) -> bool {
        let ours = self
            .lock
            .as_ref()
            .is_some_and(|l| l.holder == lease.holder && l.token == lease.token);
        if ours {
            self.lock = None;
        }
        ours
    }
}

fn lease_of(lock: &LockRecord) -> Lease {
    Lease {
        holder: lock.holder.clone(),
        token: lock.token.clone(),
        acquired_at: lock.acquired_at,
        expires_at: lock.expires_at,
    }
}
