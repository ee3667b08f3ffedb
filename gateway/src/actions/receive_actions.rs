//! ReceiveMessage: RMQ.POP's deliveries (after a long poll if none was waiting) as SQS's
//! messages, with the attributes asked for and a receipt handle each.

use std::collections::BTreeMap;

use redis::AsyncCommands;

use super::caller::{cached_queue, now_ms, Caller};
use crate::errors::SqsResult;
use crate::first_receive::{self, Receipt};
use crate::gateway_keys as keys;
use crate::gateway_state::Gateway;
use crate::md5s;
use crate::message::{self, Attribute};
use crate::message_requests::ReceiveMessage;
use crate::queue::Queue;
use crate::receipt_handles::make_handle;
use crate::replies::{to_body, Receive, Received};
use crate::rmq_client::{self, Delivery};

pub async fn receive_message(gw: &Gateway, caller: &Caller, r: ReceiveMessage) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, r.queue_url.0).await?;
    let count = r.max_number_of_messages.map_or(1, |c| c.0);
    let vt = r.visibility_timeout.map_or_else(|| q.num("VisibilityTimeout"), |v| v.0);
    let wait = r.wait_time_seconds.map_or_else(|| q.num("ReceiveMessageWaitTimeSeconds"), |w| w.0);
    let mut sys_wanted = r.attribute_names.0;
    sys_wanted.extend(r.message_system_attribute_names.0);
    let attr_wanted = r.message_attribute_names.0;
    // A lease of 0 is not an RMQ lease: 1 ms makes the message visible again at once.
    let lease = (vt * 1000).max(1);
    let mut conn = caller.backend.conn.clone();
    let pop = rmq_client::cmd_pop_ids(&q.name, count, lease, None);
    let mut got: Vec<Delivery> = pop.query_async::<Option<Vec<Delivery>>>(&mut conn).await?.unwrap_or_default();
    if got.is_empty() && wait > 0 {
        got = long_poll(gw, caller, &q, count, lease, wait).await?;
    }
    let mut messages: Vec<Received> = got.iter().map(|(raw, d, id)| received(&q, raw, *d, *id, &sys_wanted, &attr_wanted)).collect();
    if !got.is_empty() {
        let mut pipe = redis::pipe();
        if vt == 0 {
            // Visible again at once, as SQS leaves it (a lease of 1 ms still hid it for that
            // long): each delivery ends as a ChangeMessageVisibility 0 would end it.
            for (_, _, id) in &got {
                rmq_client::pipe_nack_id(&mut pipe, &q.name, *id);
            }
        }
        let now = now_ms();
        let receipts: Vec<Receipt> =
            messages.iter().zip(&got).map(|(m, (_, d, _))| Receipt { message: message_uuid(&m.message_id), deliveries: *d }).collect();
        let first = &caller.backend.first_receives;
        if wants(&sys_wanted, FIRST_RECEIVE) {
            // This queue's records still waiting go first, so that those of earlier
            // deliveries are there to be read.
            let _order = first.ordered().await;
            let key = keys::first_receives(&q.name);
            for (field, ms) in first.take(&q.name) {
                pipe.hset_nx(&key, field, ms).ignore();
            }
            first_receive::record(&mut pipe, &q.name, &receipts, now);
            // The NACKIDs and the waiting records answer nothing (ignored): the replies are the
            // records'.
            let replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
            let firsts = first_receive::firsts(&mut conn, &q.name, &receipts, replies, now).await?;
            for (m, f) in messages.iter_mut().zip(firsts) {
                m.attributes.insert(FIRST_RECEIVE, f.to_string());
            }
        } else {
            if !pipe.is_empty() {
                pipe.query_async::<()>(&mut conn).await?;
            }
            first.add(&q.name, &receipts, now);
        }
    }
    Ok(to_body(&Receive { messages }))
}

/// A long poll blocks in slices shorter than DeleteQueue's tombstone, each after a check that
/// the queue is still the one the poll is for (its receipt-handle key): a queue deleted
/// meanwhile cannot be made again under its name before the slice ends, so the poll never
/// takes a message of a queue created later.
const POLL_SLICE_MS: u64 = crate::queue::TOMBSTONE_MS - 1_000;

