//! From a request's HTTP parts to its caller and typed request: the action it names, its
//! signature (crate::sigv4: the Authorization header or a presigned query, dates and
//! expiry), a presigned request's parameters in its query (crate::presigned) and the
//! action's typed request with its checks (crate::sqs_requests). Pure, so the fuzz target
//! runs the whole path without a server; crate::server (the binary) reads the body, and
//! runs the action on Redis.

use std::borrow::Cow;

use axum::http::HeaderMap;

use crate::errors::SqsError;
use crate::sigv4::{self, Credentials, Key};
use crate::sqs_requests::SqsRequest;

/// Why a request was not served: refused before it was authenticated (counted without its
/// action, which is the client's word), or after.
#[derive(Debug)]
pub enum Refusal {
    Unauthenticated(SqsError),
    Served(SqsError),
}

/// Who sent a request: the key that signed it, or, without credentials (local
/// development), the key id its Authorization header names (`anonymous` if none).
#[derive(Debug)]
pub enum Signer<'c> {
    Key(&'c Key),
    Unverified(String),
}

#[derive(Debug)]
pub struct Admitted<'c> {
    pub signer: Signer<'c>,
    pub request: SqsRequest,
}

/// The action a request names, and whether it is presigned (signed in its query string,
/// which may then carry the action and parameters too, and may be a GET, as a presigned
/// URL opened as it is).
pub struct Named<'a> {
    pub action: Cow<'a, str>,
    pub presigned: bool,
}

pub fn named<'a>(query: &str, headers: &'a HeaderMap) -> Named<'a> {
    let presigned = headers.get("authorization").is_none() && crate::presigned::is_presigned(query);
    // A presigned request may name its action in the query (which its signature covers).
    let action = match presigned.then(|| crate::presigned::action(query)).flatten() {
        Some(a) => Cow::Owned(a),
        None => {
            Cow::Borrowed(headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or("").strip_prefix("AmazonSQS.").unwrap_or(""))
        }
    };
    Named { action, presigned }
}

/// The caller and typed request of `req` (named `named`), checked against `creds` for
/// `region` at `now` (Unix seconds); without `creds`, any key is served.
pub fn admit<'c>(
    creds: Option<&'c Credentials>,
    region: &str,
    now: i64,
    req: &sigv4::Request,
    named: &Named,
) -> Result<Admitted<'c>, Refusal> {
    let signer = match creds {
        Some(creds) => Signer::Key(sigv4::verify(creds, region, req, now).map_err(Refusal::Unauthenticated)?),
        None => Signer::Unverified(
            req.headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|a| a.split("Credential=").nth(1))
                .and_then(|c| c.split('/').next())
                .unwrap_or("anonymous")
                .to_string(),
        ),
    };
    let method_ok = req.method == "POST" || (named.presigned && req.method == "GET");
    if !method_ok || named.action.is_empty() {
        return Err(Refusal::Served(SqsError::unsupported_operation(
            "rmq-gateway speaks the AWS JSON 1.0 protocol: POST / with X-Amz-Target: AmazonSQS.<Action>",
        )));
    }
    // A presigned request's parameters are in its query string: read into the JSON body
    // every action reads.
    let from_query;
    let body = if named.presigned {
        from_query = crate::presigned::input(req.query, req.body)
            .and_then(|v| serde_json::to_vec(&v).map_err(|e| SqsError::internal(e.to_string())))
            .map_err(Refusal::Served)?;
        &from_query[..]
    } else {
        req.body
    };
    let request = SqsRequest::parse(&named.action, body).map_err(Refusal::Served)?;
    Ok(Admitted { signer, request })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn request<'a>(method: &'a str, query: &'a str, headers: &'a HeaderMap, body: &'a [u8]) -> sigv4::Request<'a> {
        sigv4::Request { method, path: "/", query, headers, body }
    }

    #[test]
    fn unsigned_requests_without_credentials() {
        let mut h = HeaderMap::new();
        h.insert("x-amz-target", HeaderValue::from_static("AmazonSQS.ListQueues"));
        h.insert("authorization", HeaderValue::from_static("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/sqs/aws4_request"));
        let n = named("", &h);
        assert_eq!((&*n.action, n.presigned), ("ListQueues", false));
        let a = admit(None, "us-east-1", 0, &request("POST", "", &h, b""), &n).unwrap();
        assert!(matches!(a.signer, Signer::Unverified(id) if id == "AKID"));
        assert!(matches!(a.request, SqsRequest::ListQueues(_)));
        let refused = |r: Result<Admitted, Refusal>| match r {
            Err(Refusal::Served(e)) => e.code,
            _ => "",
        };
        assert_eq!(refused(admit(None, "us-east-1", 0, &request("GET", "", &h, b""), &n)), "UnsupportedOperation");
        assert_eq!(refused(admit(None, "us-east-1", 0, &request("POST", "", &h, b"[]"), &n)), "SerializationException");
        let none = HeaderMap::new();
        assert_eq!(refused(admit(None, "us-east-1", 0, &request("POST", "", &none, b""), &named("", &none))), "UnsupportedOperation");
    }

    #[test]
    fn presigned_requests_name_their_action_in_the_query() {
        let mut h = HeaderMap::new();
        h.insert("x-amz-target", HeaderValue::from_static("AmazonSQS.PurgeQueue"));
        let q = "Action=GetQueueUrl&QueueName=q&X-Amz-Signature=0";
        let n = named(q, &h);
        assert_eq!((&*n.action, n.presigned), ("GetQueueUrl", true));
        let a = admit(None, "us-east-1", 0, &request("GET", q, &h, b""), &n).unwrap();
        assert!(matches!(a.request, SqsRequest::GetQueueUrl(g) if g.queue_name.0 == "q"));
        // Not presigned (an Authorization header): the query names no action.
        h.insert("authorization", HeaderValue::from_static("x"));
        assert_eq!(&*named(q, &h).action, "PurgeQueue");
    }

    #[test]
    fn a_signature_is_checked_first() {
        let creds = Credentials::parse("AKID secret").unwrap();
        let h = HeaderMap::new();
        let r = admit(Some(&creds), "us-east-1", 0, &request("POST", "", &h, b"["), &named("", &h));
        assert!(matches!(&r, Err(Refusal::Unauthenticated(e)) if e.code == "MissingAuthenticationToken"), "{r:?}");
    }
}
