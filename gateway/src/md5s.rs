//! The MD5 digests SQS returns and the SDKs check: of the body, and of the message (or
//! system) attributes in SQS's encoding — names sorted, each field length-prefixed (4 bytes,
//! big endian), a transport byte 1 for String/Number and 2 for Binary.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

use crate::message::Attribute;

pub fn of_body(body: &str) -> String {
    lower_hex(&Md5::digest(body.as_bytes()))
}

/// Lowercase hex through the hex crate's table: its `encode` collects an iterator of chars,
/// which cost more than the MD5 of a short body.
pub fn lower_hex(bytes: &[u8]) -> String {
    let mut out = vec![0; bytes.len() * 2];
    // Cannot fail: `out` is exactly twice as long as `bytes`; hex digits are ASCII.
    hex::encode_to_slice(bytes, &mut out).unwrap_or_else(|_| unreachable!());
    String::from_utf8(out).unwrap_or_else(|_| unreachable!())
}

/// `None` when there are no attributes (SQS then sends no digest).
pub fn of_attributes(attrs: &BTreeMap<String, Attribute>) -> Option<String> {
    if attrs.is_empty() {
        return None;
    }
    let mut buf = Vec::new();
    let field = |b: &[u8], buf: &mut Vec<u8>| {
        buf.extend_from_slice(&(b.len() as u32).to_be_bytes());
        buf.extend_from_slice(b);
    };
    for (name, a) in attrs {
        field(name.as_bytes(), &mut buf);
        field(a.data_type.as_bytes(), &mut buf);
        match (&a.string_value, &a.binary_value) {
            (Some(s), _) => {
                buf.push(1);
                field(s.as_bytes(), &mut buf);
            }
            (None, Some(b)) => {
                buf.push(2);
                field(b, &mut buf);
            }
            (None, None) => {}
        }
    }
    Some(lower_hex(&Md5::digest(&buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_digest() {
        assert_eq!(of_body("hello"), "5d41402abc4b2a76b9719d911017c592");
        assert_eq!(of_body(""), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn lower_hex_is_hex_encode() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(lower_hex(&all), hex::encode(&all));
        assert_eq!(lower_hex(&[]), "");
    }

    #[test]
    fn attribute_digest_matches_the_encoding() {
        // Computed by hand from SQS's documented encoding, for one String attribute.
        let mut attrs = BTreeMap::new();
        attrs.insert("a".to_string(), Attribute { data_type: "String".into(), string_value: Some("b".into()), binary_value: None });
        let mut raw = Vec::new();
        raw.extend_from_slice(&[0, 0, 0, 1, b'a', 0, 0, 0, 6]);
        raw.extend_from_slice(b"String");
        raw.extend_from_slice(&[1, 0, 0, 0, 1, b'b']);
        assert_eq!(of_attributes(&attrs).unwrap(), hex::encode(Md5::digest(&raw)));
        assert_eq!(of_attributes(&BTreeMap::new()), None);
    }
}
