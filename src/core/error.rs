//! Every error a command can answer, and its text, in one place.

use crate::core::message_kind::{Kind, PushMode};

#[derive(Debug, PartialEq, Eq)]
pub enum RmqError {
    WrongType,
    Arity(&'static str),
    Syntax(String),
    /// An argument that is not what it must be (not an integer): (what, what it must be).
    BadValue(&'static str, &'static str),
    /// An integer argument (an option's value, a policy field's) outside its bound, or
    /// not an integer.
    OutOfBounds(Bound),
    /// A write on a replica.
    ReadOnly,
    /// The user (named) may not read and write every queue of a topic.
    NoPerm(String),
    KindMismatch {
        holds: Kind,
        pushed: Kind,
    },
    /// A relative push time (RANGE, DELAY) whose due time lands past 2^53.
    DueTooLate(PushMode),
    EmptyMessage,
    TooLong(i64),
    QueueFull(i64),
    QueueName,
    /// A topic whose slots would not be valid queue names.
    TopicName,
    /// The queue's slot is being migrated to this node and the queue has not arrived yet.
    TryAgain,
    /// Used memory is over `maxmemory` (a command that adds data, checked by hand).
    OutOfMemory,
    /// A schedule that cannot be (bad cron expression, unknown zone, never fires...).
    BadSchedule(String),
    /// `seq{Q}` holds no sequence number, or numbering the push would pass 2^64 - 1.
    NotASequence,
    Internal(String),
}

pub type Result<T> = std::result::Result<T, RmqError>;

/// The range of an integer argument (an option's value, a policy field, a setting) and how
/// its error reads: every such error text is derived from its bound (`must`), so a bound
/// changes in one place, and values read back from keys (schedules, policies) are checked
/// against the bounds the commands use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The option keyword or field name, as the error names it.
    pub name: &'static str,
    pub min: i64,
    pub max: i64,
    pub unit: Unit,
}

/// How a bound's error states its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A count: "an integer from min to max", or ">= min" when unbounded above.
    Count,
    /// A duration: as a count, then " (ms)".
    Ms,
    /// A BLOCK timeout: a duration whose minimum (0) means forever.
    Timeout,
    /// An absolute time: "Unix time in ms from min to max".
    UnixMs,
    /// A range symmetric about 0 (a priority): "an integer with |p| <= max".
    Magnitude,
    /// A policy field or setting: both ends in full decimal, as CONFIG shows them.
    Setting,
}

impl Bound {
    pub const fn new(name: &'static str, min: i64, max: i64, unit: Unit) -> Bound {
        Bound { name, min, max, unit }
    }

    /// `v` if it is within the bound.
    pub fn check(&self, v: i64) -> Result<i64> {
        if (self.min..=self.max).contains(&v) {
            Ok(v)
        } else {
            Err(RmqError::OutOfBounds(*self))
        }
    }

    /// What a value must be, as the error says it.
    pub fn must(&self) -> String {
        let (min, max) = (short(self.min), short(self.max));
        match self.unit {
            Unit::Count if self.max == i64::MAX => format!("an integer >= {min}"),
            Unit::Count => format!("an integer from {min} to {max}"),
            Unit::Ms => format!("an integer from {min} to {max} (ms)"),
            Unit::Timeout => format!("an integer from {min} (forever) to {max} (ms)"),
            Unit::UnixMs => format!("Unix time in ms from {min} to {max}"),
            Unit::Magnitude => format!("an integer with |p| <= {max}"),
            Unit::Setting => format!("an integer from {} to {}", self.min, self.max),
        }
    }
}

/// A large power of two as 2^k (the protocol's limits: 2^41, 2^52, 2^53), any other
/// number in decimal.
fn short(v: i64) -> String {
    if v >= 1 << 20 && (v as u64).is_power_of_two() {
        format!("2^{}", v.trailing_zeros())
    } else {
        v.to_string()
    }
}

