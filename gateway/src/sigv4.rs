//! AWS Signature Version 4, checked by computing the expected signature (hmac + sha2, as the
//! SigV4 specification says; AWS's published test-suite vectors are the unit tests) and
//! comparing it in constant time. Secrets are never formatted into logs or errors.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::HeaderMap;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::errors::{SqsError, SqsResult};
use crate::md5s::lower_hex;
use crate::query_string::percent_decode;

/// One configured access key.
pub struct Key {
    pub id: String,
    secret: String,
    /// The Redis user and password its commands run as.
    pub redis_user: Option<(String, String)>,
    /// The signing key last derived and the scope (`date/region/service`) it is for: a key
    /// signs for one day's scope at a time, and deriving it is four HMACs per request.
    signing: Mutex<Option<(String, Vec<u8>)>>,
}

impl Key {
    /// The signature of `to_sign` for `scope`, through the cached signing key when the scope
    /// is the one last seen.
    fn signature(&self, scope: &[&str], to_sign: &str) -> String {
        let id = scope.join("/");
        let cached = self.signing.lock().ok().and_then(|c| c.as_ref().filter(|(s, _)| *s == id).map(|(_, k)| k.clone()));
        let k = cached.unwrap_or_else(|| {
            let k = signing_key(&self.secret, scope);
            if let Ok(mut c) = self.signing.lock() {
                *c = Some((id, k.clone()));
            }
            k
        });
        lower_hex(&hmac(&k, to_sign))
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("id", &self.id).finish_non_exhaustive()
    }
}

#[derive(Default, Debug)]
pub struct Credentials {
    keys: HashMap<String, Key>,
}

impl Credentials {
    /// Reads `ACCESS_KEY_ID SECRET_ACCESS_KEY [REDIS_USER REDIS_PASSWORD]` lines; blank lines
    /// and `#` comments are skipped. The error names the line, never its secret.
    pub fn parse(text: &str) -> Result<Credentials, String> {
        let mut keys = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let redis_user = match f.len() {
                2 => None,
                4 => Some((f[2].to_string(), f[3].to_string())),
                _ => return Err(format!("line {}: expected ACCESS_KEY_ID SECRET_ACCESS_KEY [REDIS_USER REDIS_PASSWORD]", n + 1)),
            };
            keys.insert(f[0].to_string(), Key { id: f[0].to_string(), secret: f[1].to_string(), redis_user, signing: Mutex::new(None) });
        }
        if keys.is_empty() {
            return Err("no access keys in the credentials file".into());
        }
        Ok(Credentials { keys })
    }

    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.keys.values()
    }
}

/// The parts of a request that are signed.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// How far a request's date may be from the gateway's clock.
const SKEW_SECS: i64 = 15 * 60;

/// Headers a request signed in its headers must sign: with them, the signature covers
/// where it goes, when it was made, which action it is and how its body reads.
const MUST_SIGN: [&str; 4] = ["host", "x-amz-date", "x-amz-target", "content-type"];
/// What a presigned request must sign besides its query (the SDKs' presigners sign the
/// target too; unsigned, one presigned request could be replayed as any action), unless
/// its query names the action (then the query, which is signed, decides it).
const MUST_SIGN_PRESIGNED: [&str; 2] = ["host", "x-amz-target"];
const MUST_SIGN_PRESIGNED_ACTION_IN_QUERY: [&str; 1] = ["host"];
/// The longest a presigned request may be valid (X-Amz-Expires), as SigV4 allows.
const MAX_EXPIRES: i64 = 604_800;

