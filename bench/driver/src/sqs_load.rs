//! SQS modes (make bench-gateway; bench/bench_gateway.py runs them against rmq-gateway,
//! ElasticMQ and moto alike): every request signed with SigV4 on a kept-alive connection of
//! its thread (sqs_http.rs).
//!
//!   sqs-load     --connections threads, each looping SendMessageBatch (--batch entries),
//!                ReceiveMessage (MaxNumberOfMessages --batch, WaitTimeSeconds 1) and
//!                DeleteMessageBatch of what it got, for --secs; reports messages consumed
//!                (deleted) per second.
//!   sqs-latency  one sender, one SendMessage every --interval-ms, --samples times, while a
//!                receiver long-polls (WaitTimeSeconds 20) and deletes what it got; reports
//!                send -> receive percentiles (both ends in this process, one clock).
//!
//! Both take --endpoint HOST:PORT, --queue-url, --kind standard|fifo|priority (fifo: each
//! entry its own MessageGroupId and MessageDeduplicationId; priority: the message attribute
//! rmq.priority, 0-9), --body-bytes (default 100), --access-key/--secret/--region (what the
//! requests are signed with). Bodies are unique (a priority queue merges equal bodies).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::sqs_http::{Signer, SqsConn};
use crate::{Args, Res};

#[derive(Clone, Copy, PartialEq)]
enum QueueKind {
    Standard,
    Fifo,
    Priority,
}

#[derive(Clone)]
struct Target {
    endpoint: String,
    queue_url: String,
    kind: QueueKind,
    signer: Signer,
    pad: String,
}

impl Target {
    fn from_args(args: &Args) -> Res<Target> {
        let kind = match args.str("kind", "standard").as_str() {
            "standard" => QueueKind::Standard,
            "fifo" => QueueKind::Fifo,
            "priority" => QueueKind::Priority,
            k => return Err(format!("--kind standard|fifo|priority, not {k}").into()),
        };
        let queue_url = args.str("queue-url", "");
        if queue_url.is_empty() {
            return Err("--queue-url is required".into());
        }
        let signer = Signer::new(&args.str("access-key", "bench"), &args.str("secret", "bench"), &args.str("region", "us-east-1"));
        let pad = "x".repeat(args.num("body-bytes", 100)? as usize);
        Ok(Target { endpoint: args.str("endpoint", "127.0.0.1:9324"), queue_url, kind, signer, pad })
    }

    fn conn(&self) -> SqsConn {
        SqsConn::new(&self.endpoint, self.signer.clone())
    }

    /// One entry of a send: `id` unique in this run, `n` its place in its batch.
    fn entry(&self, id: &str, n: usize) -> Value {
        let mut e = json!({"Id": n.to_string(), "MessageBody": format!("{id} {}", self.pad)});
        match self.kind {
            QueueKind::Standard => {}
            QueueKind::Fifo => {
                e["MessageGroupId"] = json!(format!("g{id}"));
                e["MessageDeduplicationId"] = json!(id);
            }
            QueueKind::Priority => {
                e["MessageAttributes"] = json!({"rmq.priority": {"DataType": "Number", "StringValue": (n % 10).to_string()}});
            }
        }
        e
    }
}

/// Calls `action`; its JSON reply, or an error with the status and body on anything but 200.
fn call(conn: &mut SqsConn, action: &str, body: &Value) -> Res<Value> {
    let (status, reply) = conn.call(action, body.to_string().as_bytes())?;
    if status != 200 {
        return Err(format!("{action}: HTTP {status} {}", String::from_utf8_lossy(&reply[..reply.len().min(300)])).into());
    }
    Ok(serde_json::from_slice(&reply)?)
}

/// The (Body, ReceiptHandle) of each message of a ReceiveMessage reply.
fn messages(reply: &Value) -> Vec<(String, String)> {
    let Some(list) = reply.get("Messages").and_then(Value::as_array) else { return Vec::new() };
    list.iter().filter_map(|m| Some((m.get("Body")?.as_str()?.to_string(), m.get("ReceiptHandle")?.as_str()?.to_string()))).collect()
}

