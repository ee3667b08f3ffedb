//! Topic routing: a message goes to slot crc32(basis) mod N of its topic.

/// The queue name `<topic>_<crc32(basis) mod slots>`; `slots` is a power of two.
pub fn queue_for(topic: &[u8], slots: u32, basis: &[u8]) -> Vec<u8> {
    let slot = crc32fast::hash(basis) & (slots - 1);
    let mut name = Vec::with_capacity(topic.len() + 6);
    name.extend_from_slice(topic);
    name.push(b'_');
    name.extend_from_slice(slot.to_string().as_bytes());
    name
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
}