/// The key that signed `req` for `sqs` in `region`, if its signature is valid now (`now`,
/// Unix seconds).
pub fn verify<'c>(creds: &'c Credentials, region: &str, req: &Request, now: i64) -> SqsResult<&'c Key> {
    let auth = match req.headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(a) => parse_authorization(a)?,
        None => parse_presigned(req.query)?,
    };
    let key = creds
        .keys
        .get(auth.key_id)
        .ok_or_else(|| SqsError::invalid_client_token_id("The security token included in the request is invalid."))?;
    let date = if auth.presigned {
        query_param(req.query, "X-Amz-Date")
    } else {
        req.headers.get("x-amz-date").and_then(|v| v.to_str().ok()).map(str::to_string)
    }
    .ok_or_else(|| SqsError::missing_authentication_token("the request has no X-Amz-Date"))?;
    let when = parse_date(&date).ok_or_else(|| SqsError::signature_does_not_match("X-Amz-Date is not a valid date"))?;
    if (now - when).abs() > SKEW_SECS {
        return Err(SqsError::request_expired("Request has expired: its date is more than 15 minutes from the server's clock"));
    }
    if auth.presigned {
        let expires = query_param(req.query, "X-Amz-Expires")
            .ok_or_else(|| SqsError::missing_authentication_token("a presigned request must carry X-Amz-Expires"))?;
        let expires = expires
            .parse::<i64>()
            .ok()
            .filter(|e| (1..=MAX_EXPIRES).contains(e))
            .ok_or_else(|| SqsError::access_denied(format!("X-Amz-Expires must be a number of seconds from 1 to {MAX_EXPIRES}")))?;
        if now > when + expires {
            return Err(SqsError::request_expired("Request has expired: its X-Amz-Expires has passed"));
        }
    }
    let scope_ok = auth.scope.len() == 4 && auth.scope[0] == &date[..8] && auth.scope[2] == "sqs" && auth.scope[3] == "aws4_request";
    if !scope_ok || auth.scope[1] != region {
        return Err(SqsError::signature_does_not_match(format!(
            "Credential should be scoped to a valid region and service sqs; this gateway's region is {region}"
        )));
    }
    let must: &[&str] = match (auth.presigned, crate::presigned::action(req.query).is_some()) {
        (true, true) => &MUST_SIGN_PRESIGNED_ACTION_IN_QUERY,
        (true, false) => &MUST_SIGN_PRESIGNED,
        (false, _) => &MUST_SIGN,
    };
    if let Some(missing) = must.iter().find(|h| !auth.signed_headers.iter().any(|s| s == *h)) {
        return Err(SqsError::signature_does_not_match(format!("The request must sign the header {missing} (SignedHeaders)")));
    }
    let payload = lower_hex(&Sha256::digest(req.body));
    if let Some(claimed) = req.headers.get("x-amz-content-sha256") {
        if claimed.as_bytes() != payload.as_bytes() {
            return Err(SqsError::signature_does_not_match("The provided x-amz-content-sha256 header does not match what was computed."));
        }
    }
    let canonical = canonical_request(req, &auth.signed_headers, auth.presigned, &payload);
    let to_sign = string_to_sign(&date, &auth.scope.join("/"), &canonical);
    let expected = key.signature(&auth.scope, &to_sign);
    if expected.as_bytes().ct_eq(auth.signature.as_bytes()).into() {
        Ok(key)
    } else {
        Err(SqsError::signature_does_not_match("The request signature we calculated does not match the signature you provided."))
    }
}

/// An `X-Amz-Date` (`YYYYMMDDTHHMMSSZ`, exactly: 16 ASCII characters, so that its first 8
/// bytes are its day) as Unix seconds.
fn parse_date(date: &str) -> Option<i64> {
    let b = date.as_bytes();
    let shape =
        b.len() == 16 && b[8] == b'T' && b[15] == b'Z' && b.iter().enumerate().all(|(i, c)| matches!(i, 8 | 15) || c.is_ascii_digit());
    if !shape {
        return None;
    }
    Some(chrono::NaiveDateTime::parse_from_str(date, "%Y%m%dT%H%M%SZ").ok()?.and_utc().timestamp())
}

struct Auth<'a> {
    key_id: &'a str,
    scope: Vec<&'a str>,
    signed_headers: Vec<String>,
    signature: String,
    presigned: bool,
}

fn parse_authorization(a: &str) -> SqsResult<Auth<'_>> {
    let rest = a
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| SqsError::missing_authentication_token("only AWS4-HMAC-SHA256 signatures are accepted"))?;
    let (mut cred, mut signed, mut sig) = (None, None, None);
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("Credential=") {
            cred = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            sig = Some(v);
        }
    }
    match (cred, signed, sig) {
        (Some(c), Some(h), Some(s)) => Ok(auth_parts(c, h, s.to_string(), false)),
        _ => Err(SqsError::missing_authentication_token("the Authorization header lacks Credential, SignedHeaders or Signature")),
    }
}

