//! The SQS actions, by family (one file each under actions/): each takes its typed request
//! (crate::sqs_requests, read and checked before), then runs the action's RMQ commands
//! (crate::rmq_client) in one Redis round trip — after another that reads the queue's
//! attributes, unless they were read within `--queue-cache-ms` (crate::queue).

mod caller;
mod delivery_actions;
mod move_task_actions;
mod queue_actions;
mod queue_attributes;
mod receive_actions;
mod send_actions;
mod tag_actions;

pub use caller::Caller;

use crate::errors::SqsResult;
use crate::gateway_state::Gateway;
use crate::sqs_requests::SqsRequest;

/// The action's response body.
pub async fn dispatch(gw: &Gateway, caller: &Caller, request: SqsRequest) -> SqsResult<Vec<u8>> {
    use SqsRequest as R;
    match request {
        R::SendMessage(r) => send_actions::send_message(caller, r).await,
        R::SendMessageBatch(r) => send_actions::send_message_batch(caller, r).await,
        R::ReceiveMessage(r) => receive_actions::receive_message(gw, caller, r).await,
        R::DeleteMessage(r) => delivery_actions::delete_message(caller, r).await,
        R::DeleteMessageBatch(r) => delivery_actions::delete_message_batch(caller, r).await,
        R::ChangeMessageVisibility(r) => delivery_actions::change_visibility(caller, r).await,
        R::ChangeMessageVisibilityBatch(r) => delivery_actions::change_visibility_batch(caller, r).await,
        R::CreateQueue(r) => queue_actions::create_queue(gw, caller, r).await,
        R::GetQueueUrl(r) => queue_actions::get_queue_url(gw, caller, r).await,
        R::ListQueues(r) => queue_actions::list_queues(gw, caller, r).await,
        R::DeleteQueue(r) => queue_actions::delete_queue(caller, r).await,
        R::PurgeQueue(r) => queue_actions::purge_queue(caller, r).await,
        R::GetQueueAttributes(r) => queue_attributes::get_queue_attributes(gw, caller, r).await,
        R::SetQueueAttributes(r) => queue_attributes::set_queue_attributes(caller, r).await,
        R::ListDeadLetterSourceQueues(r) => queue_actions::list_dead_letter_source_queues(gw, caller, r).await,
        R::StartMessageMoveTask(r) => move_task_actions::start_message_move_task(gw, caller, r).await,
        R::ListMessageMoveTasks(r) => move_task_actions::list_message_move_tasks(caller, r).await,
        R::CancelMessageMoveTask(r) => crate::movetask::cancel(&caller.backend, &r.task_handle).await,
        R::TagQueue(r) => tag_actions::tag_queue(caller, r).await,
        R::UntagQueue(r) => tag_actions::untag_queue(caller, r).await,
        R::ListQueueTags(r) => tag_actions::list_queue_tags(caller, r).await,
    }
}
