//! Ending and extending deliveries: DeleteMessage(Batch) and
//! ChangeMessageVisibility(Batch), on the deliveries their receipt handles name.

use super::caller::{cached_queue, Caller};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::message_requests::{ChangeMessageVisibility, ChangeMessageVisibilityBatch, DeleteMessage, DeleteMessageBatch};
use crate::queue::Queue;
use crate::receipt_handles::{read_handle, Named};
use crate::replies::{to_body, BatchResult, Done, Failure, Succeeded};
use crate::request_fields::bounded;
use crate::rmq_client;

/// Ends the deliveries the handles name (already read), in one RMQ.ACKID, and deletes their
/// messages' first-receive records (those written; the others are taken out unwritten); a
/// handle of an ended delivery ends nothing.
async fn delete_deliveries(caller: &Caller, q: &Queue, named: &[Named]) -> SqsResult<()> {
    if named.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    rmq_client::pipe_ack_ids(&mut pipe, &q.name, named.iter().map(|n| n.delivery).collect());
    let records: Vec<String> = named.iter().filter_map(|n| n.message.as_ref()).map(crate::first_receive::field).collect();
    let first = &caller.backend.first_receives;
    let order = first.ordered().await;
    let written = first.unwritten_out(&q.name, records);
    // Past every write of the records in progress: the HDEL cannot overtake one.
    drop(order);
    if !written.is_empty() {
        pipe.hdel(keys::first_receives(&q.name), written).ignore();
    }
    let _: Vec<i64> = rmq_client::write(&caller.backend, &q.name, pipe, "the deliveries are ended").await?;
    Ok(())
}

/// A batch entry's ReceiptHandle, which only that entry fails without.
fn handle_of(handle: Option<&str>) -> SqsResult<&str> {
    handle.ok_or_else(|| SqsError::missing_parameter("The request must contain the parameter ReceiptHandle."))
}

pub async fn delete_message(caller: &Caller, r: DeleteMessage) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, r.queue_url.0).await?;
    let named = read_handle(&q, &r.receipt_handle)?;
    delete_deliveries(caller, &q, &[named]).await?;
    Ok(to_body(&Done {}))
}

pub async fn delete_message_batch(caller: &Caller, r: DeleteMessageBatch) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, r.queue_url.0).await?;
    let (mut out, mut named) = (BatchResult::default(), Vec::new());
    for e in r.entries.0 {
        match handle_of(e.receipt_handle.as_deref()).and_then(|h| read_handle(&q, h)) {
            Ok(delivery) => {
                out.successful.push(Succeeded { id: e.id });
                named.push(delivery);
            }
            Err(err) => out.failed.push(Failure::of(e.id, &err)),
        }
    }
    delete_deliveries(caller, &q, &named).await?;
    Ok(to_body(&out))
}

/// Sets the named delivery's visibility: a timeout > 0 extends its lease (RMQ.EXTENDID), 0
/// makes it visible now (RMQ.NACKID); MessageNotInflight when that delivery has ended.
async fn change_one(caller: &Caller, q: &Queue, handle: &str, timeout: i64) -> SqsResult<()> {
    let id = read_handle(q, handle)?.delivery;
    let mut conn = caller.backend.conn.clone();
    let changed: redis::Value = rmq_client::cmd_change_visibility(&q.name, id, timeout).query_async(&mut conn).await?;
    if changed == redis::Value::Nil {
        Err(SqsError::message_not_inflight("The message referred to isn't in flight."))
    } else {
        Ok(())
    }
}

/// A batch entry's VisibilityTimeout, which only that entry fails without, or out of bounds.
fn visibility_timeout(v: Option<&serde_json::Value>) -> SqsResult<i64> {
    let v = v.ok_or_else(|| SqsError::missing_parameter("The request must contain the parameter VisibilityTimeout."))?;
    bounded("VisibilityTimeout", v, 0, 43_200)
}

pub async fn change_visibility(caller: &Caller, r: ChangeMessageVisibility) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, r.queue_url.0).await?;
    change_one(caller, &q, &r.receipt_handle, r.visibility_timeout.0).await?;
    Ok(to_body(&Done {}))
}

pub async fn change_visibility_batch(caller: &Caller, r: ChangeMessageVisibilityBatch) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, r.queue_url.0).await?;
    let mut out = BatchResult::default();
    for e in r.entries.0 {
        let changed = match (handle_of(e.receipt_handle.as_deref()), visibility_timeout(e.visibility_timeout.as_ref())) {
            (Ok(h), Ok(t)) => change_one(caller, &q, h, t).await,
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        match changed {
            Ok(()) => out.successful.push(Succeeded { id: e.id }),
            Err(err) if err.sender_fault() => out.failed.push(Failure::of(e.id, &err)),
            Err(err) => return Err(err),
        }
    }
    Ok(to_body(&out))
}