fn parse_presigned(query: &str) -> SqsResult<Auth<'_>> {
    let missing = || SqsError::missing_authentication_token("Request is missing Authentication Token");
    if query_param(query, "X-Amz-Algorithm").as_deref() != Some("AWS4-HMAC-SHA256") {
        return Err(missing());
    }
    let raw = |name: &str| query.split('&').find_map(|kv| kv.strip_prefix(name).and_then(|r| r.strip_prefix('=')));
    let cred = raw("X-Amz-Credential").ok_or_else(missing)?;
    let signed = query_param(query, "X-Amz-SignedHeaders").ok_or_else(missing)?;
    let sig = query_param(query, "X-Amz-Signature").ok_or_else(missing)?;
    // The credential's slashes may come encoded (%2F); the key id has none.
    let (key_id, scope) = cred.split_once("%2F").or_else(|| cred.split_once('/')).ok_or_else(missing)?;
    let scope: Vec<&str> = if scope.contains("%2F") { scope.split("%2F").collect() } else { scope.split('/').collect() };
    let mut auth = auth_parts(key_id, "", sig, true);
    auth.scope = scope;
    auth.signed_headers = signed.split(';').map(str::to_string).collect();
    Ok(auth)
}

fn auth_parts<'a>(cred: &'a str, signed: &str, signature: String, presigned: bool) -> Auth<'a> {
    let mut it = cred.split('/');
    let key_id = it.next().unwrap_or("");
    Auth { key_id, scope: it.collect(), signed_headers: signed.split(';').map(str::to_string).collect(), signature, presigned }
}

/// The decoded value of a query parameter.
fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| percent_decode(v))
    })
}