/// Blocking RMQ.POPs on a connection of its own (slices of POLL_SLICE_MS); answered empty
/// when the gateway stops, when the queue is deleted, or when no connection frees up
/// within the poll's wait time (past --max-redis-connections polls wait their turn).
async fn long_poll(gw: &Gateway, caller: &Caller, q: &Queue, count: i64, lease: i64, wait: i64) -> SqsResult<Vec<Delivery>> {
    let _open = caller.backend.poll_started();
    let budget = std::time::Duration::from_secs(wait as u64);
    let started = std::time::Instant::now();
    let hkey = q.attrs.get("hkey").cloned();
    let poll = async {
        let Some(mut conn) = caller.backend.dedicated(budget).await? else { return Ok(None) };
        loop {
            let left = budget.saturating_sub(started.elapsed()).as_millis() as u64;
            if left == 0 {
                break;
            }
            let now: Option<String> = conn.conn().hget(keys::meta(&q.name), "hkey").await?;
            if now != hkey {
                break;
            }
            let pop = rmq_client::cmd_pop_ids(&q.name, count, lease, Some(left.min(POLL_SLICE_MS)));
            if let Some(got) = pop.query_async::<Option<Vec<Delivery>>>(conn.conn()).await? {
                conn.give_back();
                return Ok(Some(got));
            }
        }
        conn.give_back();
        Ok::<_, redis::RedisError>(None)
    };
    tokio::select! {
        r = poll => Ok(r?.unwrap_or_default()),
        // Dropping the connection ends the wait on the server.
        _ = crate::gateway_state::stopped(gw.stopping.clone()) => Ok(Vec::new()),
    }
}

const FIRST_RECEIVE: &str = "ApproximateFirstReceiveTimestamp";

/// Whether a receive asked for the system attribute `name`.
fn wants(sys_wanted: &[String], name: &str) -> bool {
    sys_wanted.iter().any(|w| w == "All" || w == name)
}

/// A message's id as the handle and the first-receive record name it: the MessageId (a
/// UUID, as the gateway makes them and reads foreign messages'), else a UUID made from it.
fn message_uuid(id: &str) -> uuid::Uuid {
    uuid::Uuid::parse_str(id).unwrap_or_else(|_| {
        let d = md5::Digest::finalize(<md5::Md5 as md5::Digest>::new_with_prefix(id.as_bytes()));
        uuid::Builder::from_md5_bytes(d.into()).into_uuid()
    })
}

fn received(q: &Queue, raw: &[u8], deliveries: i64, id: u64, sys_wanted: &[String], attr_wanted: &[String]) -> Received {
    let read = message::decode(raw);
    let s = read.stored;
    let mut sys = BTreeMap::new();
    let mut put = |name: &'static str, v: String| {
        if wants(sys_wanted, name) {
            sys.insert(name, v);
        }
    };
    put("SenderId", s.sender);
    put("SentTimestamp", s.sent.to_string());
    put("ApproximateReceiveCount", deliveries.to_string());
    if let Some(g) = s.group {
        put("MessageGroupId", g);
    }
    if let Some(d) = s.dedup {
        put("MessageDeduplicationId", d);
    }
    if let (true, Some(seq)) = (q.fifo(), read.seq) {
        put("SequenceNumber", format!("{seq:020}"));
    }
    if let Some(t) = s.trace {
        put("AWSTraceHeader", t);
    }
    let attrs: BTreeMap<String, Attribute> = s
        .attrs
        .into_iter()
        .filter(|(name, _)| {
            attr_wanted.iter().any(|w| w == "All" || w == "*" || w == name || w.strip_suffix(".*").is_some_and(|p| name.starts_with(p)))
        })
        .collect();
    Received {
        receipt_handle: make_handle(q, id, &message_uuid(&s.id)),
        md5_of_body: md5s::of_body(&s.body),
        message_id: s.id,
        body: s.body,
        attributes: sys,
        md5_of_message_attributes: md5s::of_attributes(&attrs),
        message_attributes: attrs,
    }
}
