//! `journal{Q}`: a queue's journal, a Stream of one entry per event and message
//! (`core::journal`), written when the queue's handle closes (`RedisQueue::close`) with
//! the notes its rules made, trimmed to about the policy's `journal` entries, deleted by
//! `journal 0` and RESET. Every change is replicated as its effect, with explicit ids and
//! exact lengths (`XADD journal{Q} <id> …`, `XTRIM journal{Q} MAXLEN = <length>`, `DEL`),
//! as Redis itself replicates an XADD with an approximate trim, so a replica holds the
//! primary's entries. Who did it (`by`) is the calling client's name or id, unless the
//! timer runs the work (`as_author`).

use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::sync::OnceLock;

use crate::core::error::{Result, RmqError};
use crate::core::journal_entry::{self as journal, Event, Note, Value, MAX_FIELDS, MESSAGE_BYTES};
use crate::core::names::{other_key, Other};
use crate::ffi::key::{Key, KeyType};
use crate::ffi::rstr::Shared;
use crate::ffi::stream::{client_name, StreamId};
use crate::ffi::{Ctx, RStr};
use crate::storage::effects;

/// Who the events of the work under way are by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Author {
    /// The client whose command runs (the context's).
    Caller,
    /// The server by itself: the timer's sweeps, releases and schedule firings.
    Timer,
    /// A client served outside its command (a blocked TPOP the timer serves).
    Client(u64),
}

thread_local!(static AUTHOR: Cell<Author> = const { Cell::new(Author::Caller) });

/// Runs `f` with its events by `a` (restored after, even on a panic).
pub fn as_author<T>(a: Author, f: impl FnOnce() -> T) -> T {
    struct Restore(Author);
    impl Drop for Restore {
        fn drop(&mut self) {
            AUTHOR.set(self.0);
        }
    }
    let _restore = Restore(AUTHOR.replace(a));
    f()
}

/// The `by` of the work under way: a client's `CLIENT SETNAME` name, else its id.
fn by(ctx: Ctx) -> RStr {
    let id = match AUTHOR.get() {
        Author::Timer => return words().timer.0.clone(),
        Author::Caller => ctx.client_id(),
        Author::Client(id) => id,
    };
    client_name(ctx, id).filter(|n| !n.as_ref().is_empty()).unwrap_or_else(|| id_string(id))
}

thread_local! {
    /// The id of the last client without a name that wrote, as a string; and the journal
    /// key's name of the last queue written: a command after another by one client on one
    /// queue reuses them (making them cost ~800 instructions a command).
    static LAST_ID: RefCell<Option<(u64, RStr)>> = const { RefCell::new(None) };
    static LAST_NAME: RefCell<Option<(Vec<u8>, RStr)>> = const { RefCell::new(None) };
}

fn id_string(id: u64) -> RStr {
    LAST_ID.with_borrow_mut(|last| match last {
        Some((i, s)) if *i == id => s.clone(),
        _ => last.insert((id, RStr::from_bytes(id.to_string().as_bytes()))).1.clone(),
    })
}

/// Field names, event names, `timer` and small integers (delivery counts, priorities), made
/// once: a string made and freed per value cost ~200 instructions an entry.
struct Words {
    fields: [Shared; FIELDS.len()],
    events: [Shared; Event::ALL.len()],
    timer: Shared,
    ints: [Shared; SMALL_INTS],
}

const SMALL_INTS: usize = 16;

const FIELDS: [&str; 8] = ["event", "message", "sha1", "deliveries", "by", "id", "due", "priority"];

fn words() -> &'static Words {
    static WORDS: OnceLock<Words> = OnceLock::new();
    WORDS.get_or_init(|| Words {
        fields: FIELDS.map(|f| Shared(RStr::from_bytes(f.as_bytes()))),
        events: Event::ALL.map(|e| Shared(RStr::from_bytes(e.name().as_bytes()))),
        timer: Shared(RStr::from_bytes(journal::TIMER)),
        ints: std::array::from_fn(|i| Shared(RStr::from_i64(i as i64))),
    })
}

fn key_name(q: &[u8]) -> RStr {
    LAST_NAME.with_borrow_mut(|last| match last {
        Some((lq, name)) if lq.as_slice() == q => name.clone(),
        _ => last.insert((q.to_vec(), RStr::from_bytes(&other_key(q, Other::Journal)))).1.clone(),
    })
}

/// A value of an entry: a string that exists already, or one made for it.
enum Val<'s> {
    Kept(&'s RStr),
    Made(RStr),
}

impl Val<'_> {
    fn get(&self) -> &RStr {
        match self {
            Val::Kept(s) => s,
            Val::Made(s) => s,
        }
    }
}

/// The string of field `name`'s value `v` in `n`'s entry (the message itself when it is
/// kept whole).
fn value<'s>(w: &'s Words, n: &'s Note<RStr>, by: &'s RStr, name: &str, v: &Value) -> Val<'s> {
    match (name, v) {
        ("event", _) => Val::Kept(&w.events[n.event as usize].0),
        ("message", _) if n.message.as_ref().len() <= MESSAGE_BYTES => Val::Kept(&n.message),
        ("by", _) => Val::Kept(by),
        (_, Value::Int(i)) => {
            usize::try_from(*i).ok().and_then(|i| w.ints.get(i)).map_or_else(|| Val::Made(RStr::from_i64(*i)), |s| Val::Kept(&s.0))
        }
        (_, v) => Val::Made(RStr::from_bytes(&v.to_bytes())),
    }
}

