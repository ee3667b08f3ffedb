//! A request as its action reads it: one typed request per action of the contract, read
//! from the JSON body (crate::request_fields::parse) and checked as far as SQS checks a
//! request without its queue.

use crate::errors::{SqsError, SqsResult};
use crate::message_requests as message;
use crate::move_task_requests as move_task;
use crate::queue_requests as queue;
use crate::request_fields::parse;
use crate::tag_requests as tag;

/// The actions of the contract, each read into its variant of SqsRequest.
pub const ACTIONS: [&str; 21] = [
    "CreateQueue",
    "GetQueueUrl",
    "ListQueues",
    "DeleteQueue",
    "PurgeQueue",
    "GetQueueAttributes",
    "SetQueueAttributes",
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "ListDeadLetterSourceQueues",
    "StartMessageMoveTask",
    "ListMessageMoveTasks",
    "CancelMessageMoveTask",
    "TagQueue",
    "UntagQueue",
    "ListQueueTags",
];

#[derive(Debug)]
pub enum SqsRequest {
    SendMessage(message::SendMessage),
    SendMessageBatch(message::SendMessageBatch),
    ReceiveMessage(message::ReceiveMessage),
    DeleteMessage(message::DeleteMessage),
    DeleteMessageBatch(message::DeleteMessageBatch),
    ChangeMessageVisibility(message::ChangeMessageVisibility),
    ChangeMessageVisibilityBatch(message::ChangeMessageVisibilityBatch),
    CreateQueue(queue::CreateQueue),
    GetQueueUrl(queue::GetQueueUrl),
    ListQueues(queue::ListQueues),
    DeleteQueue(queue::DeleteQueue),
    PurgeQueue(queue::PurgeQueue),
    GetQueueAttributes(queue::GetQueueAttributes),
    SetQueueAttributes(queue::SetQueueAttributes),
    ListDeadLetterSourceQueues(queue::ListDeadLetterSourceQueues),
    StartMessageMoveTask(move_task::StartMessageMoveTask),
    ListMessageMoveTasks(move_task::ListMessageMoveTasks),
    CancelMessageMoveTask(move_task::CancelMessageMoveTask),
    TagQueue(tag::TagQueue),
    UntagQueue(tag::UntagQueue),
    ListQueueTags(tag::ListQueueTags),
}

impl SqsRequest {
    /// The request of `action` in `body`.
    pub fn parse(action: &str, body: &[u8]) -> SqsResult<SqsRequest> {
        use SqsRequest as R;
        Ok(match action {
            "SendMessage" => R::SendMessage(parse(body)?),
            "SendMessageBatch" => R::SendMessageBatch(parse(body)?),
            "ReceiveMessage" => R::ReceiveMessage(parse(body)?),
            "DeleteMessage" => R::DeleteMessage(parse(body)?),
            "DeleteMessageBatch" => R::DeleteMessageBatch(parse(body)?),
            "ChangeMessageVisibility" => R::ChangeMessageVisibility(parse(body)?),
            "ChangeMessageVisibilityBatch" => R::ChangeMessageVisibilityBatch(parse(body)?),
            "CreateQueue" => R::CreateQueue(parse::<queue::CreateQueue>(body)?.checked()?),
            "GetQueueUrl" => R::GetQueueUrl(parse(body)?),
            "ListQueues" => R::ListQueues(parse(body)?),
            "DeleteQueue" => R::DeleteQueue(parse(body)?),
            "PurgeQueue" => R::PurgeQueue(parse(body)?),
            "GetQueueAttributes" => R::GetQueueAttributes(parse(body)?),
            "SetQueueAttributes" => R::SetQueueAttributes(parse(body)?),
            "ListDeadLetterSourceQueues" => R::ListDeadLetterSourceQueues(parse(body)?),
            "StartMessageMoveTask" => R::StartMessageMoveTask(parse(body)?),
            "ListMessageMoveTasks" => R::ListMessageMoveTasks(parse(body)?),
            "CancelMessageMoveTask" => R::CancelMessageMoveTask(parse(body)?),
            "TagQueue" => R::TagQueue(parse(body)?),
            "UntagQueue" => R::UntagQueue(parse(body)?),
            "ListQueueTags" => R::ListQueueTags(parse(body)?),
            _ => {
                // A body that is no JSON object is refused as such, whatever the action.
                parse::<serde::de::IgnoredAny>(body)?;
                return Err(SqsError::unsupported_operation(format!("{action} is not supported by rmq-gateway")));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_reads_its_request() {
        let r = SqsRequest::parse("ListQueueTags", br#"{"QueueUrl":"http://h/1/q"}"#).unwrap();
        assert!(matches!(r, SqsRequest::ListQueueTags(t) if t.queue_url.0 == "q"));
        assert!(matches!(SqsRequest::parse("ListQueues", b"").unwrap(), SqsRequest::ListQueues(_)));
        // CreateQueue's checks are part of its reading.
        assert_eq!(SqsRequest::parse("CreateQueue", br#"{"QueueName":"a.fifo"}"#).unwrap_err().code, "InvalidParameterValue");
        assert_eq!(SqsRequest::parse("Nope", b"{}").unwrap_err().message, "Nope is not supported by rmq-gateway");
        assert_eq!(SqsRequest::parse("Nope", b"[").unwrap_err().code, "SerializationException");
        for action in ACTIONS {
            let refused = SqsRequest::parse(action, b"{}").err().map(|e| e.code);
            assert_ne!(refused, Some("UnsupportedOperation"), "{action}");
        }
    }
}
