//! The stored form of a gateway message (docs/GATEWAY_FORMAT.md): one RMQ message
//! `rmqgw1 <sequence, 20 digits> <JSON>`, so that a FIFO group's messages sort in send order
//! even when sent in the same millisecond, and every send is a distinct RMQ message.
//! Anything else in a gateway queue (a plain RMQ.PUSH) reads as a message whose body is its
//! bytes.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::errors::{SqsError, SqsResult};

pub const PREFIX: &[u8] = b"rmqgw1 ";

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Attribute {
    #[serde(rename = "DataType")]
    pub data_type: String,
    #[serde(rename = "StringValue", skip_serializing_if = "Option::is_none", default)]
    pub string_value: Option<String>,
    #[serde(rename = "BinaryValue", skip_serializing_if = "Option::is_none", default, with = "b64opt")]
    pub binary_value: Option<Vec<u8>>,
}

mod b64opt {
    use super::*;
    pub fn serialize<S: serde::Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&B64.encode(b)),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| B64.decode(s).map_err(serde::de::Error::custom)).transpose()
    }
}

/// What is kept of one send.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Stored {
    pub id: String,
    pub body: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, Attribute>,
    /// SentTimestamp, Unix ms.
    pub sent: i64,
    pub sender: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<String>,
    /// The AWSTraceHeader system attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// A message as read back: its stored form and the sequence number it was given.
pub struct Read {
    pub stored: Stored,
    pub seq: Option<u64>,
}

/// The JSON part of a stored message; the module prefixes the sequence number (RMQ.PUSH SEQUENCE).
pub fn encode(s: &Stored) -> String {
    // Serialising plain strings and maps cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

/// Reads a queue's RMQ message: a gateway message, else a foreign one (RMQ.PUSH) whose body
/// is its bytes as text when SQS allows them, else base64 with `rmq.encoding` = `base64`.
pub fn decode(raw: &[u8]) -> Read {
    if let Some(rest) = raw.strip_prefix(PREFIX) {
        if rest.len() > 21 && rest[20] == b' ' {
            let seq = std::str::from_utf8(&rest[..20]).ok().and_then(|s| s.parse().ok());
            if let (Some(seq), Ok(stored)) = (seq, serde_json::from_slice::<Stored>(&rest[21..])) {
                return Read { stored, seq: Some(seq) };
            }
        }
    }
    let mut attrs = BTreeMap::new();
    let body = match std::str::from_utf8(raw) {
        Ok(text) if valid_body(text) => text.to_string(),
        _ => {
            attrs.insert(
                "rmq.encoding".to_string(),
                Attribute { data_type: "String".into(), string_value: Some("base64".into()), binary_value: None },
            );
            B64.encode(raw)
        }
    };
    // A stable id: the same content reads with the same MessageId on every gateway.
    let d = md5::Digest::finalize(<md5::Md5 as md5::Digest>::new_with_prefix(raw));
    let id = uuid::Builder::from_md5_bytes(d.into()).into_uuid().to_string();
    Read { stored: Stored { id, body, attrs, sent: 0, sender: String::new(), group: None, dedup: None, trace: None }, seq: None }
}

/// The characters SQS allows in a body or a string attribute.
pub fn valid_body(s: &str) -> bool {
    s.chars()
        .all(|c| matches!(c, '\u{9}' | '\u{a}' | '\u{d}' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}'))
}

/// What message attributes count toward MaximumMessageSize, as SQS counts them: each one's
/// name, DataType and value (a Binary one's bytes).
pub fn attributes_size(attrs: &BTreeMap<String, Attribute>) -> usize {
    attrs
        .iter()
        .map(|(name, a)| {
            let value = a.string_value.as_ref().map_or(0, String::len) + a.binary_value.as_ref().map_or(0, Vec::len);
            name.len() + a.data_type.len() + value
        })
        .sum()
}

/// A Number attribute's value as SQS takes it: a decimal number (sign, digits, a point, an
/// exponent) of at most 38 significant digits, between -10^128 and 10^126.
pub fn valid_number(s: &str) -> bool {
    let t = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = !(int.is_empty() && frac.is_empty()) && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit());
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.len() <= 5 && e.bytes().all(|b| b.is_ascii_digit())
    });
    if !digits_ok || !exp_ok {
        return false;
    }
    let significant = int.trim_start_matches('0').len() + frac.len();
    let significant = if int.trim_start_matches('0').is_empty() { frac.trim_start_matches('0').len() } else { significant };
    let v: f64 = s.parse().unwrap_or(f64::INFINITY);
    significant <= 38 && v.abs() < 1e126 && (v == 0.0 || v.abs() >= 1e-128)
}

