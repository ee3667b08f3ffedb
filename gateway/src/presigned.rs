//! A presigned request's action and parameters as the SDKs' presigners write them into the
//! query string: the action in `X-Amz-Target` (the JS SDK hoists it there) or `Action` (the
//! query protocol's name), else in the signed header; the parameters as query fields
//! (botocore's presigner writes each top-level field there, a structured one as Python
//! writes the value), or a JSON body. Pure, so the fuzz targets run it.

use serde_json::{Map, Value};

use crate::errors::{SqsError, SqsResult};
use crate::query_string::query_pairs;

/// Whether the request is presigned (signed in its query string).
pub fn is_presigned(query: &str) -> bool {
    query_pairs(query).any(|(k, _)| k == "X-Amz-Signature")
}

/// The action the query names, if it names one.
pub fn action(query: &str) -> Option<String> {
    query_pairs(query).find_map(|(k, v)| match k.as_str() {
        "X-Amz-Target" => Some(v.strip_prefix("AmazonSQS.").unwrap_or("").to_string()),
        "Action" => Some(v),
        _ => None,
    })
}

/// Fields whose value is a number.
const NUMBERS: [&str; 6] =
    ["MaxNumberOfMessages", "VisibilityTimeout", "WaitTimeSeconds", "DelaySeconds", "MaxResults", "MaxNumberOfMessagesPerSecond"];
/// Fields whose value is a list: each occurrence in the query is one element (a string;
/// an entry of a batch is a map).
const LISTS: [&str; 5] = ["AttributeNames", "MessageSystemAttributeNames", "MessageAttributeNames", "TagKeys", "Entries"];
/// Fields whose value is a map.
const MAPS: [&str; 5] = ["Attributes", "MessageAttributes", "MessageSystemAttributes", "Tags", "tags"];

/// The request's input: the JSON object of its body (when it has one), with the query's
/// fields it does not have (all but the signature's own `X-Amz-*`, `Action` and `Version`).
pub fn input(query: &str, body: &[u8]) -> SqsResult<Value> {
    let mut input = crate::input::parse_body(body)?;
    let Some(obj) = input.as_object_mut() else { return Ok(input) };
    let in_body: Vec<String> = obj.keys().cloned().collect();
    for (k, v) in query_pairs(query) {
        if k.starts_with("X-Amz-") || k == "Action" || k == "Version" || in_body.contains(&k) {
            continue;
        }
        let bad = || SqsError::serialization(format!("{k} in the query string is neither JSON nor a Python literal"));
        let value = if NUMBERS.contains(&k.as_str()) {
            v.parse::<i64>().map(Value::from).unwrap_or(Value::String(v))
        } else if MAPS.contains(&k.as_str()) {
            structured(&v).ok_or_else(bad)?
        } else if LISTS.contains(&k.as_str()) {
            let element = if k == "Entries" { structured(&v).ok_or_else(bad)? } else { Value::String(v) };
            if let Some(Value::Array(a)) = obj.get_mut(&k) {
                a.push(element);
                continue;
            }
            Value::Array(vec![element])
        } else {
            Value::String(v)
        };
        obj.insert(k, value);
    }
    Ok(input)
}

/// A list or map written as JSON or as a Python literal (what botocore's presigner puts in
/// the query: `str()` of the value).
fn structured(s: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(s) {
        return Some(v);
    }
    let mut p = Literal { s: s.as_bytes(), i: 0 };
    let v = p.value(0)?;
    p.skip_space();
    (p.i == p.s.len()).then_some(v)
}

/// A reader of Python literals: dicts, lists, tuples, strings (bytes as base64, as the JSON
/// protocol sends them), integers, floats, True, False, None.
struct Literal<'a> {
    s: &'a [u8],
    i: usize,
}

/// Nesting deeper than this is refused (no request needs it; a stack must not overflow).
const MAX_DEPTH: usize = 16;

