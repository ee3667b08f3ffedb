//! The three kinds of message and the push modes that make them: plain types, apart from
//! their bounds (`kind`), so that errors can name them.

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

impl PushMode {
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
