//! How metadata is laid out in the queue's `meta{Q}` hash, and the park index's members.
//! Fields are a tag byte and the message (or group), so one hash serves every kind of
//! metadata; `kind` and `policy` (tags 'k' and 'p', used by nothing else) cannot collide
//! with a tagged field. A queue with a policy keeps its kind inside the policy's value
//! (`policy_value`) instead of a `kind` field: every command reads both, and one value
//! costs half of two.

use crate::core::kind::Kind;
use crate::core::num::{parse_int, push_decimal};
use crate::core::policy::Policy;
use crate::core::queue_store::{Dead, Flight, Waiting};

pub const KIND_FIELD: &[u8] = b"kind";
pub const POLICY_FIELD: &[u8] = b"policy";
/// A waiting copy: `deliveries[:held-priority[:group]]` (only kept when not all default).
pub const WAITING: u8 = b'w';
/// An in-flight delivery: `deliveries[:priority[:group]]` (only kept when not the default:
/// a first delivery of a timed kind without a group keeps nothing).
pub const FLIGHT: u8 = b'f';
/// An in-flight delivery of a group, laid out as `FLIGHT`: under its own tag so that ending
/// a delivery without a group (most ACKs) is one deletion, with no read first.
pub const GROUP_FLIGHT: u8 = b'g';
/// A dead message: `priority[:group]` (priority queues, or with a group).
pub const DEAD: u8 = b'd';
/// A named delivery: `n<id>` (the name in decimal) -> the message. Its in-flight record
/// carries the name too (`#<id>:` before the rest), so whatever ends the delivery drops it.
pub const NAMED: u8 = b'n';
/// The last delivery name the queue gave (`next_delivery_id`): not a tagged field, as
/// `kind` and `policy` ('i' is no tag).
pub const IDS_FIELD: &[u8] = b"ids";
// Tag 'h' was a group's head record (`h<group>`) before heads were indexed in `parkidx{Q}`:
// no longer read or written (one left by an older version goes with `meta{Q}`, when the
// queue is empty).
/// A transient field, never kept, that only serves to convert the hash (its length is
/// above the default hash-max-listpack-value, 64, and any sane setting).
pub const CONVERT: u8 = b'x';

/// The `policy` field's value: the policy's pairs, then `kind=<name>` while the queue has a
/// kind (`Policy::decode` skips that pair).
pub fn policy_value(p: &Policy, kind: Option<Kind>) -> Vec<u8> {
    let mut v = p.encode().into_bytes();
    if let Some(k) = kind {
        if !v.is_empty() {
            v.push(b',');
        }
        v.extend_from_slice(b"kind=");
        v.extend_from_slice(k.name().as_bytes());
    }
    v
}

/// The kind kept in a `policy` field's value, if any.
pub fn kind_in_policy(v: &[u8]) -> Option<Kind> {
    v.rsplit(|&c| c == b',').find_map(|pair| pair.strip_prefix(b"kind=")).and_then(Kind::from_name)
}

/// The clock's share of a delivery name: names are at least (now - ID_EPOCH ms) << this, so
/// after the queue's `ids` field is gone with its `meta{Q}` (the queue emptied) its next
/// names still exceed the earlier ones, unless the clock went back (and within a ms,
/// `storage::last_ids`); 1024 names a ms is more than a queue gives for long.
const ID_TIME_SHIFT: u32 = 10;
/// 2023-11-14, the clock's zero for names: they stay below 2^53 until the year 2302, exact
/// in a double (Lua, JavaScript, JSON).
const ID_EPOCH: i64 = 1_700_000_000_000;
/// The largest name (2^53).
pub const MAX_ID: u64 = 1 << 53;

/// The first of the next delivery names, after `last` (the queue's `ids` field) at `now`.
pub fn next_delivery_id(last: Option<u64>, now: i64) -> u64 {
    let floor = ((now.saturating_sub(ID_EPOCH).clamp(0, (MAX_ID >> ID_TIME_SHIFT) as i64) as u64) << ID_TIME_SHIFT).max(1);
    last.map_or(floor, |l| l.saturating_add(1).max(floor)).min(MAX_ID)
}

