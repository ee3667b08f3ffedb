//! A journal entry (the v5 contract): what one event of one message says (`Note`: made by the
//! rules through `core::journal`), and the entry's fields and values (`fields`): the
//! message cut to its first `MESSAGE_BYTES` bytes with the SHA-1 of the whole when longer,
//! the delivery count after the event, who (`by`), the delivery's name and where a waiting
//! copy stands.

use sha1_smol::Sha1;

/// What happened to a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A push added a new waiting copy.
    Pushed,
    /// A push merged into the waiting copy.
    Merged,
    Popped,
    Acked,
    /// A NACK rolled the delivery back to waiting.
    Nacked,
    /// The lease ran out and the delivery was rolled back to waiting.
    Expired,
    /// The delivery ended in dead (a NACK, or an expiry, past its retries or with DEAD).
    Dead,
    Replayed,
    Cancelled,
    /// RMQ.PURGE removed it.
    Purged,
}

impl Event {
    pub const ALL: [Event; 10] = [
        Event::Pushed,
        Event::Merged,
        Event::Popped,
        Event::Acked,
        Event::Nacked,
        Event::Expired,
        Event::Dead,
        Event::Replayed,
        Event::Cancelled,
        Event::Purged,
    ];

    /// Its `event` field's value.
    pub fn name(self) -> &'static str {
        match self {
            Event::Pushed => "pushed",
            Event::Merged => "merged",
            Event::Popped => "popped",
            Event::Acked => "acked",
            Event::Nacked => "nacked",
            Event::Expired => "expired",
            Event::Dead => "dead",
            Event::Replayed => "replayed",
            Event::Cancelled => "cancelled",
            Event::Purged => "purged",
        }
    }
}

/// Where a waiting copy stands after the event: its due time (`range`, `fixed`) or its
/// priority.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Standing {
    Due(i64),
    Priority(f64),
}

/// One event of one message: what the journal's entry says (but who did it, which only
/// the server knows, unless `timer`).
#[derive(Clone, Debug, PartialEq)]
pub struct Note<M> {
    pub event: Event,
    pub message: M,
    /// The message's delivery count after the event (0 for a new waiting copy).
    pub deliveries: u32,
    /// The delivery's name (popped, acked, nacked, expired, dead), when it has one.
    pub id: Option<u64>,
    /// Where the copy waits, on an event that leaves it waiting.
    pub standing: Option<Standing>,
    /// The clock's doing (a lease run out, whoever ran the rollback: the timer or RMQ.SWEEP),
    /// so `by` is `timer`.
    pub timer: bool,
}

/// The longest prefix of a message an entry keeps.
pub const MESSAGE_BYTES: usize = 256;

/// `by` for what the server does by itself: expiries, the sweeper, schedule firings.
pub const TIMER: &[u8] = b"timer";

/// The `message` field (at most `MESSAGE_BYTES` bytes) and, for a longer message, the
/// `sha1` field: 40 lowercase hex digits of the whole.
pub fn cut(message: &[u8]) -> (&[u8], Option<String>) {
    if message.len() <= MESSAGE_BYTES {
        return (message, None);
    }
    (&message[..MESSAGE_BYTES], Some(Sha1::from(message).digest().to_string()))
}

/// A field's value as the entry stores it: bytes, or an integer written in decimal.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Bytes(&'a [u8]),
    Text(String),
    Int(i64),
}

impl Value<'_> {
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Value::Bytes(b) => b.to_vec(),
            Value::Text(t) => t.as_bytes().to_vec(),
            Value::Int(i) => i.to_string().into_bytes(),
        }
    }
}

/// A priority as the entry writes it: an integer when it is one (pushes give integers),
/// else Redis's own way of writing a double.
fn priority_value(p: f64) -> Value<'static> {
    if p.fract() == 0.0 && p.abs() < 9.0e15 {
        Value::Int(p as i64)
    } else {
        Value::Text(format!("{p}"))
    }
}

/// The most fields an entry has (`fields`).
pub const MAX_FIELDS: usize = 7;

/// An entry's fields and values, in order (a slice): kept in place, not allocated (one is
/// made per event).
pub struct Fields<'a> {
    items: [(&'static str, Value<'a>); MAX_FIELDS],
    len: usize,
}

impl<'a> Fields<'a> {
    fn push(&mut self, field: (&'static str, Value<'a>)) {
        self.items[self.len] = field;
        self.len += 1;
    }
}

impl<'a> std::ops::Deref for Fields<'a> {
    type Target = [(&'static str, Value<'a>)];
    fn deref(&self) -> &Self::Target {
        &self.items[..self.len]
    }
}

/// The entry's fields in order: `event`, `message`, [`sha1`], `deliveries`, `by`, [`id`],
/// [`due` | `priority`].
pub fn fields<'a, M: AsRef<[u8]>>(n: &'a Note<M>, by: &'a [u8]) -> Fields<'a> {
    let (message, sha1) = cut(n.message.as_ref());
    let mut out = Fields { items: std::array::from_fn(|_| ("", Value::Int(0))), len: 0 };
    out.push(("event", Value::Bytes(n.event.name().as_bytes())));
    out.push(("message", Value::Bytes(message)));
    if let Some(h) = sha1 {
        out.push(("sha1", Value::Text(h)));
    }
    out.push(("deliveries", Value::Int(n.deliveries as i64)));
    out.push(("by", Value::Bytes(if n.timer { TIMER } else { by })));
    if let Some(id) = n.id {
        out.push(("id", Value::Int(id as i64)));
    }
    match n.standing {
        Some(Standing::Due(t)) => out.push(("due", Value::Int(t))),
        Some(Standing::Priority(p)) => out.push(("priority", priority_value(p))),
        None => {}
    }
    out
}

/// Whether an entry's `message` (and `sha1`, if any) are those of `message` (RMQ.TRACE).
pub fn same_message(message: &[u8], field: &[u8], sha1: Option<&[u8]>) -> bool {
    let (prefix, hash) = cut(message);
    prefix == field && hash.as_deref().map(str::as_bytes) == sha1
}