/// SigV4's URI encoding: every byte but the unreserved characters (and `/` if kept).
fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The canonical request; `payload` is the hex SHA-256 of the body received.
fn canonical_request(req: &Request, signed_headers: &[String], presigned: bool, payload: &str) -> String {
    let path = if req.path.is_empty() { "/" } else { req.path };
    let mut pairs: Vec<(String, String)> = req
        .query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .filter(|(k, _)| !(presigned && *k == "X-Amz-Signature"))
        .map(|(k, v)| (uri_encode(&percent_decode(k), false), uri_encode(&percent_decode(v), false)))
        .collect();
    pairs.sort();
    let query = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
    let mut headers = String::new();
    for name in signed_headers {
        let values: Vec<String> = req
            .headers
            .get_all(name.as_str())
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    format!("{}\n{}\n{query}\n{headers}\n{}\n{payload}", req.method, uri_encode(path, true), signed_headers.join(";"))
}

/// The signature `secret` makes of `req` for `scope` at `date`, signing `signed_headers`:
/// for the fuzz target, which signs some of what it sends so that it reaches past the check.
#[cfg(fuzzing)]
pub fn fuzzing_signature(secret: &str, scope: &[&str], date: &str, req: &Request, signed_headers: &[String], presigned: bool) -> String {
    let canonical = canonical_request(req, signed_headers, presigned, &lower_hex(&Sha256::digest(req.body)));
    lower_hex(&hmac(&signing_key(secret, scope), &string_to_sign(date, &scope.join("/"), &canonical)))
}

fn string_to_sign(date: &str, scope: &str, canonical: &str) -> String {
    format!("AWS4-HMAC-SHA256\n{date}\n{scope}\n{}", lower_hex(&Sha256::digest(canonical.as_bytes())))
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    // HMAC takes a key of any length.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(data.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// The signing key of `secret` for the scope `[date, region, service, aws4_request]`.
fn signing_key(secret: &str, scope: &[&str]) -> Vec<u8> {
    let mut k = format!("AWS4{secret}").into_bytes();
    for part in scope {
        k = hmac(&k, part);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    // AWS's SigV4 test suite (aws-sig-v4-test-suite): key AKIDEXAMPLE, region us-east-1,
    // service "service", 20150830T123600Z.
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const SCOPE: [&str; 4] = ["20150830", "us-east-1", "service", "aws4_request"];

    fn key() -> Key {
        let mut c = Credentials::parse(&format!("AKIDEXAMPLE {SECRET}")).unwrap();
        c.keys.remove("AKIDEXAMPLE").unwrap()
    }

    fn suite(method: &str, path: &str, query: &str) -> (String, String) {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("example.amazonaws.com"));
        h.insert("x-amz-date", HeaderValue::from_static("20150830T123600Z"));
        let req = Request { method, path, query, headers: &h, body: b"" };
        let canonical = canonical_request(&req, &["host".into(), "x-amz-date".into()], false, &lower_hex(&Sha256::digest(b"")));
        let sts = string_to_sign("20150830T123600Z", &SCOPE.join("/"), &canonical);
        (canonical, key().signature(&SCOPE, &sts))
    }

    #[test]
    fn signing_key_cached_per_scope() {
        let k = key();
        let sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nabc";
        // Twice with one scope: the second from the cache, the same signature.
        assert_eq!(k.signature(&SCOPE, sts), k.signature(&SCOPE, sts));
        assert_eq!(k.signing.lock().unwrap().as_ref().unwrap().0, "20150830/us-east-1/service/aws4_request");
        // Another day's scope derives (and caches) its own key: not the first day's signature.
        let next = ["20150831", "us-east-1", "service", "aws4_request"];
        let other = k.signature(&next, sts);
        assert_ne!(other, k.signature(&SCOPE, sts));
        assert_eq!(other, lower_hex(&hmac(&signing_key(SECRET, &next), sts)));
        assert_eq!(k.signature(&SCOPE, sts), lower_hex(&hmac(&signing_key(SECRET, &SCOPE), sts)));
    }

    #[test]
    fn get_vanilla() {
        let (canonical, sig) = suite("GET", "/", "");
        assert_eq!(
            canonical,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    }

    #[test]
    fn post_vanilla() {
        assert_eq!(suite("POST", "/", "").1, "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
    }

    #[test]
    fn get_vanilla_query_order_key_case() {
        let (canonical, sig) = suite("GET", "/", "Param2=value2&Param1=value1");
        assert!(canonical.starts_with("GET\n/\nParam1=value1&Param2=value2\n"));
        assert_eq!(sig, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
    }

    #[test]
    fn dates_are_exactly_the_basic_format() {
        assert_eq!(parse_date("20150830T123600Z"), Some(1_440_938_160));
        // chrono alone skips a Unicode space before a number: this once passed and its day
        // (the first 8 bytes) was sliced inside the character.
        for bad in ["201508\u{2000}30T123600Z", "\u{2000}20150830T123600Z", "2015083T123600Z", "20150830 123600Z", "20150830T123600", ""] {
            assert_eq!(parse_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn presigned_with_odd_dates_or_expiry_is_refused() {
        let creds = Credentials::parse("AK S").unwrap();
        let h = HeaderMap::new();
        let now = 1_440_938_160;
        for (date, expires) in
            [("201508%E2%80%8030T123600Z", "60"), ("20150830T123600Z", "0"), ("20150830T123600Z", "604801"), ("20150830T123600Z", "x")]
        {
            let query = format!(
                "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20150830%2Fus-east-1%2Fsqs%2Faws4_request\
                 &X-Amz-Date={date}&X-Amz-Expires={expires}&X-Amz-SignedHeaders=host%3Bx-amz-target&X-Amz-Signature=00"
            );
            let req = Request { method: "POST", path: "/", query: &query, headers: &h, body: b"" };
            let e = verify(&creds, "us-east-1", &req, now).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::FORBIDDEN, "{date} {expires}");
        }
    }

    #[test]
    fn credentials_file() {
        let c = Credentials::parse("# comment\n\nAK1 S1\nAK2 S2 alice pw\n").unwrap();
        assert_eq!(c.keys.len(), 2);
        assert_eq!(c.keys["AK2"].redis_user, Some(("alice".into(), "pw".into())));
        let err = Credentials::parse("AK1 SECRETVALUE extra\n").unwrap_err();
        assert!(!err.contains("SECRETVALUE"));
        assert!(Credentials::parse("# nothing\n").is_err());
        assert!(!format!("{:?}", c.keys["AK1"]).contains("S1"));
    }
}
