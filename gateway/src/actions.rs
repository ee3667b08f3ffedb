//! The SQS actions, by family (one file each under actions/): validate as SQS does, then the
//! action's RMQ commands (crate::rmq_client) in one Redis round trip — after another that
//! reads the queue's attributes, unless they were read within `--queue-cache-ms`
//! (crate::queue).

mod caller;
mod delivery_actions;
mod move_task_actions;
mod queue_actions;
mod queue_attributes;
mod receive_actions;
mod send_actions;
mod tag_actions;

pub use caller::Caller;

use crate::errors::{SqsError, SqsResult};
use crate::gateway_state::Gateway;
use crate::input::required;
use crate::replies::to_body;
use crate::request_fields::parse;

/// The action's response body, for the request body `body`.
pub async fn dispatch(gw: &Gateway, caller: &Caller, action: &str, body: &[u8]) -> SqsResult<Vec<u8>> {
    // The message actions read typed requests and answer typed replies (crate::message_requests,
    // crate::replies); the others read the body as a JSON value.
    match action {
        "SendMessage" => return send_actions::send_message(caller, parse(body)?).await,
        "SendMessageBatch" => return send_actions::send_message_batch(caller, parse(body)?).await,
        "ReceiveMessage" => return receive_actions::receive_message(gw, caller, parse(body)?).await,
        "DeleteMessage" => return delivery_actions::delete_message(caller, parse(body)?).await,
        "DeleteMessageBatch" => return delivery_actions::delete_message_batch(caller, parse(body)?).await,
        "ChangeMessageVisibility" => return delivery_actions::change_visibility(caller, parse(body)?).await,
        "ChangeMessageVisibilityBatch" => return delivery_actions::change_visibility_batch(caller, parse(body)?).await,
        _ => {}
    }
    let input = &crate::input::parse_body(body)?;
    let value = match action {
        "CreateQueue" => queue_actions::create_queue(gw, caller, input).await,
        "GetQueueUrl" => queue_actions::get_queue_url(gw, caller, input).await,
        "ListQueues" => queue_actions::list_queues(gw, caller, input).await,
        "DeleteQueue" => queue_actions::delete_queue(caller, input).await,
        "PurgeQueue" => queue_actions::purge_queue(caller, input).await,
        "GetQueueAttributes" => queue_attributes::get_queue_attributes(gw, caller, input).await,
        "SetQueueAttributes" => queue_attributes::set_queue_attributes(caller, input).await,
        "ListDeadLetterSourceQueues" => queue_actions::list_dead_letter_source_queues(gw, caller, input).await,
        "StartMessageMoveTask" => move_task_actions::start_message_move_task(gw, caller, input).await,
        "ListMessageMoveTasks" => move_task_actions::list_message_move_tasks(caller, input).await,
        "CancelMessageMoveTask" => crate::movetask::cancel(&caller.backend, required(input, "TaskHandle")?).await,
        "TagQueue" => tag_actions::tag_queue(caller, input).await,
        "UntagQueue" => tag_actions::untag_queue(caller, input).await,
        "ListQueueTags" => tag_actions::list_queue_tags(caller, input).await,
        _ => Err(SqsError::unsupported_operation(format!("{action} is not supported by rmq-gateway"))),
    }?;
    Ok(to_body(&value))
}
