//! The fence's rules, written once: who may take the run lock, whether a
//! lease still holds it, and how a run proves it before a write. The
//! backends ([`crate::Lock`] implementations), the run ([`crate::Run`]) and
//! the protocol model (`migration-core/protocol-model`, checked
//! exhaustively) all decide by these functions, so what the model proves is
//! what the code does (CONTRACT.md §5.5).

/// What taking the run lock does, given who holds it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Take {
    /// The lock is held by the same holder: its tenure goes on, renewed (a
    /// take whose reply was lost, retried). Holders are unique per run
    /// ([`crate::lock::run_holder`]), so this is never another run.
    Renew,
    /// Another holder holds a live lease: refused, nothing changes.
    Held,
    /// Free, or lapsed: a new tenure begins, with a new token.
    NewTenure,
}

/// What taking the lock as `holder` does while `current` holds it (`None`:
/// free), `lapsed` telling whether that holder's lease has expired.
pub fn take(current: Option<&str>, lapsed: bool, holder: &str) -> Take {
    match current {
        Some(c) if c == holder => Take::Renew,
        Some(_) if !lapsed => Take::Held,
        _ => Take::NewTenure,
    }
}

/// Whether the lease of `holder` in the tenure `token` still holds the lock
/// whose holder and token are `current`. A lapsed lease nobody took over
/// still holds it: only a take ends a tenure.
pub fn holds(current: Option<(&str, &str)>, holder: &str, token: &str) -> bool {
    current == Some((holder, token))
}

/// How a run proves its lock before each of its writes (the attempt mark,
/// the closing write): no write lands and no script starts once the lock is
/// lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Proof {
    /// The lock lives in the ledger object: the write itself is conditional
    /// on it, so the write is the proof.
    InTheWrite,
    /// The lock lives beside the ledger: renewing it right before the write
    /// is the proof, and the write carries the lease for a backend that can
    /// check it again in the same atomic operation.
    RenewFirst,
}

/// The proof a run's writes need, by where its lock lives
/// ([`crate::Lock::kept_in_ledger`]).
pub fn proof(kept_in_ledger: bool) -> Proof {
    if kept_in_ledger {
        Proof::InTheWrite
    } else {
        Proof::RenewFirst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_lease_is_taken_over_and_a_live_one_refuses() {
        assert_eq!(take(None, false, "a"), Take::NewTenure);
        assert_eq!(take(Some("b"), false, "a"), Take::Held);
        assert_eq!(take(Some("b"), true, "a"), Take::NewTenure);
        assert_eq!(take(Some("a"), true, "a"), Take::Renew);
        assert!(holds(Some(("a", "1")), "a", "1"));
        assert!(!holds(Some(("a", "2")), "a", "1"));
        assert!(!holds(None, "a", "1"));
        assert_eq!(proof(true), Proof::InTheWrite);
        assert_eq!(proof(false), Proof::RenewFirst);
    }
}