/// A delivery name as given by a client: an integer from 1 to 2^53.
pub fn parse_id(b: &[u8]) -> Option<u64> {
    parse_int(b).filter(|&v| v >= 1 && v as u64 <= MAX_ID).map(|v| v as u64)
}

/// The `meta{Q}` field of the delivery named `id`, into `buf`.
pub fn named_field(id: u64, buf: &mut Vec<u8>) {
    buf.clear();
    buf.push(NAMED);
    push_decimal(buf, id as i64);
}

pub fn field(tag: u8, m: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.reserve(m.len() + 1);
    buf.push(tag);
    buf.extend_from_slice(m);
}

fn push_num(out: &mut Vec<u8>, v: Option<f64>) {
    if let Some(v) = v {
        push_decimal(out, v as i64);
    }
}

/// `count[:priority[:group]]`, shortest form, into `out` (cleared first). Records are
/// written into a buffer the caller keeps: a POP writes one per message.
fn encode3(count: u32, priority: Option<f64>, group: &Option<Vec<u8>>, out: &mut Vec<u8>) {
    out.clear();
    push_decimal(out, count as i64);
    if priority.is_some() || group.is_some() {
        out.push(b':');
        push_num(out, priority);
    }
    if let Some(g) = group {
        out.push(b':');
        out.extend_from_slice(g);
    }
}

/// Splits `a[:b[:rest]]`; the rest (a group) may hold colons.
fn split3(b: &[u8]) -> [Option<&[u8]>; 3] {
    let mut parts = b.splitn(3, |&c| c == b':');
    [parts.next(), parts.next(), parts.next()]
}

fn decode3(b: &[u8]) -> (Option<i64>, Option<i64>, Option<Vec<u8>>) {
    let [a, p, g] = split3(b);
    (a.and_then(parse_int), p.and_then(parse_int), g.map(<[u8]>::to_vec))
}

/// A waiting record's group, read in place (comparing it needs no decoded copy).
pub fn waiting_group(b: &[u8]) -> Option<&[u8]> {
    split3(b)[2]
}

pub fn encode_waiting(w: &Waiting, out: &mut Vec<u8>) {
    encode3(w.deliveries, w.held_priority, &w.group, out)
}

pub fn decode_waiting(b: &[u8]) -> Waiting {
    let (d, p, group) = decode3(b);
    Waiting { deliveries: d.map_or(0, |d| d.clamp(0, u32::MAX as i64) as u32), held_priority: p.map(|p| p as f64), group }
}

/// `[#id:]count[:priority[:group]]`: a named delivery's name first (a group may hold
/// colons, so it cannot come last).
pub fn encode_flight(f: &Flight, out: &mut Vec<u8>) {
    encode3(f.deliveries, f.priority, &f.group, out);
    if let Some(id) = f.id {
        let mut head = vec![b'#'];
        push_decimal(&mut head, id as i64);
        head.push(b':');
        out.splice(0..0, head);
    }
}

pub fn decode_flight(b: &[u8]) -> Flight {
    let (id, rest) = match b.strip_prefix(b"#") {
        Some(named) => {
            let mut parts = named.splitn(2, |&c| c == b':');
            (parts.next().and_then(parse_id), parts.next().unwrap_or_default())
        }
        None => (None, b),
    };
    let (d, p, group) = decode3(rest);
    Flight { deliveries: d.map_or(1, |d| d.clamp(1, u32::MAX as i64) as u32), priority: p.map(|p| p as f64), group, id }
}

pub fn encode_dead(d: &Dead, out: &mut Vec<u8>) {
    out.clear();
    push_num(out, d.priority);
    if let Some(g) = &d.group {
        out.push(b':');
        out.extend_from_slice(g);
    }
}

pub fn decode_dead(b: &[u8]) -> Dead {
    let mut parts = b.splitn(2, |&c| c == b':');
    let priority = parts.next().and_then(parse_int).map(|p| p as f64);
    Dead { priority, group: parts.next().map(<[u8]>::to_vec) }
}

