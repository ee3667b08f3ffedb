//! The SQS load generator's client side: AWS JSON 1.0 requests signed with SigV4 over one
//! kept-alive HTTP/1.1 connection. Written by hand (a request is one write, a response one
//! parsed head and a Content-Length body) so that the generator's own CPU per request is
//! small and the same for every server it drives; the signing and the response-head parsing
//! are pure and unit-tested.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::Res;

/// An access key and what a request is signed for.
#[derive(Clone)]
pub struct Signer {
    pub access_key: String,
    pub secret: String,
    pub region: String,
    /// The signing key last derived and the day it is for: SDKs derive it once a day, not
    /// per request (four HMACs).
    cached: Option<(String, Vec<u8>)>,
}

impl Signer {
    pub fn new(access_key: &str, secret: &str, region: &str) -> Signer {
        Signer { access_key: access_key.into(), secret: secret.into(), region: region.into(), cached: None }
    }

    /// The Authorization header of a request whose headers (lower-case names, any order) are
    /// all signed, at `amz_date` (YYYYMMDDTHHMMSSZ).
    pub fn authorization(
        &mut self,
        service: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        amz_date: &str,
    ) -> String {
        let day = &amz_date[..8.min(amz_date.len())];
        let mut sorted: Vec<(&str, &str)> = headers.to_vec();
        sorted.sort();
        let signed = sorted.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(";");
        let mut canonical = format!("{method}\n{path}\n\n");
        for (k, v) in &sorted {
            canonical.push_str(k);
            canonical.push(':');
            canonical.push_str(v.trim());
            canonical.push('\n');
        }
        canonical.push('\n');
        canonical.push_str(&signed);
        canonical.push('\n');
        canonical.push_str(&hex::encode(Sha256::digest(body)));
        let scope = format!("{day}/{}/{service}/aws4_request", self.region);
        let to_sign = format!("AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}", hex::encode(Sha256::digest(canonical.as_bytes())));
        if self.cached.as_ref().map(|(s, _)| s.as_str()) != Some(scope.as_str()) {
            let mut k = format!("AWS4{}", self.secret).into_bytes();
            for part in [day, self.region.as_str(), service, "aws4_request"] {
                k = hmac(&k, part.as_bytes());
            }
            self.cached = Some((scope.clone(), k));
        }
        let key = self.cached.as_ref().map(|(_, k)| k.as_slice()).unwrap_or_default();
        let signature = hex::encode(hmac(key, to_sign.as_bytes()));
        format!("AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}", self.access_key)
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length: new_from_slice cannot fail.
    match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(mut m) => {
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// `secs` since the epoch as SigV4's basic format, YYYYMMDDTHHMMSSZ (UTC).
pub fn amz_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (the proleptic Gregorian calendar, H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// What a response's head says.
#[derive(Debug, PartialEq)]
pub struct Head {
    pub status: u16,
    /// Bytes of the head, its blank line included.
    pub len: usize,
    pub content_length: usize,
    /// The server closes the connection after this response.
    pub close: bool,
}

/// Parses a response head at the start of `buf`: None while it is incomplete.
pub fn parse_head(buf: &[u8]) -> Option<Res<Head>> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = match std::str::from_utf8(&buf[..end]) {
        Ok(t) => t,
        Err(_) => return Some(Err("response head is not UTF-8".into())),
    };
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split(' ');
    let version = parts.next().unwrap_or_default();
    let Some(status) = parts.next().and_then(|s| s.parse::<u16>().ok()).filter(|_| version.starts_with("HTTP/1.")) else {
        return Some(Err(format!("not an HTTP/1.x status line: {status_line:?}").into()));
    };
    let mut head = Head { status, len: end + 4, content_length: 0, close: version == "HTTP/1.0" };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => match value.parse() {
                Ok(n) => head.content_length = n,
                Err(_) => return Some(Err(format!("bad Content-Length: {value:?}").into())),
            },
            "transfer-encoding" if !value.eq_ignore_ascii_case("identity") => {
                return Some(Err(format!("Transfer-Encoding {value} is not supported by this client").into()))
            }
            "connection" => head.close = value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    Some(Ok(head))
}

/// One kept-alive connection to an SQS endpoint, reopened when the server closes it.
pub struct SqsConn {
    addr: String,
    stream: Option<TcpStream>,
    signer: Signer,
    buf: Vec<u8>,
    /// Connections opened (1 when keep-alive held throughout).
    pub opened: u64,
}

impl SqsConn {
    pub fn new(addr: &str, signer: Signer) -> SqsConn {
        SqsConn { addr: addr.into(), stream: None, signer, buf: Vec::with_capacity(16 * 1024), opened: 0 }
    }

    fn stream(&mut self) -> Res<&mut TcpStream> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr)?;
            s.set_nodelay(true)?;
            // A long poll waits up to 20 s: past a minute something is wrong.
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            s.set_write_timeout(Some(Duration::from_secs(30)))?;
            self.stream = Some(s);
            self.opened += 1;
        }
        self.stream.as_mut().ok_or_else(|| "no connection".into())
    }

