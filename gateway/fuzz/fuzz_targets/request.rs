//! A request as the gateway admits it (rmq_gateway::request_admission), from what a client
//! controls: method, path, headers, query string and body → the action it names → SigV4
//! (the Authorization header or a presigned query; dates, expiry, scope, signed headers,
//! canonicalisation) → a presigned request's parameters in its query (Python literals
//! included) → the action's typed request and its checks. Some requests are signed with the
//! key the gateway knows, so that they reach past the signature; all are admitted again
//! without credentials (local development), which reads every body as its action's request.
//! Also: stored messages (anything RMQ.PUSH may have put in a queue) and SQS's MD5s.
//! Nothing panics; no signature made up by the fuzzer is accepted; what is admitted holds
//! its checks.
#![no_main]

use arbitrary::Arbitrary;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use rmq_gateway::request_admission::{admit, named, Admitted, Signer};
use rmq_gateway::sqs_requests::{SqsRequest, ACTIONS};
use rmq_gateway::{input, md5s, message, sigv4};

#[derive(Arbitrary, Debug)]
struct Req {
    get: bool,
    body: Vec<u8>,
    /// X-Amz-Target: one of the contract's actions, or the fuzzer's own.
    action: u8,
    own_action: Option<String>,
    /// Signed with the gateway's key (else the fuzzer's `signature`).
    sign: bool,
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
const REGION: &str = "us-east-1";
const SIGNATURE_TO_COME: &str = "SIGNATURE-TO-COME";

/// What every admitted request holds, whoever sent it.
fn holds(a: Admitted) {
    match a.request {
        SqsRequest::SendMessageBatch(b) => assert!((1..=10).contains(&b.entries.0.len())),
        SqsRequest::DeleteMessageBatch(b) => assert!((1..=10).contains(&b.entries.0.len())),
        SqsRequest::ChangeMessageVisibilityBatch(b) => assert!((1..=10).contains(&b.entries.0.len())),
        SqsRequest::CreateQueue(c) => assert!(input::valid_queue_name(&c.queue_name.0)),
        SqsRequest::SendMessage(s) => {
            let (_, m) = s.split();
            if message::check_attributes(&m.attributes.0).is_ok() {
                let _ = md5s::of_attributes(&m.attributes.0);
            }
        }
        _ => {}
    }
}

fuzz_target!(|r: Req| {
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
    let action = r.own_action.clone().unwrap_or_else(|| ACTIONS[r.action as usize % ACTIONS.len()].to_string());
    if let Ok(v) = HeaderValue::from_str(&format!("AmazonSQS.{action}")) {
        headers.insert("x-amz-target", v);
    }
    let date = r.date.clone().unwrap_or_else(|| DATE.to_string());
    let day: String = date.chars().take(8).collect();
    let region = if r.sign { REGION } else { r.region.as_str() };
    let scope = [day.as_str(), region, "sqs", "aws4_request"];
    let credential = format!("AKIDFUZZ/{}", scope.join("/"));
    let (signed_headers, signature) = match r.sign {
        true if r.presigned => ("host;x-amz-target", SIGNATURE_TO_COME),
        true => ("content-type;host;x-amz-date;x-amz-target", SIGNATURE_TO_COME),
        false => (r.signed_headers.as_str(), r.signature.as_str()),
    };
    let mut query = if r.presigned {
        format!(
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={}&X-Amz-Date={date}&X-Amz-Expires={}&X-Amz-SignedHeaders={signed_headers}&X-Amz-Signature={signature}&{}",
            credential.replace('/', "%2F"),
            r.expires.as_deref().unwrap_or("300"),
            r.query
        )
    } else {
        if let Ok(v) = HeaderValue::from_str(&date) {
            headers.insert("x-amz-date", v);
        }
        r.query.clone()
    };
    let method = if r.get { "GET" } else { "POST" };
    let authorization = |signature: &str| match (&r.raw_auth, r.sign) {
        (Some(raw), false) => raw.clone(),
        _ => format!("AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed_headers}, Signature={signature}"),
    };
    if r.sign {
        let list: Vec<String> = signed_headers.split(';').map(str::to_string).collect();
        let req = sigv4::Request { method, path: &r.path, query: &query, headers: &headers, body: &r.body };
        let made = sigv4::fuzzing_signature("secretFUZZ", &scope, &date, &req, &list, r.presigned);
        if r.presigned {
            query = query.replacen(SIGNATURE_TO_COME, &made, 1);
        } else if let Ok(v) = HeaderValue::from_str(&authorization(&made)) {
            headers.insert("authorization", v);
        }
    } else if !r.presigned {
        if let Ok(v) = HeaderValue::from_str(&authorization(signature)) {
            headers.insert("authorization", v);
        }
    }

    let req = sigv4::Request { method, path: &r.path, query: &query, headers: &headers, body: &r.body };
    let n = named(&query, &headers);
    for region in [REGION, r.region.as_str()] {
        if let Ok(a) = admit(Some(&creds), region, NOW, &req, &n) {
            assert!(r.sign, "a made-up signature was accepted");
            assert!(matches!(a.signer, Signer::Key(k) if k.id == "AKIDFUZZ"));
            holds(a);
        }
    }
    if let Ok(a) = admit(None, REGION, NOW, &req, &n) {
        holds(a);
    }
});