fn delete_all(conn: &mut SqsConn, queue_url: &str, got: &[(String, String)]) -> Res<()> {
    if got.is_empty() {
        return Ok(());
    }
    let entries: Vec<Value> = got.iter().enumerate().map(|(i, (_, h))| json!({"Id": i.to_string(), "ReceiptHandle": h})).collect();
    let reply = call(conn, "DeleteMessageBatch", &json!({"QueueUrl": queue_url, "Entries": entries}))?;
    match reply.get("Failed").and_then(Value::as_array) {
        Some(f) if !f.is_empty() => Err(format!("DeleteMessageBatch failed entries: {f:?}").into()),
        _ => Ok(()),
    }
}

pub fn mode_load(args: &Args) -> Res<String> {
    let target = Target::from_args(args)?;
    let threads = args.num("connections", 8)?.max(1);
    let batch = args.num("batch", 10)?.clamp(1, 10) as usize;
    let secs = args.float("secs", 10.0)?;
    let stop = Arc::new(AtomicBool::new(false));
    let consumed = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let opened = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for t in 0..threads {
        let (target, stop, consumed, requests, opened) = (target.clone(), stop.clone(), consumed.clone(), requests.clone(), opened.clone());
        handles.push(thread::spawn(move || -> Res<()> {
            let mut conn = target.conn();
            let mut seq = 0u64;
            let result = (|| -> Res<()> {
                while !stop.load(Ordering::Relaxed) {
                    let entries: Vec<Value> = (0..batch)
                        .map(|n| {
                            seq += 1;
                            target.entry(&format!("{t}-{seq}"), n)
                        })
                        .collect();
                    let sent = call(&mut conn, "SendMessageBatch", &json!({"QueueUrl": target.queue_url, "Entries": entries}))?;
                    if let Some(f) = sent.get("Failed").and_then(Value::as_array).filter(|f| !f.is_empty()) {
                        return Err(format!("SendMessageBatch failed entries: {f:?}").into());
                    }
                    let reply = call(
                        &mut conn,
                        "ReceiveMessage",
                        &json!({"QueueUrl": target.queue_url, "MaxNumberOfMessages": batch, "WaitTimeSeconds": 1}),
                    )?;
                    let got = messages(&reply);
                    delete_all(&mut conn, &target.queue_url, &got)?;
                    requests.fetch_add(2 + u64::from(!got.is_empty()), Ordering::Relaxed);
                    consumed.fetch_add(got.len() as u64, Ordering::Relaxed);
                }
                Ok(())
            })();
            opened.fetch_add(conn.opened, Ordering::Relaxed);
            result
        }));
    }
    thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_error = first_error.or(Some(e.to_string())),
            Err(_) => first_error = first_error.or(Some("a load thread panicked".into())),
        }
    }
    if let Some(e) = first_error {
        return Err(e.into());
    }
    let wall = t0.elapsed().as_secs_f64();
    let n = consumed.load(Ordering::Relaxed);
    Ok(format!(
        "{{\"consumed\":{n},\"secs\":{wall:.3},\"msgs_s\":{:.1},\"requests\":{},\"connections\":{threads},\"connections_opened\":{}}}",
        n as f64 / wall,
        requests.load(Ordering::Relaxed),
        opened.load(Ordering::Relaxed)
    ))
}

/// The `q`-quantile (0..1) of sorted `v`, nearest rank.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