    /// POSTs `AmazonSQS.<action>` with `body` (JSON); the status and the response body.
    pub fn call(&mut self, action: &str, body: &[u8]) -> Res<(u16, Vec<u8>)> {
        let reused = self.stream.is_some();
        match self.exchange(action, body) {
            // A kept-alive connection the server closed while idle: once more on a new one.
            Err(_) if reused => {
                self.stream = None;
                self.exchange(action, body)
            }
            r => r,
        }
    }

    fn exchange(&mut self, action: &str, body: &[u8]) -> Res<(u16, Vec<u8>)> {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let date = amz_date(secs);
        let target = format!("AmazonSQS.{action}");
        let host = self.addr.clone();
        let headers = [
            ("content-type", "application/x-amz-json-1.0"),
            ("host", host.as_str()),
            ("x-amz-date", date.as_str()),
            ("x-amz-target", target.as_str()),
        ];
        let auth = self.signer.authorization("sqs", "POST", "/", &headers, body, &date);
        let mut req = Vec::with_capacity(body.len() + 512);
        req.extend_from_slice(b"POST / HTTP/1.1\r\n");
        for (k, v) in headers {
            req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        req.extend_from_slice(format!("authorization: {auth}\r\ncontent-length: {}\r\n\r\n", body.len()).as_bytes());
        req.extend_from_slice(body);
        let result = self.send_and_read(&req);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    fn send_and_read(&mut self, req: &[u8]) -> Res<(u16, Vec<u8>)> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let stream = self.stream()?;
        stream.write_all(req)?;
        let mut chunk = [0u8; 16 * 1024];
        let head = loop {
            if let Some(h) = parse_head(&buf) {
                break h?;
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err("connection closed before a response".into());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let want = head.len + head.content_length;
        while buf.len() < want {
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err("connection closed inside a response body".into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = buf[head.len..want].to_vec();
        if head.close {
            self.stream = None;
        }
        self.buf = buf;
        Ok((head.status, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // AWS's SigV4 test suite (aws-sig-v4-test-suite): key AKIDEXAMPLE, region us-east-1,
    // service "service", 20150830T123600Z.
    fn suite_signer() -> Signer {
        Signer::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1")
    }

    fn suite(method: &str) -> String {
        let headers = [("host", "example.amazonaws.com"), ("x-amz-date", "20150830T123600Z")];
        suite_signer().authorization("service", method, "/", &headers, b"", "20150830T123600Z")
    }

    #[test]
    fn get_and_post_vanilla() {
        let prefix =
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=";
        assert_eq!(suite("GET"), format!("{prefix}5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"));
        assert_eq!(suite("POST"), format!("{prefix}5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"));
    }

    #[test]
    fn sqs_json_request_signed_as_botocore_signs_it() {
        // botocore's SigV4Auth for this request (headers in another order than sorted: the
        // signer sorts them), keys bench/bench-secret.
        let mut s = Signer::new("bench", "bench-secret", "us-east-1");
        let body = br#"{"QueueUrl": "http://127.0.0.1:9324/000000000000/q", "MessageBody": "x"}"#;
        let headers = [
            ("x-amz-target", "AmazonSQS.SendMessage"),
            ("content-type", "application/x-amz-json-1.0"),
            ("host", "127.0.0.1:9324"),
            ("x-amz-date", "20261207T113000Z"),
        ];
        let auth = s.authorization("sqs", "POST", "/", &headers, body, "20261207T113000Z");
        assert_eq!(auth, BOTOCORE_AUTH);
        // The cached signing key signs the next request of the same day alike.
        assert_eq!(s.authorization("sqs", "POST", "/", &headers, body, "20261207T113000Z"), BOTOCORE_AUTH);
        // Another day: another key, another signature.
        assert_ne!(s.authorization("sqs", "POST", "/", &headers, body, "20261208T113000Z"), BOTOCORE_AUTH);
    }

    const BOTOCORE_AUTH: &str = "AWS4-HMAC-SHA256 Credential=bench/20261207/us-east-1/sqs/aws4_request, \
        SignedHeaders=content-type;host;x-amz-date;x-amz-target, \
        Signature=9b9b15f9de031232581c02e837b8f90bc372e079865f7d2c5f33d16cbceeb60c";

    #[test]
    fn amz_dates() {
        assert_eq!(amz_date(1_440_938_160), "20150830T123600Z");
        assert_eq!(amz_date(0), "19700101T000000Z");
        // A leap day and the last second of a year.
        assert_eq!(amz_date(951_782_400), "20000229T000000Z");
        assert_eq!(amz_date(1_798_761_599), "20261231T235959Z");
    }

    #[test]
    fn heads() {
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n").is_none());
        let h = parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nX: y\r\n\r\n{}").unwrap().unwrap();
        assert_eq!(h, Head { status: 200, len: 44, content_length: 2, close: false });
        let h = parse_head(b"HTTP/1.1 400 Bad\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.status, h.close), (400, true));
        // HTTP/1.0 closes unless told otherwise (werkzeug's server answers 1.0 or 1.1).
        let h = parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap().unwrap();
        assert!(h.close);
        let h = parse_head(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n").unwrap().unwrap();
        assert!(!h.close);
        for bad in [
            &b"SMTP 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert!(parse_head(bad).unwrap().is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
