//! Reporting the operator's readiness on ledgers that keep conditions.

/// Where the operator's readiness goes, for ledger backends that keep
/// conditions. Called after every decision with a distinct reason per
/// situation (AllMigrationsDone, MigrationRunning, BackingOff,
/// RetriesExhausted, CorruptEntry, IndexInvalid, IndexMissing,
/// LedgerMissing, MissingRights).
#[async_trait::async_trait]
pub trait ConditionReporter: Send + Sync {
    /// Reports the current readiness.
    async fn report(&self, reason: &'static str, ready: bool, message: String);
}

/// Reports the operator's readiness as the `BackgroundMigrations` condition
/// of a `MigrationLedger` (the ledger keeps `Ready` for its own entries).
/// Only changes are written, so a steady state costs no requests.
pub struct CrdConditions {
    ledger: ledger_crd::CrdLedger,
    last: std::sync::Mutex<Option<(&'static str, bool, String)>>,
}

/// The condition type the operator owns on a `MigrationLedger`.
pub const OPERATOR_CONDITION: &str = "BackgroundMigrations";

impl CrdConditions {
    /// Reports on `ledger`.
    pub fn new(ledger: ledger_crd::CrdLedger) -> Self {
        CrdConditions {
            ledger,
            last: std::sync::Mutex::new(None),
        }
    }
}

#[async_trait::async_trait]
impl ConditionReporter for CrdConditions {
    async fn report(&self, reason: &'static str, ready: bool, message: String) {
        let current = Some((reason, ready, message.clone()));
        if *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            == current
        {
            return;
        }
        let condition = ledger_crd::LedgerCondition {
            type_: OPERATOR_CONDITION.into(),
            status: if ready {
                ledger_crd::ConditionStatus::True
            } else {
                ledger_crd::ConditionStatus::False
            },
            reason: reason.into(),
            message,
        };
        match self.ledger.set_condition(&condition).await {
            Ok(()) => {
                *self
                    .last
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = current
            }
            Err(e) => tracing::warn!(error = %e, reason, "could not report the condition"),
        }
    }
}