/// The group index (`parkidx{Q}`: parked messages and groups' heads) orders a group's
/// messages by a key whose byte order is the queue's order: ascending due time, or
/// descending priority. `PINNED` keys a group's pinned head: before any other.
pub fn order_key(kind: Kind, score: f64) -> [u8; 8] {
    if score == PINNED {
        return [0; 8];
    }
    let u = (score as i64 as u64) ^ (1 << 63);
    if kind.is_timed() { u } else { !u }.to_be_bytes()
}

/// The group index member of a message: its order key, then the message (into `buf`, a
/// buffer reused between writes).
pub fn index_member(kind: Kind, score: f64, m: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.reserve(8 + m.len());
    buf.extend_from_slice(&order_key(kind, score));
    buf.extend_from_slice(m);
}

/// The index score of a group's pinned head (the v5 contract: a rolled-back grouped message heads
/// its group again, whatever its score), which no message's score is: timed scores are
/// Unix ms times and priorities bounded integers.
pub const PINNED: f64 = f64::NEG_INFINITY;

/// Whether a park index member is its group's pinned head.
pub fn index_pinned(member: &[u8]) -> bool {
    member.starts_with(&[0; 8])
}

/// The message of a park index member.
pub fn index_message(member: &[u8]) -> &[u8] {
    member.get(8..).unwrap_or(&[])
}