impl Literal<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        let found = self.s.get(self.i) == Some(&c);
        if found {
            self.i += 1;
        }
        found
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.skip_space();
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut m = Map::new();
                while !self.eat(b'}') {
                    let Value::String(k) = self.value(depth + 1)? else { return None };
                    if !self.eat(b':') {
                        return None;
                    }
                    m.insert(k, self.value(depth + 1)?);
                    if !self.eat(b',') && self.s.get(self.i).copied() != Some(b'}') {
                        return None;
                    }
                }
                Some(Value::Object(m))
            }
            open @ (b'[' | b'(') => {
                let close = if open == b'[' { b']' } else { b')' };
                self.i += 1;
                let mut a = Vec::new();
                while !self.eat(close) {
                    a.push(self.value(depth + 1)?);
                    if !self.eat(b',') && self.s.get(self.i).copied() != Some(close) {
                        return None;
                    }
                }
                Some(Value::Array(a))
            }
            b'b' if matches!(self.s.get(self.i + 1), Some(b'\'' | b'"')) => {
                self.i += 1;
                let bytes = self.string()?;
                Some(Value::String(base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)))
            }
            b'\'' | b'"' => Some(Value::String(String::from_utf8(self.string()?).ok()?)),
            _ => self.word(),
        }
    }

    /// A quoted string's bytes, escapes read as Python reads them.
    fn string(&mut self) -> Option<Vec<u8>> {
        let quote = *self.s.get(self.i)?;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.i)?;
            self.i += 1;
            if c == quote {
                return Some(out);
            }
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let e = *self.s.get(self.i)?;
            self.i += 1;
            let hex = |p: &mut Self, n: usize| {
                let h = std::str::from_utf8(p.s.get(p.i..p.i + n)?).ok()?;
                p.i += n;
                u32::from_str_radix(h, 16).ok()
            };
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0' => out.push(0),
                b'x' => out.push(u8::try_from(hex(self, 2)?).ok()?),
                b'u' | b'U' => {
                    let c = char::from_u32(hex(self, if e == b'u' { 4 } else { 8 })?)?;
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                other => out.push(other),
            }
        }
    }

    /// A number or a keyword.
    fn word(&mut self) -> Option<Value> {
        let start = self.i;
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.')) {
            self.i += 1;
        }
        let w = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        match w {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            "None" => Some(Value::Null),
            _ => match w.parse::<i64>() {
                Ok(n) => Some(Value::from(n)),
                Err(_) => serde_json::Number::from_f64(w.parse().ok()?).map(Value::Number),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_action_comes_from_the_query() {
        assert_eq!(action("X-Amz-Target=AmazonSQS.SendMessage&a=b"), Some("SendMessage".into()));
        assert_eq!(action("Action=ListQueues&Version=2012-11-05"), Some("ListQueues".into()));
        assert_eq!(action("X-Amz-Target=Other.SendMessage"), Some(String::new()));
        assert_eq!(action("QueueUrl=x"), None);
        assert!(is_presigned("a=1&X-Amz-Signature=00"));
        assert!(!is_presigned("a=1&X-Amz-Signatures=00"));
    }

    #[test]
    fn botocores_fields_become_the_input() {
        let q = "QueueUrl=http%3A%2F%2Fh%2F0%2Fq&MessageBody=%7B%22a%22%3A%201%7D&DelaySeconds=5\
                 &MessageAttributes=%7B%27k%27%3A%20%7B%27DataType%27%3A%20%27String%27%2C%20%27StringValue%27%3A%20%27it%5C%27s%27%7D%7D\
                 &AttributeNames=All&AttributeNames=SenderId&Action=SendMessage&X-Amz-Date=20260101T000000Z\
                 &Entries=%7B%27Id%27%3A%20%271%27%7D&Entries=%7B%22Id%22%3A%20%222%22%7D";
        let v = input(q, b"").unwrap();
        assert_eq!(
            v,
            json!({
                "QueueUrl": "http://h/0/q",
                "MessageBody": "{\"a\": 1}",
                "DelaySeconds": 5,
                "MessageAttributes": {"k": {"DataType": "String", "StringValue": "it's"}},
                "AttributeNames": ["All", "SenderId"],
                "Entries": [{"Id": "1"}, {"Id": "2"}],
            })
        );
        // A body's fields win over the query's.
        let v = input("MessageBody=q&DelaySeconds=x", br#"{"MessageBody": "b"}"#).unwrap();
        assert_eq!(v, json!({"MessageBody": "b", "DelaySeconds": "x"}));
    }

    #[test]
    fn python_literals() {
        let ok = [
            ("{}", json!({})),
            ("[]", json!([])),
            ("{'a': [1, -2, 3.5, True, False, None], \"b\": ('x',)}", json!({"a": [1, -2, 3.5, true, false, null], "b": ["x"]})),
            (
                "{'Bin': {'DataType': 'Binary', 'BinaryValue': b'\\x00\\xff'}}",
                json!({"Bin": {"DataType": "Binary", "BinaryValue": "AP8="}}),
            ),
            ("['\\u00fc\\n\\t', 'caf\u{e9}']", json!(["\u{fc}\n\t", "caf\u{e9}"])),
        ];
        for (text, want) in ok {
            assert_eq!(structured(text), Some(want), "{text}");
        }
        // Deeper than JSON would be refused too (serde_json stops at 128).
        let deep = "(".repeat(100) + &")".repeat(100);
        for bad in ["{'a' 1}", "['a'", "['a',,]", "{1: 2}", "nope", "['\\x4']", &deep, "[1] x", "{'a': 1 'b': 2}"] {
            assert_eq!(structured(bad), None, "{bad}");
        }
        assert_eq!(input("Entries=%5B", b"").unwrap_err().code, "SerializationException");
        assert_eq!(input("Tags=x", b"").unwrap_err().code, "SerializationException");
    }
}
