//! Reading a request's input: the AWS JSON 1.0 body and its fields, checked as SQS checks
//! them. Pure (no I/O), so the fuzz target (gateway/fuzz) runs it without a server.

use std::collections::BTreeMap;

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

pub fn str_field<'a>(input: &'a Value, name: &str) -> SqsResult<Option<&'a str>> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(SqsError::serialization(format!("{name} must be a string"))),
    }
}

pub fn required<'a>(input: &'a Value, name: &str) -> SqsResult<&'a str> {
    str_field(input, name)?.ok_or_else(|| SqsError::missing_parameter(format!("The request must contain the parameter {name}.")))
}

pub fn int_field(input: &Value, name: &str, lo: i64, hi: i64) -> SqsResult<Option<i64>> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
            // SQS's own text.
            _ => Err(SqsError::invalid_parameter_value(format!(
                "Value {v} for parameter {name} is invalid. Reason: Must be between {lo} and {hi}, if provided."
            ))),
        },
    }
}

pub fn string_list(input: &Value, name: &str) -> SqsResult<Vec<String>> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| SqsError::serialization(format!("{name} must be a list of strings"))))
            .collect(),
        Some(_) => Err(SqsError::serialization(format!("{name} must be a list"))),
    }
}

pub fn string_map(input: &Value, name: &str) -> SqsResult<BTreeMap<String, String>> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), s.to_string()))
                    .ok_or_else(|| SqsError::serialization(format!("{name} values must be strings")))
            })
            .collect(),
        Some(_) => Err(SqsError::serialization(format!("{name} must be a map"))),
    }
}

pub fn valid_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    !base.is_empty() && name.len() <= 80 && base.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The queue a QueueUrl names: its last path segment.
pub fn queue_of_url(input: &Value) -> SqsResult<String> {
    let url = required(input, "QueueUrl")?;
    let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if valid_queue_name(name) {
        Ok(name.to_string())
    } else {
        Err(SqsError::queue_does_not_exist("The specified queue does not exist."))
    }
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