/// The park index score of a group: 53 bits of its FNV-1a hash (exact in a double).
/// Groups that share a hash share a score; readers check each member's group.
pub fn group_score(g: &[u8]) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in g {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h & ((1 << 53) - 1)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_value_carries_the_kind() {
        let mut p = Policy::default();
        assert_eq!(policy_value(&p, None), b"");
        assert_eq!(policy_value(&p, Some(Kind::Range)), b"kind=range");
        p.set(crate::core::policy::Field::ALL[0], 5);
        let v = policy_value(&p, Some(Kind::Priority));
        assert_eq!(Policy::decode(&v), p, "the kind pair is not a policy field");
        assert_eq!(kind_in_policy(&v), Some(Kind::Priority));
        assert_eq!(kind_in_policy(&policy_value(&p, None)), None);
        assert_eq!(kind_in_policy(b"kind=bogus"), None);
    }

    /// An encoder's output, in a buffer that held something before.
    fn enc<T>(encode: fn(&T, &mut Vec<u8>), v: &T) -> Vec<u8> {
        let mut out = b"left over".to_vec();
        encode(v, &mut out);
        out
    }

    #[test]
    fn records_round_trip() {
        for f in [
            Flight { deliveries: 1, priority: None, group: None, id: None },
            Flight { deliveries: 17, priority: Some(-9007199254740992.0), group: None, id: None },
            Flight { deliveries: 2, priority: Some(0.0), group: Some(b"g:1\0".to_vec()), id: None },
            Flight { deliveries: 3, priority: None, group: Some(Vec::new()), id: None },
            Flight { deliveries: 1, priority: None, group: None, id: Some(1) },
            Flight { deliveries: 4, priority: Some(-3.0), group: Some(b"#9:x".to_vec()), id: Some(MAX_ID) },
        ] {
            assert_eq!(decode_flight(&enc(encode_flight, &f)), f);
        }
        for w in [
            Waiting::default(),
            Waiting { deliveries: 4, held_priority: Some(9.0), group: None },
            Waiting { deliveries: 0, held_priority: None, group: Some(b"a:b".to_vec()) },
        ] {
            assert_eq!(decode_waiting(&enc(encode_waiting, &w)), w);
        }
        for d in [Dead::default(), Dead { priority: Some(-5.0), group: None }, Dead { priority: None, group: Some(b"x".to_vec()) }] {
            assert_eq!(decode_dead(&enc(encode_dead, &d)), d);
        }
        assert_eq!(enc(encode_flight, &Flight { deliveries: 2, priority: Some(7.0), group: None, id: None }), b"2:7", "v1 layout kept");
        assert_eq!(enc(encode_flight, &Flight { deliveries: 2, priority: None, group: None, id: Some(42) }), b"#42:2");
        for (p, text) in [(0.0, "0"), (-1.0, "-1"), (1e15, "1000000000000000"), (-9007199254740992.0, "-9007199254740992")] {
            assert_eq!(enc(encode_dead, &Dead { priority: Some(p), group: None }), text.as_bytes());
        }
        let most = Flight { deliveries: u32::MAX, priority: Some(i64::MIN as f64), group: None, id: None };
        assert_eq!(enc(encode_flight, &most), format!("{}:{}", u32::MAX, i64::MIN).as_bytes(), "the widest numbers");
        assert_eq!(decode_flight(b"junk"), Flight::default());
        assert_eq!(decode_waiting(b"3").deliveries, 3, "v1 waiting count");
        assert_eq!(decode_waiting(b"-3").deliveries, 0);
        assert_eq!(decode_dead(b"-5").priority, Some(-5.0), "v1 dead priority");
    }

    #[test]
    fn fields_are_tagged() {
        let mut buf = Vec::new();
        field(WAITING, b"a\0b", &mut buf);
        assert_eq!(buf, b"wa\0b");
        for tag in [WAITING, FLIGHT, GROUP_FLIGHT, DEAD, CONVERT, NAMED] {
            assert_ne!(Some(&tag), KIND_FIELD.first());
            assert_ne!(Some(&tag), POLICY_FIELD.first());
            assert_ne!(Some(&tag), IDS_FIELD.first());
        }
        named_field(1234, &mut buf);
        assert_eq!(buf, b"n1234");
    }

    #[test]
    fn delivery_names_only_grow() {
        let now = 1_764_300_000_000;
        let first = next_delivery_id(None, now);
        assert_eq!(first, ((now - 1_700_000_000_000) as u64) << 10, "a queue without names starts at its clock");
        assert_eq!(next_delivery_id(Some(first + 9), now), first + 10, "then counts");
        assert_eq!(next_delivery_id(Some(first + 9), now + 1), first + 1024, "and never falls behind the clock");
        // The queue emptied (its `ids` field gone) a ms later: still above every earlier name.
        assert!(next_delivery_id(None, now + 1) > first + 9);
        assert_eq!(next_delivery_id(None, 0), 1, "a clock before the epoch gives the floor 1");
        assert_eq!(next_delivery_id(Some(MAX_ID), now), MAX_ID, "bounded by 2^53");
        assert_eq!(next_delivery_id(None, i64::MAX), MAX_ID, "a clock far ahead is capped");
        assert!(next_delivery_id(None, 10_000_000_000_000) < MAX_ID, "exact in a double till the year 2286 and after");
        for (text, id) in [
            ("1", Some(1)),
            ("9007199254740992", Some(MAX_ID)),
            ("9007199254740993", None),
            ("0", None),
            ("-1", None),
            ("1.5", None),
            ("", None),
            ("x", None),
        ] {
            assert_eq!(parse_id(text.as_bytes()), id, "{text}");
        }
    }

    #[test]
    fn order_keys_sort_like_the_queue() {
        let scores = [-9007199254740992.0, -5.0, -1.0, 0.0, 1.0, 1000.0, 9007199254740992.0];
        for w in scores.windows(2) {
            assert!(order_key(Kind::Fixed, w[0]) < order_key(Kind::Fixed, w[1]), "earliest due first");
            assert!(order_key(Kind::Priority, w[0]) > order_key(Kind::Priority, w[1]), "highest priority first");
        }
        let mut member = Vec::new();
        index_member(Kind::Range, 5.0, b"m\0", &mut member);
        assert_eq!(index_message(&member), b"m\0");
        assert!(!index_pinned(&member));
        for kind in [Kind::Fixed, Kind::Priority] {
            let pinned = order_key(kind, PINNED);
            assert!(scores.iter().all(|&s| pinned < order_key(kind, s)), "a pinned head comes first");
            index_member(kind, PINNED, b"m", &mut member);
            assert!(index_pinned(&member));
        }
        assert!(group_score(b"order-1") < (1u64 << 53) as f64);
        assert_ne!(group_score(b"order-1"), group_score(b"order-2"));
    }
}
