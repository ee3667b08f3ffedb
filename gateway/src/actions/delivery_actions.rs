//! Ending and extending deliveries: DeleteMessage(Batch) and
//! ChangeMessageVisibility(Batch), on the deliveries their receipt handles name.

use serde_json::{json, Value};

use super::caller::{cached_queue, Caller};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::input::{batch_entries, int_field, queue_of_url, required};
use crate::queue::Queue;
use crate::receipt_handles::{read_handle, Named};
use crate::replies::failed;
use crate::rmq_client;

/// Ends the deliveries the handles name (already read), in one RMQ.ACKID, and deletes their
/// messages' first-receive records; a handle of an ended delivery ends nothing.
async fn delete_deliveries(caller: &Caller, q: &Queue, named: &[Named]) -> SqsResult<()> {
    if named.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    rmq_client::pipe_ack_ids(&mut pipe, &q.name, named.iter().map(|n| n.delivery).collect());
    let records: Vec<String> = named.iter().filter_map(|n| n.message.as_ref()).map(crate::first_receive::field).collect();
    if !records.is_empty() {
        pipe.hdel(keys::first_receives(&q.name), records).ignore();
    }
    let _: Vec<i64> = rmq_client::write(&caller.backend, &q.name, pipe, "the deliveries are ended").await?;
    Ok(())
}

pub async fn delete_message(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let named = read_handle(&q, required(input, "ReceiptHandle")?)?;
    delete_deliveries(caller, &q, &[named]).await?;
    Ok(json!({}))
}

pub async fn delete_message_batch(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let entries = batch_entries(input, "DeleteMessageBatch")?;
    let (mut ids, mut named, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for (id, e) in entries {
        match required(e, "ReceiptHandle").and_then(|h| read_handle(&q, h)) {
            Ok(delivery) => {
                ids.push(json!({"Id": id}));
                named.push(delivery);
            }
            Err(err) => failures.push(failed(&id, &err)),
        }
    }
    delete_deliveries(caller, &q, &named).await?;
    Ok(json!({"Successful": ids, "Failed": failures}))
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

fn visibility_timeout(v: &Value) -> SqsResult<i64> {
    int_field(v, "VisibilityTimeout", 0, 43_200)?
        .ok_or_else(|| SqsError::missing_parameter("The request must contain the parameter VisibilityTimeout."))
}

pub async fn change_visibility(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let t = visibility_timeout(input)?;
    change_one(caller, &q, required(input, "ReceiptHandle")?, t).await?;
    Ok(json!({}))
}

pub async fn change_visibility_batch(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let entries = batch_entries(input, "ChangeMessageVisibilityBatch")?;
    let (mut ok, mut failures) = (Vec::new(), Vec::new());
    for (id, e) in entries {
        let r = match (required(e, "ReceiptHandle"), visibility_timeout(e)) {
            (Ok(h), Ok(t)) => change_one(caller, &q, h, t).await,
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        match r {
            Ok(()) => ok.push(json!({"Id": id})),
            Err(err) if err.sender_fault() => failures.push(failed(&id, &err)),
            Err(err) => return Err(err),
        }
    }
    Ok(json!({"Successful": ok, "Failed": failures}))
}
