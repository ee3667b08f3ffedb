//! A request body as a JSON object (a presigned request's parameters join it,
//! crate::presigned; the actions read their typed requests, crate::request_fields) and
//! SQS's rule for a queue's name.

use serde_json::Value;

use crate::errors::{SqsError, SqsResult};

/// The JSON object a request body holds (an empty body is an empty object).
pub fn parse_body(body: &[u8]) -> SqsResult<Value> {
    let input: Value = if body.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_slice(body).map_err(|_| SqsError::serialization("The request body is not valid JSON"))?
    };
    if !input.is_object() {
        return Err(SqsError::serialization("The request body must be a JSON object"));
    }
    Ok(input)
}

pub fn valid_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    !base.is_empty() && name.len() <= 80 && base.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        assert!(valid_queue_name("a-b_C9"));
        assert!(valid_queue_name("x.fifo"));
        assert!(!valid_queue_name(".fifo"));
        assert!(!valid_queue_name("a.b"));
        assert!(!valid_queue_name(&"a".repeat(81)));
        assert!(!valid_queue_name("a{b}"));
    }

    #[test]
    fn bodies() {
        assert_eq!(parse_body(b"").unwrap(), serde_json::json!({}));
        assert_eq!(parse_body(b"{\"a\":1}").unwrap()["a"], 1);
        assert_eq!(parse_body(b"[1]").unwrap_err().code, "SerializationException");
        assert_eq!(parse_body(b"{").unwrap_err().code, "SerializationException");
    }
}
