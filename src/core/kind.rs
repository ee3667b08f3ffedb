//! The bounds of what a push accepts, and the three kinds of queue and the push modes
//! (`message_kind`) with them.

use crate::core::error::{Bound, Result, RmqError, Unit};
// The types live apart so that errors can name them without an import circle.
pub use crate::core::message_kind::{Kind, PushMode, MAX_EXACT};

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
