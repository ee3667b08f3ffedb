//! The message move task actions: StartMessageMoveTask, ListMessageMoveTasks and
//! CancelMessageMoveTask (the tasks themselves: crate::movetask).

use std::sync::Arc;

use super::caller::{check_writable, load_queue, Caller};
use super::queue_actions::sources_of;
use crate::errors::{SqsError, SqsResult};
use crate::gateway_state::Gateway;
use crate::move_task_requests::{ListMessageMoveTasks, StartMessageMoveTask};
use crate::queue::Queue;
use crate::rmq_client;

/// The dead-letter queue an ARN names, which must exist.
async fn queue_of_arn(caller: &Caller, arn: &str) -> SqsResult<Arc<Queue>> {
    let name = crate::movetask::queue_of_arn(arn).ok_or_else(|| SqsError::invalid_parameter_value(format!("{arn} is not a queue ARN")))?;
    load_queue(caller, name.to_string()).await.map_err(|e| not_found_as_resource(e, &format!("The queue {name} does not exist")))
}

/// A missing queue named by ARN is ResourceNotFound; any other refusal (AccessDenied)
/// stays what it is.
fn not_found_as_resource(e: SqsError, message: &str) -> SqsError {
    if e.code == "QueueDoesNotExist" {
        SqsError::resource_not_found(message)
    } else {
        e
    }
}

pub async fn start_message_move_task(gw: &Gateway, caller: &Caller, r: StartMessageMoveTask) -> SqsResult<Vec<u8>> {
    let q = queue_of_arn(caller, &r.source_arn).await?;
    let rate = r.max_number_of_messages_per_second.map(|m| m.0);
    let dest = crate::movetask::destination(r.destination_arn.as_deref(), &sources_of(caller, &q.name).await?)?;
    let dq = load_queue(caller, dest).await.map_err(|e| not_found_as_resource(e, "The destination queue does not exist"))?;
    // The task takes from one and pushes into the other in the caller's name.
    check_writable(caller, &q.name).await?;
    check_writable(caller, &dq.name).await?;
    let to_move = rmq_client::info(&mut caller.backend.conn.clone(), &q.name).await?.get("waiting").copied().unwrap_or(0);
    crate::movetask::start(caller.backend.clone(), &q.name, &gw.queue_arn(&q.name), &dq.name, &gw.queue_arn(&dq.name), rate, to_move).await
}

pub async fn list_message_move_tasks(caller: &Caller, r: ListMessageMoveTasks) -> SqsResult<Vec<u8>> {
    let q = queue_of_arn(caller, &r.source_arn).await?;
    crate::movetask::list(&caller.backend, &q.name).await
}