pub fn mode_latency(args: &Args) -> Res<String> {
    let target = Target::from_args(args)?;
    let samples = args.num("samples", 200)? as usize;
    let interval = Duration::from_secs_f64(args.float("interval-ms", 20.0)? / 1000.0);
    // When each message was sent (set before its send starts) and received.
    let sent_at: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; samples]));
    let got_at: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; samples]));
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let (target, got_at, done) = (target.clone(), got_at.clone(), done.clone());
        thread::spawn(move || -> Res<()> {
            let mut conn = target.conn();
            let mut received = 0;
            while received < samples && !done.load(Ordering::Relaxed) {
                let reply = call(
                    &mut conn,
                    "ReceiveMessage",
                    &json!({"QueueUrl": target.queue_url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 20}),
                )?;
                let now = Instant::now();
                let got = messages(&reply);
                {
                    let mut at = got_at.lock().map_err(|_| "poisoned")?;
                    for (body, _) in &got {
                        let i = body.split(' ').next().and_then(|s| s.strip_prefix("l-")).and_then(|s| s.parse::<usize>().ok());
                        if let Some(slot) = i.and_then(|i| at.get_mut(i)).filter(|s| s.is_none()) {
                            *slot = Some(now);
                            received += 1;
                        }
                    }
                }
                delete_all(&mut conn, &target.queue_url, &got)?;
            }
            Ok(())
        })
    };
    // The receiver's poll is waiting before the first send.
    thread::sleep(Duration::from_millis(500));
    let mut conn = target.conn();
    let mut send_ms = Vec::with_capacity(samples);
    for i in 0..samples {
        let t = Instant::now();
        sent_at.lock().map_err(|_| "poisoned")?[i] = Some(t);
        let entry = target.entry(&format!("l-{i}"), i);
        let mut body = json!({"QueueUrl": target.queue_url, "MessageBody": entry["MessageBody"]});
        for k in ["MessageGroupId", "MessageDeduplicationId", "MessageAttributes"] {
            if let Some(v) = entry.get(k) {
                body[k] = v.clone();
            }
        }
        call(&mut conn, "SendMessage", &body)?;
        send_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        thread::sleep(interval.saturating_sub(t.elapsed()));
    }
    // Whatever is still missing after 25 s more is lost to the figures (and counted).
    let deadline = Instant::now() + Duration::from_secs(25);
    while Instant::now() < deadline && !receiver.is_finished() {
        thread::sleep(Duration::from_millis(20));
    }
    done.store(true, Ordering::Relaxed);
    if receiver.is_finished() {
        match receiver.join() {
            Ok(r) => r?,
            Err(_) => return Err("the receiver panicked".into()),
        }
    }
    let sent = sent_at.lock().map_err(|_| "poisoned")?;
    let got = got_at.lock().map_err(|_| "poisoned")?;
    let mut lat: Vec<f64> =
        sent.iter().zip(got.iter()).filter_map(|(s, g)| Some(g.as_ref()?.duration_since(*s.as_ref()?).as_secs_f64() * 1000.0)).collect();
    lat.sort_by(f64::total_cmp);
    send_ms.sort_by(f64::total_cmp);
    Ok(format!(
        "{{\"n\":{},\"lost\":{},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"send_p50_ms\":{:.3}}}",
        lat.len(),
        samples - lat.len(),
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0),
        quantile(&send_ms, 0.5)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: QueueKind) -> Target {
        Target { endpoint: String::new(), queue_url: "u".into(), kind, signer: Signer::new("a", "b", "c"), pad: "xx".into() }
    }

    #[test]
    fn entries_per_kind() {
        assert_eq!(target(QueueKind::Standard).entry("1-7", 3), json!({"Id": "3", "MessageBody": "1-7 xx"}));
        let f = target(QueueKind::Fifo).entry("1-7", 3);
        assert_eq!((f["MessageGroupId"].as_str(), f["MessageDeduplicationId"].as_str()), (Some("g1-7"), Some("1-7")));
        let p = target(QueueKind::Priority).entry("1-7", 13);
        assert_eq!(p["MessageAttributes"], json!({"rmq.priority": {"DataType": "Number", "StringValue": "3"}}));
    }

    #[test]
    fn received_messages() {
        let reply = json!({"Messages": [{"Body": "a", "ReceiptHandle": "h1"}, {"Body": "b"}, {"Body": "c", "ReceiptHandle": "h3"}]});
        assert_eq!(messages(&reply), vec![("a".into(), "h1".into()), ("c".into(), "h3".into())]);
        assert!(messages(&json!({})).is_empty());
    }

    #[test]
    fn quantiles_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!((quantile(&v, 0.5), quantile(&v, 0.99), quantile(&v, 1.0)), (50.0, 99.0, 100.0));
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
