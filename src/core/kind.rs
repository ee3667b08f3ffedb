//! The three kinds of queue and how each scores and merges a pushed message, and the
//! bounds of what a push accepts.

use crate::core::error::{Bound, Result, RmqError, Unit};

/// A queue's kind, fixed by its first push and kept until it is completely empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Range,
    Priority,
    Fixed,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Range => "range",
            Kind::Priority => "priority",
            Kind::Fixed => "fixed",
        }
    }

    pub fn from_name(s: &[u8]) -> Option<Kind> {
        match s {
            b"range" => Some(Kind::Range),
            b"priority" => Some(Kind::Priority),
            b"fixed" => Some(Kind::Fixed),
            _ => None,
        }
    }

    /// Priority queues pop highest score first and have no due time; the others pop earliest
    /// due first and only once due.
    pub fn is_timed(self) -> bool {
        self != Kind::Priority
    }
}

/// How a push scores its messages (the option given to RMQ.PUSH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushMode {
    /// Due `ms` after the first push; a duplicate keeps the original due time.
    Range(i64),
    /// Score `p`; a duplicate takes the latest priority.
    Priority(i64),
    /// Due at an absolute Unix ms; a duplicate takes the latest time.
    At(i64),
    /// Due `ms` from now; a duplicate takes the latest time (a debounce).
    Delay(i64),
}

/// Largest integer a double holds exactly: bound of priorities, due times and deadlines.
pub const MAX_EXACT: i64 = 1 << 53;
/// 2000-01-01 in Unix ms: an AT below it is almost surely a time in seconds.
pub const MIN_AT: i64 = 946_684_800_000;
/// Longest relative time accepted (RANGE, DELAY, LEASE, BLOCK, EXTEND): 2^52 ms, so that
/// now + ms stays an exact integer score.
pub const MAX_RELATIVE: i64 = 1 << 52;
/// Longest group name accepted.
pub const MAX_GROUP_BYTES: usize = 1024;

// The bounds of the modes' values.
pub const RANGE: Bound = Bound::new("RANGE", 1, MAX_RELATIVE, Unit::Ms);
pub const PRIORITY: Bound = Bound::new("PRIORITY", -MAX_EXACT, MAX_EXACT, Unit::Magnitude);
pub const AT: Bound = Bound::new("AT", MIN_AT, MAX_EXACT, Unit::UnixMs);
pub const DELAY: Bound = Bound::new("DELAY", 0, MAX_RELATIVE, Unit::Ms);

/// A group name as a push accepts it.
pub fn check_group(g: &[u8]) -> Result<()> {
    if g.is_empty() || g.len() > MAX_GROUP_BYTES {
        return Err(RmqError::BadValue("GROUP", "a non-empty string of at most 1024 bytes"));
    }
    Ok(())
}

impl PushMode {
    /// The mode with its value checked against its bound.
    pub fn checked(self) -> Result<PushMode> {
        match self {
            PushMode::Range(v) => RANGE.check(v).map(PushMode::Range),
            PushMode::Priority(v) => PRIORITY.check(v).map(PushMode::Priority),
            PushMode::At(v) => AT.check(v).map(PushMode::At),
            PushMode::Delay(v) => DELAY.check(v).map(PushMode::Delay),
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            PushMode::Range(_) => Kind::Range,
            PushMode::Priority(_) => Kind::Priority,
            PushMode::At(_) | PushMode::Delay(_) => Kind::Fixed,
        }
    }

    /// The score a push gives a message at time `now`, or None if it is out of range
    /// (a relative time that lands past `MAX_EXACT`).
    pub fn score(self, now: i64) -> Option<i64> {
        let s = match self {
            PushMode::Range(ms) | PushMode::Delay(ms) => now.checked_add(ms)?,
            PushMode::Priority(p) | PushMode::At(p) => p,
        };
        (s <= MAX_EXACT).then_some(s)
    }

    /// Whether pushing a content that is already waiting replaces its score (latest wins)
    /// or leaves it as it is (range-merge keeps the first due time).
    pub fn replaces_waiting(self) -> bool {
        !matches!(self, PushMode::Range(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in [Kind::Range, Kind::Priority, Kind::Fixed] {
            assert_eq!(Kind::from_name(k.name().as_bytes()), Some(k));
        }
        assert_eq!(Kind::from_name(b"RANGE"), None);
    }

    #[test]
    fn scores_per_mode() {
        assert_eq!(PushMode::Range(5).score(100), Some(105));
        assert_eq!(PushMode::Delay(0).score(100), Some(100));
        assert_eq!(PushMode::Priority(-7).score(100), Some(-7));
        assert_eq!(PushMode::At(MIN_AT).score(100), Some(MIN_AT));
        assert_eq!(PushMode::Range(MAX_EXACT).score(1), None);
        assert_eq!(PushMode::Delay(i64::MAX).score(1), None);
    }

    #[test]
    fn kinds_and_merge_rules() {
        assert_eq!(PushMode::Delay(1).kind(), Kind::Fixed);
        assert_eq!(PushMode::At(MIN_AT).kind(), Kind::Fixed);
        assert!(!PushMode::Range(1).replaces_waiting());
        assert!(PushMode::Priority(1).replaces_waiting());
        assert!(PushMode::At(MIN_AT).replaces_waiting());
        assert!(PushMode::Delay(1).replaces_waiting());
        assert!(!Kind::Priority.is_timed());
        assert!(Kind::Range.is_timed() && Kind::Fixed.is_timed());
    }
}