impl RmqError {
    /// The full Redis error line (with its `ERR`/`WRONGTYPE` code).
    pub fn message(&self) -> String {
        match self {
            RmqError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            RmqError::Arity(cmd) => format!("ERR wrong number of arguments for '{cmd}' command"),
            RmqError::Syntax(what) => format!("ERR syntax error: {what}"),
            RmqError::BadValue(opt, must) => format!("ERR invalid {opt}: must be {must}"),
            RmqError::OutOfBounds(b) => format!("ERR invalid {}: must be {}", b.name, b.must()),
            RmqError::ReadOnly => "READONLY You can't write against a read only replica.".into(),
            RmqError::NoPerm(user) => {
                format!("NOPERM User {user} has no permissions to read and write every queue of this topic")
            }
            RmqError::KindMismatch { holds, pushed } => format!(
                "ERR queue holds {} messages, not {} (kind mismatch; a queue's kind is kept until it is completely empty)",
                holds.name(),
                pushed.name()
            ),
            RmqError::DueTooLate(PushMode::Range(_)) => "ERR invalid RANGE: must be an integer > 0 whose due time is at most 2^53".into(),
            RmqError::DueTooLate(_) => "ERR invalid DELAY: must be an integer >= 0 whose due time is at most 2^53".into(),
            RmqError::EmptyMessage => "ERR empty message: a message must be non-empty".into(),
            RmqError::TooLong(max) => {
                format!("ERR message longer than max-message-bytes ({max})")
            }
            RmqError::QueueFull(max) => {
                format!("ERR queue full: push would exceed max-queue-length ({max})")
            }
            RmqError::QueueName => "ERR invalid queue name: must be non-empty and must not contain '{' or '}'".into(),
            RmqError::TopicName => {
                "ERR invalid topic: must be non-empty and must not contain '{' or '}', so that its slots are valid queue names".into()
            }
            RmqError::TryAgain => {
                "TRYAGAIN the queue's slot is being migrated to this node and the queue has not arrived yet; retry".into()
            }
            RmqError::OutOfMemory => "OOM command not allowed when used memory > 'maxmemory'.".into(),
            RmqError::BadSchedule(what) => format!("ERR invalid schedule: {what}"),
            RmqError::NotASequence => {
                "ERR the queue's push sequence (seq{Q}) is not an integer from 0 to 2^63 - 1, or the push would pass it".into()
            }
            RmqError::Internal(what) => format!("ERR internal error: {what}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_state_their_range() {
        for (b, text) in [
            (Bound::new("COUNT", 1, 10_000, Unit::Count), "ERR invalid COUNT: must be an integer from 1 to 10000"),
            (Bound::new("LIMIT", 1, i64::MAX, Unit::Count), "ERR invalid LIMIT: must be an integer >= 1"),
            (Bound::new("RANGE", 1, 1 << 52, Unit::Ms), "ERR invalid RANGE: must be an integer from 1 to 2^52 (ms)"),
            (Bound::new("BLOCK", 0, 1 << 52, Unit::Timeout), "ERR invalid BLOCK: must be an integer from 0 (forever) to 2^52 (ms)"),
            (Bound::new("AT", 946_684_800_000, 1 << 53, Unit::UnixMs), "ERR invalid AT: must be Unix time in ms from 946684800000 to 2^53"),
            (Bound::new("PRIORITY", -(1 << 53), 1 << 53, Unit::Magnitude), "ERR invalid PRIORITY: must be an integer with |p| <= 2^53"),
            (Bound::new("lease-ms", 1, 1 << 31, Unit::Setting), "ERR invalid lease-ms: must be an integer from 1 to 2147483648"),
            (Bound::new("n", 0, 1 << 19, Unit::Count), "ERR invalid n: must be an integer from 0 to 524288"),
        ] {
            assert_eq!(b.check(b.min), Ok(b.min));
            assert_eq!(b.check(b.max), Ok(b.max));
            for out in [b.min.checked_sub(1), b.max.checked_add(1)].into_iter().flatten() {
                assert_eq!(b.check(out).unwrap_err().message(), text);
            }
        }
    }

    #[test]
    fn messages_carry_their_code_and_keyword() {
        assert!(RmqError::WrongType.message().starts_with("WRONGTYPE "));
        assert!(RmqError::TryAgain.message().starts_with("TRYAGAIN "));
        assert!(RmqError::OutOfMemory.message().starts_with("OOM "));
        assert!(RmqError::ReadOnly.message().starts_with("READONLY "));
        assert!(RmqError::NoPerm("u".into()).message().starts_with("NOPERM "));
        let all = [
            (RmqError::Arity("rmq.pop"), "wrong number of arguments"),
            (RmqError::Syntax("x".into()), "syntax"),
            (RmqError::BadValue("COUNT", "1..10000"), "COUNT"),
            (RmqError::OutOfBounds(Bound::new("rate", 0, 9, Unit::Setting)), "rate"),
            (RmqError::KindMismatch { holds: Kind::Range, pushed: Kind::Fixed }, "kind"),
            (RmqError::EmptyMessage, "empty message"),
            (RmqError::TooLong(3), "max-message-bytes"),
            (RmqError::QueueFull(3), "max-queue-length"),
            (RmqError::QueueName, "queue name"),
            (RmqError::BadSchedule("x".into()), "schedule"),
            (RmqError::TopicName, "queue name"),
            (RmqError::Internal("x".into()), "internal"),
        ];
        for (e, word) in all {
            let m = e.message();
            assert!(m.starts_with("ERR "), "{m}");
            assert!(m.contains(word), "{m} lacks {word}");
        }
    }
}
