//! Every error a command can answer, and its text, in one place.

use crate::core::kind::{Kind, PushMode};

#[derive(Debug, PartialEq, Eq)]
pub enum RmqError {
    WrongType,
    Arity(&'static str),
    Syntax(String),
    /// An option's value is not an integer in its range: (option, what it must be).
    BadValue(&'static str, &'static str),
    /// A policy field's value is not an integer in its range: (field, min, max).
    BadPolicyValue(&'static str, i64, i64),
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
    Internal(String),
}

pub type Result<T> = std::result::Result<T, RmqError>;

impl RmqError {
    /// The full Redis error line (with its `ERR`/`WRONGTYPE` code).
    pub fn message(&self) -> String {
        match self {
            RmqError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            RmqError::Arity(cmd) => format!("ERR wrong number of arguments for '{cmd}' command"),
            RmqError::Syntax(what) => format!("ERR syntax error: {what}"),
            RmqError::BadValue(opt, must) => format!("ERR invalid {opt}: must be {must}"),
            RmqError::BadPolicyValue(field, min, max) => format!("ERR invalid {field}: must be an integer from {min} to {max}"),
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
            RmqError::Internal(what) => format!("ERR internal error: {what}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (RmqError::BadPolicyValue("rate", 0, 9), "rate"),
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