/// Checks message attributes as SQS does (at most 10, names, types, values) and returns
/// their size in bytes (counted toward MaximumMessageSize).
pub fn check_attributes(attrs: &BTreeMap<String, Attribute>) -> SqsResult<usize> {
    if attrs.len() > 10 {
        return Err(SqsError::invalid_parameter_value(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [10].",
            attrs.len()
        )));
    }
    for (name, a) in attrs {
        let name_ok = !name.is_empty()
            && name.len() <= 256
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            && !name.starts_with('.')
            && !name.ends_with('.')
            && !name.contains("..")
            && !name.to_ascii_lowercase().starts_with("aws.")
            && !name.to_ascii_lowercase().starts_with("amazon.");
        if !name_ok {
            return Err(SqsError::invalid_parameter_value(format!("message attribute name '{name}' is invalid")));
        }
        let base = a.data_type.split('.').next().unwrap_or("");
        if a.data_type.len() > 256 || !matches!(base, "String" | "Number" | "Binary") {
            return Err(SqsError::invalid_parameter_value(format!(
                "The message attribute '{name}' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."
            )));
        }
        match (base, &a.string_value, &a.binary_value) {
            ("Binary", None, Some(b)) if !b.is_empty() => {}
            ("Number", Some(s), None) if !s.is_empty() && !valid_number(s) => {
                return Err(SqsError::invalid_parameter_value(format!(
                    "Can't cast the value of message (user) attribute '{name}' to a number."
                )))
            }
            ("String" | "Number", Some(s), None) if !s.is_empty() && valid_body(s) => {}
            _ => {
                return Err(SqsError::invalid_parameter_value(format!(
                    "message attribute '{name}' must have a non-empty value of its DataType"
                )))
            }
        }
    }
    Ok(attributes_size(attrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_round_trip() {
        let s = Stored {
            id: "i".into(),
            body: "b\u{1F600}".into(),
            attrs: BTreeMap::from([(
                "bin".to_string(),
                Attribute { data_type: "Binary".into(), string_value: None, binary_value: Some(vec![0, 1, 255]) },
            )]),
            sent: 5,
            sender: "AK".into(),
            group: Some("g".into()),
            dedup: None,
            trace: None,
        };
        let raw = format!("rmqgw1 {:020} {}", 7, encode(&s));
        let r = decode(raw.as_bytes());
        assert_eq!(r.seq, Some(7));
        assert_eq!(r.stored, s);
    }

    #[test]
    fn foreign_messages() {
        let r = decode(b"plain text");
        assert_eq!(r.stored.body, "plain text");
        assert!(r.stored.attrs.is_empty());
        assert_eq!(r.stored.id, decode(b"plain text").stored.id);
        let r = decode(b"\x00\xff");
        assert_eq!(r.stored.body, "AP8=");
        assert_eq!(r.stored.attrs["rmq.encoding"].string_value.as_deref(), Some("base64"));
        // A damaged gateway message is read as foreign, never as a failure.
        assert_eq!(decode(b"rmqgw1 00000000000000000001 {").stored.body, "rmqgw1 00000000000000000001 {");
    }

    #[test]
    fn numbers() {
        for ok in ["0", "-1", "+2.5", "1e5", "1E-5", ".5", "5.", "007", "12345678901234567890123456789012345678", "0.000001"] {
            assert!(valid_number(ok), "{ok}");
        }
        for bad in
            ["", "-", "abc", "1.2.3", "1e", "e5", "1 ", "0x10", "NaN", "inf", "1e126", "1e-129", "123456789012345678901234567890123456789"]
        {
            assert!(!valid_number(bad), "{bad}");
        }
    }

    #[test]
    fn body_characters() {
        assert!(valid_body("a\tb\n\r \u{e000}\u{10000}"));
        assert!(!valid_body("a\u{0}b"));
        assert!(!valid_body("\u{fffe}"));
    }
}
