//! What the keys of RMQ.PUSH's SEQUENCE and DEDUP options and of RMQ.REDRIVE's claims
//! hold, written and read back here: a push's deduplication record, a sequenced message's
//! stored content and a dead message's claim. Pure, so the formats are tested in memory.

use crate::core::error::{Bound, RmqError, Unit};

/// The longest deduplication id, NOTE and SEQUENCE prefix (as a group: a tag, not data).
pub const MAX_TAG: usize = 1024;
/// A deduplication window.
pub const WINDOW: Bound = Bound::new("DEDUP", 1, 1 << 41, Unit::Ms);
/// How old a claim must be to be taken again (RMQ.REDRIVE CLAIM STALE).
pub const STALE: Bound = Bound::new("STALE", 1, 1 << 41, Unit::Ms);
/// Digits of a sequence number in a stored message: `u64::MAX` fits, and equal widths
/// sort in number order.
pub const SEQ_DIGITS: usize = 20;

/// An id, note or prefix of at most `MAX_TAG` bytes (`what` names it in the error).
pub fn check_tag(what: &'static str, v: &[u8], empty_ok: bool) -> Result<(), RmqError> {
    if (v.is_empty() && !empty_ok) || v.len() > MAX_TAG {
        let must = if empty_ok { "at most 1024 bytes" } else { "a non-empty string of at most 1024 bytes" };
        return Err(RmqError::BadValue(what, must));
    }
    Ok(())
}

/// The first push of a deduplication id, as its record in `dedup{Q}` keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// When the window ends (Unix ms): from then on the id is new again.
    pub expires: i64,
    /// The sequence number of its first message (None: it had no SEQUENCE).
    pub first_seq: Option<u64>,
    /// How many messages it pushed.
    pub count: u64,
    pub note: Option<Vec<u8>>,
}

impl Seen {
    /// `<expires> <first sequence, or -> <count>[ <note>]`: the note, binary, goes last.
    pub fn encode(&self) -> Vec<u8> {
        let seq = self.first_seq.map_or_else(|| "-".to_string(), |s| s.to_string());
        let mut v = format!("{} {} {}", self.expires, seq, self.count).into_bytes();
        if let Some(n) = &self.note {
            v.push(b' ');
            v.extend_from_slice(n);
        }
        v
    }

    /// A record as `encode` wrote it (None for anything else: a record written by hand
    /// that cannot be read counts as no record).
    pub fn decode(v: &[u8]) -> Option<Seen> {
        let mut parts = v.splitn(4, |&b| b == b' ');
        let expires = num(parts.next()?)?;
        let seq = parts.next()?;
        let first_seq = if seq == b"-" { None } else { Some(u64::try_from(num(seq)?).ok()?) };
        let count = u64::try_from(num(parts.next()?)?).ok()?;
        Some(Seen { expires, first_seq, count, note: parts.next().map(<[u8]>::to_vec) })
    }

    /// The sequence number the first push gave its `i`-th message, if it gave one.
    pub fn seq_of(&self, i: usize) -> Option<u64> {
        self.first_seq.filter(|_| (i as u64) < self.count).map(|s| s + i as u64)
    }
}

fn num(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// A sequence number as `seq{Q}` holds it (decimal, as INCR writes it); None if it is not
/// one.
pub fn read_seq(v: &[u8]) -> Option<u64> {
    u64::try_from(num(v)?).ok().filter(|&s| s <= MAX_SEQ)
}

/// The last sequence number: numbers run from 1 to 2^63 - 1 (so every one is a RESP integer).
pub const MAX_SEQ: u64 = i64::MAX as u64;

/// The first number of `n` messages numbered after `last`, if none would pass `MAX_SEQ`.
pub fn first_seq(last: u64, n: usize) -> Option<u64> {
    last.checked_add(n as u64).filter(|&end| end <= MAX_SEQ).map(|_| last + 1)
}

/// The content a SEQUENCE push stores: the prefix, the sequence number in `SEQ_DIGITS`
/// digits, a space and the message. Equal prefixes make a queue's contents sort in push
/// order (a sorted set breaks score ties by member) and every push's content distinct.
pub fn sequenced(prefix: &[u8], seq: u64, msg: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(prefix.len() + SEQ_DIGITS + 1 + msg.len());
    v.extend_from_slice(prefix);
    v.extend_from_slice(format!("{seq:0SEQ_DIGITS$} ").as_bytes());
    v.extend_from_slice(msg);
    v
}

/// A dead message claimed for a move (`moving{Q}`): when, and what it needs to be pushed
/// again elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// Claim time, Unix ms.
    pub at: i64,
    /// The priority it last had (priority queues).
    pub priority: Option<f64>,
    pub group: Option<Vec<u8>>,
}