fn id_text(id: StreamId) -> RStr {
    RStr::from_bytes(format!("{}-{}", id.0, id.1).as_bytes())
}

const XADD: &CStr = c"XADD";

/// Appends the notes of queue `q` (of the selected database) to its journal, then trims it
/// to about `keep` entries. A journal key holding another type is not written.
pub fn write(ctx: Ctx, q: &[u8], notes: &[Note<RStr>], keep: u64) {
    let name = key_name(q);
    let key = Key::open(ctx, &name, true);
    if !matches!(key.key_type(), KeyType::Empty | KeyType::Stream) {
        return;
    }
    let send = effects::needed(ctx);
    // Who, looked up only for an entry that is not the clock's.
    let mut caller = None;
    let mut wrote = false;
    for n in notes {
        let by = if n.timer { &words().timer.0 } else { &*caller.get_or_insert_with(|| by(ctx)) };
        wrote |= add(ctx, &key, &name, n, by, send);
    }
    if wrote {
        trim(ctx, &name, &key, keep, send);
        if !send {
            ctx.count_change();
        }
        ctx.signal_modified(&name);
    }
}

/// Adds `n`'s entry to the open journal `key` (named `name`), replicated when `send`;
/// whether it was added. Its strings are borrowed where they exist already (names, small
/// integers, the message, `by`) and made only for the rest, without an allocation.
fn add(ctx: Ctx, key: &Key, name: &RStr, n: &Note<RStr>, by: &RStr, send: bool) -> bool {
    let w = words();
    let fields = journal::fields(n, by.as_ref());
    let vals: [Option<Val>; MAX_FIELDS] = std::array::from_fn(|i| fields.get(i).map(|(f, v)| value(w, n, by, f, v)));
    let field = |f: &str| &w.fields[FIELDS.iter().position(|x| *x == f).unwrap_or(0)].0;
    // Any string to begin with: the first 2 × fields are replaced.
    let mut argv = [&w.timer.0; 2 * MAX_FIELDS];
    let strings = fields.iter().zip(vals.iter().flatten()).flat_map(|((f, _), v)| [field(f), v.get()]);
    for (a, s) in argv.iter_mut().zip(strings) {
        *a = s;
    }
    let argv = &argv[..2 * fields.len()];
    let Some(id) = key.stream_add(argv) else { return false };
    if send {
        let id = id_text(id);
        let args: Vec<&RStr> = std::iter::once(&id).chain(argv.iter().copied()).collect();
        ctx.replicate(XADD, name, args.into_iter());
    }
    true
}

/// Trims the open journal `key` to about `keep` entries; replicated as an exact trim to
/// the length left.
fn trim(ctx: Ctx, name: &RStr, key: &Key, keep: u64, send: bool) -> bool {
    if key.len() as u64 <= keep || key.stream_trim_approx(keep) == 0 {
        return false;
    }
    if send {
        let (maxlen, exact, len) = (RStr::from_bytes(b"MAXLEN"), RStr::from_bytes(b"="), RStr::from_i64(key.len() as i64));
        ctx.replicate(c"XTRIM", name, [&maxlen, &exact, &len].into_iter());
    }
    true
}

/// WRONGTYPE if queue `q`'s journal key holds something other than a Stream.
pub fn check(ctx: Ctx, q: &[u8]) -> Result<()> {
    let key = Key::open(ctx, &key_name(q), false);
    match key.key_type() {
        KeyType::Empty | KeyType::Stream => Ok(()),
        _ => Err(RmqError::WrongType),
    }
}

/// Queue `q`'s policy now keeps `keep` events: its journal is trimmed to about that many,
/// or deleted when 0 (`journal 0`, RESET). Returns whether the key changed.
pub fn resize(ctx: Ctx, q: &[u8], keep: u64) -> bool {
    let name = key_name(q);
    let key = Key::open(ctx, &name, true);
    if key.key_type() != KeyType::Stream {
        return false;
    }
    let send = effects::needed(ctx);
    let changed = if keep == 0 {
        let deleted = key.delete();
        if deleted && send {
            ctx.replicate(c"DEL", &name, std::iter::empty());
        }
        deleted
    } else {
        trim(ctx, &name, &key, keep, send)
    };
    if changed {
        if !send {
            ctx.count_change();
        }
        ctx.signal_modified(&name);
    }
    changed
}

/// One entry of a trace: its id and its fields and values.
pub type Traced = (StreamId, Vec<(Vec<u8>, Vec<u8>)>);

/// RMQ.TRACE: up to `count` entries of queue `q`'s journal about `message`, newest first
/// (reads the whole journal at most). WRONGTYPE if the key holds another type.
pub fn trace(ctx: Ctx, q: &[u8], message: &[u8], count: usize) -> Result<Vec<Traced>> {
    let key = Key::open(ctx, &key_name(q), false);
    match key.key_type() {
        KeyType::Empty => return Ok(Vec::new()),
        KeyType::Stream => {}
        _ => return Err(RmqError::WrongType),
    }
    let mut out = Vec::new();
    key.stream_rev_scan(&mut |id, pairs| {
        let get = |f: &[u8]| pairs.iter().find(|(k, _)| *k == f).map(|(_, v)| *v);
        if get(b"message").is_some_and(|m| journal::same_message(message, m, get(b"sha1"))) {
            out.push((id, pairs.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()));
        }
        out.len() < count
    });
    Ok(out)
}
