//! The journal (SPEC v5): what happened to each message, one entry per event and message,
//! kept by a queue whose policy sets `journal n` (in the Stream `journal{Q}`, written by
//! `storage::journal_stream`). Here, pure: which entry an operation produces (`Note`, made
//! by the rules at each event through `Store::note`, only while the queue keeps a journal),
//! and the entry's fields and values (`fields`): the message cut to its first
//! `MESSAGE_BYTES` bytes with the SHA-1 of the whole when longer, the delivery count after
//! the event, who (`by`), the delivery's name and where a waiting copy stands.

use sha1_smol::Sha1;

use crate::core::kind::Kind;
use crate::core::rules;
use crate::core::store::{Flight, Set, Store};

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

/// The entry's fields in order: `event`, `message`, [`sha1`], `deliveries`, `by`, [`id`],
/// [`due` | `priority`].
pub fn fields<'a, M: AsRef<[u8]>>(n: &'a Note<M>, by: &'a [u8]) -> Vec<(&'static str, Value<'a>)> {
    let (message, sha1) = cut(n.message.as_ref());
    let mut out = Vec::with_capacity(7);
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

/// Where the waiting copy of `m` stands, if it has one.
pub fn standing<S: Store>(s: &S, m: &S::M) -> Option<Standing> {
    let score = s.score(Set::Store, m).or_else(|| s.score(Set::Park, m));
    if rules::kind_of(s)? != Kind::Priority {
        return score.map(|t| Standing::Due(t as i64));
    }
    let held = || s.score(Set::Hold, m).map(|_| s.waiting(m).held_priority.unwrap_or(0.0));
    score.or_else(held).map(Standing::Priority)
}

/// The note of an event that leaves `m` waiting (pushed, merged, replayed): its copy's
/// delivery count and standing.
pub fn waiting<S: Store>(s: &S, event: Event, m: &S::M) -> Note<S::M> {
    Note { event, message: m.clone(), deliveries: s.waiting(m).deliveries, id: None, standing: standing(s, m), timer: false }
}

/// The note of a delivery that ended (acked) or was taken (popped), from its record.
pub fn delivery<M: Clone>(event: Event, m: &M, f: &Flight) -> Note<M> {
    Note { event, message: m.clone(), deliveries: f.deliveries, id: f.id, standing: None, timer: false }
}

/// The note of a delivery `f` of `m` rolled back (`nacked`, or `expired` by the clock): to
/// dead, or waiting again (maybe merged into a newer copy: its standing).
pub fn rolled_back<S: Store>(s: &S, m: &S::M, f: &Flight, dead: bool, expiry: bool) -> Note<S::M> {
    if dead {
        return Note { event: Event::Dead, timer: expiry, ..delivery(Event::Dead, m, f) };
    }
    let event = if expiry { Event::Expired } else { Event::Nacked };
    Note { event, standing: standing(s, m), timer: expiry, ..delivery(event, m, f) }
}

/// The notes of a push: for each message in the batch, `pushed` if its first mention made
/// a new waiting copy (`fresh`, from `fresh` before the push), else `merged`; each with the
/// copy's state after the batch.
pub fn pushed<S: Store>(s: &mut S, msgs: &[S::M], fresh: &[bool]) {
    for (m, &new) in msgs.iter().zip(fresh) {
        let n = waiting(s, if new { Event::Pushed } else { Event::Merged }, m);
        s.note(n);
    }
}

/// For each message of a batch about to be pushed, whether it makes a new waiting copy:
/// it has none and is not mentioned earlier in the batch.
pub fn fresh<S: Store>(s: &S, msgs: &[S::M]) -> Vec<bool> {
    let mut seen: Vec<&[u8]> = Vec::new();
    msgs.iter()
        .map(|m| {
            let first = !seen.contains(&m.as_ref());
            seen.push(m.as_ref());
            first && !rules::waits(s, m)
        })
        .collect()
}

/// The notes of the deliveries a pop took (`got`: message and count; named from `first_id`
/// on, in order).
pub fn popped<S: Store>(s: &mut S, got: &[(S::M, u32)], first_id: Option<u64>) {
    for (i, (m, deliveries)) in got.iter().enumerate() {
        let id = first_id.map(|f| f + i as u64);
        s.note(Note { event: Event::Popped, message: m.clone(), deliveries: *deliveries, id, standing: None, timer: false });
    }
}

/// For RMQ.PURGE: notes `purged` for each message it removed (with the delivery count its
/// copy had), at most as many as the journal keeps (it would keep no more). Call it with
/// the removed messages after the removal; it does nothing when the queue keeps no journal.
pub fn purged<S: Store>(s: &mut S, removed: impl IntoIterator<Item = (S::M, u32)>) {
    let keep = s.journal_len();
    for (m, deliveries) in removed.into_iter().take(keep.min(usize::MAX as u64) as usize) {
        s.note(Note { event: Event::Purged, message: m, deliveries, id: None, standing: None, timer: false });
    }
}