impl Claim {
    /// `<at> <priority, or -> <group>` (an empty group: none; a group is never empty).
    pub fn encode(&self) -> Vec<u8> {
        let p = self.priority.map_or_else(|| "-".to_string(), |p| (p as i64).to_string());
        let mut v = format!("{} {} ", self.at, p).into_bytes();
        v.extend_from_slice(self.group.as_deref().unwrap_or_default());
        v
    }

    pub fn decode(v: &[u8]) -> Option<Claim> {
        let mut parts = v.splitn(3, |&b| b == b' ');
        let at = num(parts.next()?)?;
        let p = parts.next()?;
        let priority = if p == b"-" { None } else { Some(num(p)? as f64) };
        let group = parts.next()?;
        Some(Claim { at, priority, group: (!group.is_empty()).then(|| group.to_vec()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back() {
        for s in [
            Seen { expires: 1_800_000_000_000, first_seq: Some(7), count: 2, note: Some(b"a b\0c".to_vec()) },
            Seen { expires: 5, first_seq: None, count: 1, note: None },
            Seen { expires: 5, first_seq: Some(0), count: 1, note: Some(Vec::new()) },
        ] {
            assert_eq!(Seen::decode(&s.encode()), Some(s));
        }
        for bad in [&b""[..], b"x 1 1", b"5 - ", b"5 -1 1", b"5 1", b"5 1 -2"] {
            assert_eq!(Seen::decode(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_duplicate_names_the_first_pushes_numbers() {
        let s = Seen { expires: 0, first_seq: Some(10), count: 2, note: None };
        assert_eq!((s.seq_of(0), s.seq_of(1), s.seq_of(2)), (Some(10), Some(11), None));
        assert_eq!(Seen { first_seq: None, ..s }.seq_of(0), None);
    }

    #[test]
    fn sequenced_contents_sort_in_push_order() {
        assert_eq!(sequenced(b"gw1 ", 3, b"{}"), b"gw1 00000000000000000003 {}");
        assert!(sequenced(b"p", 9, b"z") < sequenced(b"p", 10, b"a"));
        assert_eq!(sequenced(b"", u64::MAX, b"m").len(), SEQ_DIGITS + 2);
        assert_eq!(read_seq(b"42"), Some(42));
        assert_eq!(read_seq(b"-1"), None);
        assert_eq!(read_seq(b"x"), None);
    }

    #[test]
    fn claims_read_back() {
        for c in [
            Claim { at: 1_700_000_000_000, priority: Some(-3.0), group: Some(b"g 1\0".to_vec()) },
            Claim { at: 1, priority: None, group: None },
        ] {
            assert_eq!(Claim::decode(&c.encode()), Some(c));
        }
        assert_eq!(Claim::decode(b"1 -"), None);
        assert_eq!(Claim::decode(b"x - g"), None);
    }

    #[test]
    fn tags_are_bounded() {
        assert!(check_tag("id", b"", false).is_err());
        assert!(check_tag("note", b"", true).is_ok());
        assert!(check_tag("id", &[0; MAX_TAG], false).is_ok());
        assert!(check_tag("id", &[0; MAX_TAG + 1], false).is_err());
    }

    #[test]
    fn sequence_numbers_end_at_2_63_minus_1() {
        assert_eq!(first_seq(0, 1), Some(1));
        assert_eq!(first_seq(MAX_SEQ - 2, 2), Some(MAX_SEQ - 1));
        assert_eq!(first_seq(MAX_SEQ - 1, 2), None);
        assert_eq!(first_seq(MAX_SEQ, 1), None);
        assert_eq!(read_seq(MAX_SEQ.to_string().as_bytes()), Some(MAX_SEQ));
        assert_eq!(read_seq((MAX_SEQ + 1).to_string().as_bytes()), None);
    }
}
