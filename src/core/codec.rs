//! How per-message metadata is laid out in the queue's `meta{Q}` hash. Fields are a tag
//! byte and the message, so one hash serves every kind of metadata; `kind` (4 bytes, tag
//! 'k') cannot collide with a tagged message field.

use crate::core::store::Flight;

pub const KIND_FIELD: &[u8] = b"kind";
/// Deliveries already made of a waiting copy (only kept when > 0).
pub const WAITING: u8 = b'w';
/// An in-flight delivery: `deliveries` or `deliveries:priority` (only kept when not the
/// default: a first delivery of a timed kind keeps nothing).
pub const FLIGHT: u8 = b'f';
/// A transient field, never kept, that only serves to convert the hash (its length is
/// above the default hash-max-listpack-value, 64, and any sane setting).
pub const CONVERT: u8 = b'x';
/// The priority a dead message of a priority queue last had.
pub const DEAD: u8 = b'd';

pub fn field(tag: u8, m: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.reserve(m.len() + 1);
    buf.push(tag);
    buf.extend_from_slice(m);
}

fn num(b: &[u8]) -> Option<i64> {
    crate::core::num::parse_int(b)
}

pub fn encode_flight(f: &Flight) -> String {
    match f.priority {
        Some(p) => format!("{}:{}", f.deliveries, p as i64),
        None => f.deliveries.to_string(),
    }
}

pub fn decode_flight(b: &[u8]) -> Flight {
    let mut parts = b.splitn(2, |&c| c == b':');
    let deliveries = parts.next().and_then(num).map_or(1, |d| d.clamp(1, u32::MAX as i64) as u32);
    let priority = parts.next().and_then(num).map(|p| p as f64);
    Flight { deliveries, priority }
}

pub fn decode_count(b: &[u8]) -> u32 {
    num(b).map_or(0, |d| d.clamp(0, u32::MAX as i64) as u32)
}

pub fn decode_priority(b: &[u8]) -> Option<f64> {
    num(b).map(|p| p as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flight_round_trips() {
        for f in [
            Flight { deliveries: 1, priority: None },
            Flight { deliveries: 17, priority: Some(-9007199254740992.0) },
            Flight { deliveries: 2, priority: Some(0.0) },
        ] {
            assert_eq!(decode_flight(encode_flight(&f).as_bytes()), f);
        }
        assert_eq!(decode_flight(b"junk"), Flight::default());
        assert_eq!(decode_count(b"3"), 3);
        assert_eq!(decode_count(b"-3"), 0);
        assert_eq!(decode_priority(b"-5"), Some(-5.0));
    }

    #[test]
    fn fields_are_tagged() {
        let mut buf = Vec::new();
        field(WAITING, b"a\0b", &mut buf);
        assert_eq!(buf, b"wa\0b");
        assert_ne!(buf.first(), KIND_FIELD.first());
    }
}
