//! What a client controls in a request, read as the gateway reads it: the AWS JSON 1.0 body
//! and its fields (names, numbers, lists, maps), the message actions' typed requests (field
//! checks, message attributes and their MD5, batch entries), stored messages (anything RMQ.PUSH may have put in a queue), and SigV4 — the
//! Authorization header or a presigned query string, headers, path and body through
//! canonicalisation, and a presigned request's action and parameters in its query (Python
//! literals included). Nothing panics; a body read is an object; no signature made up by the
//! fuzzer is accepted.
#![no_main]

use arbitrary::Arbitrary;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use rmq_gateway::message_requests::{
    ChangeMessageVisibility, ChangeMessageVisibilityBatch, DeleteMessage, DeleteMessageBatch, ReceiveMessage, SendMessage, SendMessageBatch,
};
use rmq_gateway::request_fields::parse;
use rmq_gateway::sqs_requests::{SqsRequest, ACTIONS};
use rmq_gateway::{input, md5s, message, presigned, sigv4};

#[derive(Arbitrary, Debug)]
struct Req {
    body: Vec<u8>,
    field: String,
    /// Either a whole Authorization header, or the parts of a well-formed one (so that
    /// canonicalisation is reached past the key and date checks).
    raw_auth: Option<String>,
    region: String,
    signed_headers: String,
    signature: String,
    headers: Vec<(String, Vec<u8>)>,
    path: String,
    query: String,
    presigned: bool,
    /// X-Amz-Date: DATE (so the signature check is reached) or the fuzzer's own (date parsing).
    date: Option<String>,
    /// X-Amz-Expires of a presigned request.
    expires: Option<String>,
}

const DATE: &str = "20260101T000000Z";
const NOW: i64 = 1_767_225_600; // DATE in Unix seconds

fuzz_target!(|r: Req| {
    if let Ok(v) = input::parse_body(&r.body) {
        assert!(v.is_object());
    }
    // Every action's typed request and its checks.
    for action in ACTIONS.iter().copied().chain([r.field.as_str()]) {
        if let Ok(SqsRequest::SendMessageBatch(b)) = SqsRequest::parse(action, &r.body) {
            assert!((1..=10).contains(&b.entries.0.len()));
        }
    }
    // The message actions' typed requests, their field checks and SQS's errors.
    let _ = parse::<ReceiveMessage>(&r.body);
    let _ = parse::<DeleteMessage>(&r.body);
    let _ = parse::<DeleteMessageBatch>(&r.body);
    let _ = parse::<ChangeMessageVisibility>(&r.body);
    let _ = parse::<ChangeMessageVisibilityBatch>(&r.body);
    if let Ok(b) = parse::<SendMessageBatch>(&r.body) {
        assert!((1..=10).contains(&b.entries.0.len()));
    }
    if let Ok(send) = parse::<SendMessage>(&r.body) {
        let (_, m) = send.split();
        if message::check_attributes(&m.attributes.0).is_ok() {
            let _ = md5s::of_attributes(&m.attributes.0);
        }
    }
    let read = message::decode(&r.body);
    let _ = message::encode(&read.stored);
    let _ = md5s::of_body(&read.stored.body);

    let creds = sigv4::Credentials::parse("AKIDFUZZ secretFUZZ").unwrap();
    let mut headers = HeaderMap::new();
    for (k, v) in &r.headers {
        if let (Ok(k), Ok(v)) = (HeaderName::from_bytes(k.as_bytes()), HeaderValue::from_bytes(v)) {
            headers.append(k, v);
        }
    }
    let date = r.date.clone().unwrap_or_else(|| DATE.to_string());
    let day: String = date.chars().take(8).collect();
    let scope = format!("AKIDFUZZ/{day}/{}/sqs/aws4_request", r.region);
    let query = if r.presigned {
        format!(
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={}&X-Amz-Date={date}&X-Amz-Expires={}&X-Amz-SignedHeaders={}&X-Amz-Signature={}&{}",
            scope.replace('/', "%2F"),
            r.expires.as_deref().unwrap_or("300"),
            r.signed_headers,
            r.signature,
            r.query
        )
    } else {
        let auth = r.raw_auth.clone().unwrap_or_else(|| {
            format!("AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={}, Signature={}", r.signed_headers, r.signature)
        });
        if let Ok(v) = HeaderValue::from_str(&auth) {
            headers.insert("authorization", v);
        }
        if let Ok(v) = HeaderValue::from_str(&date) {
            headers.insert("x-amz-date", v);
        }
        r.query.clone()
    };
    let _ = presigned::action(&query);
    if let Ok(v) = presigned::input(&query, &r.body) {
        assert!(v.is_object());
    }
    let req = sigv4::Request { method: "POST", path: &r.path, query: &query, headers: &headers, body: &r.body };
    for region in ["us-east-1", r.region.as_str()] {
        if let Ok(key) = sigv4::verify(&creds, region, &req, NOW) {
            panic!("a made-up signature was accepted for {}", key.id);
        }
    }
});
