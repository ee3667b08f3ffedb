//! Topics: a topic of N slots is the queues `<topic>_0 … <topic>_<N-1>`; a message goes to
//! slot crc32(basis) mod N. And where a queue lives in a Redis Cluster: the hash slot of
//! its name (CRC16, as the cluster hashes keys).

// `super`: the bench driver compiles this file with `num` beside it.
use super::num::push_decimal;

/// Most slots a topic may have.
pub const MAX_SLOTS: u32 = 16384;

/// The name of slot `slot` of `topic`: `<topic>_<slot>`.
pub fn queue_name(topic: &[u8], slot: u32) -> Vec<u8> {
    let mut name = Vec::with_capacity(topic.len() + 6);
    queue_name_into(topic, slot, &mut name);
    name
}

/// `queue_name` into `name` (cleared first): a loop over a topic's slots reuses one buffer.
pub fn queue_name_into(topic: &[u8], slot: u32, name: &mut Vec<u8>) {
    name.clear();
    name.extend_from_slice(topic);
    name.push(b'_');
    push_decimal(name, i64::from(slot));
}

/// The queue name `<topic>_<crc32(basis) mod slots>`; `slots` is a power of two.
pub fn queue_for(topic: &[u8], slots: u32, basis: &[u8]) -> Vec<u8> {
    queue_name(topic, crc32fast::hash(basis) & (slots - 1))
}

/// The topic and slot a queue name stands for, if it ends in `_<slot>` (decimal, no
/// leading zero, below `MAX_SLOTS`).
pub fn split(q: &[u8]) -> Option<(&[u8], u32)> {
    // Every sorted set's name is asked on each write (`hooks`): only its last bytes are
    // read. The `_` before 1 to 5 digits is one of the 2nd to 6th last bytes (the last
    // of them that is one).
    let at = (2..=6).filter_map(|k| q.len().checked_sub(k)).find(|&i| q[i] == b'_')?;
    let digits = &q[at + 1..];
    if (digits.len() > 1 && digits[0] == b'0') || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let slot = digits.iter().fold(0u32, |n, d| n * 10 + (d - b'0') as u32);
    (slot < MAX_SLOTS).then_some((&q[..at], slot))
}

/// CRC16-CCITT (XMODEM), the cluster's key hash.
fn crc16(b: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in b {
        crc ^= (byte as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The cluster hash slot of a key: of its hash tag (the part between the first `{` and
/// the next `}`, if not empty), else of the whole key.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&c| c == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) & 0x3fff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_test_vectors() {
        assert_eq!(queue_for(b"t", 8, b"hello"), b"t_6");
        assert_eq!(queue_for(b"t", 16, b"item:42"), b"t_13");
        assert_eq!(queue_for(b"t", 1024, b"order-1001"), b"t_569");
        assert_eq!(queue_for(b"t", 4, b""), b"t_0");
        assert_eq!(queue_for(b"bin\0t", 1, b"\xff"), b"bin\0t_0");
    }

    #[test]
    fn queue_names_split_into_topic_and_slot() {
        assert_eq!(split(b"orders_569"), Some((&b"orders"[..], 569)));
        assert_eq!(split(b"a_b_0"), Some((&b"a_b"[..], 0)));
        assert_eq!(split(b"_3"), Some((&b""[..], 3)));
        assert_eq!(split(b"t_16383"), Some((&b"t"[..], 16383)));
        for no in [&b"orders"[..], b"t_", b"t_01", b"t_16384", b"t_1x", b"t_-1", b"t_123456", b"12", b"user:1234", b"a_1b2", b"a_9_x1"] {
            assert_eq!(split(no), None, "{}", String::from_utf8_lossy(no));
        }
        for slot in [0, 7, 10, 16383] {
            assert_eq!(split(&queue_name(b"x", slot)), Some((&b"x"[..], slot)));
        }
        assert_eq!(queue_name(b"t", u32::MAX), b"t_4294967295");
    }

    #[test]
    fn cluster_key_slots() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"prepare{orders_3}"), key_slot(b"orders_3"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"), "empty tag: the whole key");
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }
}
