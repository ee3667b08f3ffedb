//! The message actions' requests: SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch)
//! and ChangeMessageVisibility(Batch), read by crate::request_fields::parse. What fails a
//! batch entry only (SQS answers it in `Failed`) is checked by the action, per entry.

use serde::Deserialize;
use serde_json::Value;

use crate::request_fields::{Attributes, BatchEntry, Bounded, Entries, Names, QueueUrl};

/// What a send says of its message, entry or not.
#[derive(Debug)]
pub struct Message {
    /// Required: checked per entry.
    pub body: Option<String>,
    pub delay_seconds: Option<i64>,
    pub attributes: Attributes,
    pub system_attributes: Attributes,
    pub group: Option<String>,
    pub dedup: Option<String>,
}

/// A request with a message's fields and its own `$key` (SendMessage's QueueUrl, a batch
/// entry's Id); `split` parts them.
macro_rules! with_message {
    ($(#[$doc:meta])* $name:ident, $key:ident: $key_type:ty) => {
        $(#[$doc])*
        #[derive(Deserialize, Debug)]
        #[serde(rename_all = "PascalCase")]
        pub struct $name {
            pub $key: $key_type,
            #[serde(default)]
            message_body: Option<String>,
            #[serde(default)]
            delay_seconds: Option<Bounded<0, 900>>,
            #[serde(default)]
            message_attributes: Attributes,
            #[serde(default)]
            message_system_attributes: Attributes,
            #[serde(default)]
            message_group_id: Option<String>,
            #[serde(default)]
            message_deduplication_id: Option<String>,
        }

        impl $name {
            pub fn split(self) -> ($key_type, Message) {
                let m = Message {
                    body: self.message_body,
                    delay_seconds: self.delay_seconds.map(|d| d.0),
                    attributes: self.message_attributes,
                    system_attributes: self.message_system_attributes,
                    group: self.message_group_id,
                    dedup: self.message_deduplication_id,
                };
                (self.$key, m)
            }
        }
    };
}

with_message!(SendMessage, queue_url: QueueUrl);
with_message!(SendMessageBatchEntry, id: String);

impl BatchEntry for SendMessageBatchEntry {
    const ACTION: &'static str = "SendMessageBatch";
    fn id(&self) -> &str {
        &self.id
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageBatch {
    pub queue_url: QueueUrl,
    pub entries: Entries<SendMessageBatchEntry>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ReceiveMessage {
    pub queue_url: QueueUrl,
    #[serde(default)]
    pub max_number_of_messages: Option<Bounded<1, 10>>,
    #[serde(default)]
    pub visibility_timeout: Option<Bounded<0, 43_200>>,
    #[serde(default)]
    pub wait_time_seconds: Option<Bounded<0, 20>>,
    #[serde(default)]
    pub attribute_names: Names,
    #[serde(default)]
    pub message_system_attribute_names: Names,
    #[serde(default)]
    pub message_attribute_names: Names,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessage {
    pub queue_url: QueueUrl,
    pub receipt_handle: String,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessageBatchEntry {
    pub id: String,
    /// Required: checked per entry.
    #[serde(default)]
    pub receipt_handle: Option<String>,
}

impl BatchEntry for DeleteMessageBatchEntry {
    const ACTION: &'static str = "DeleteMessageBatch";
    fn id(&self) -> &str {
        &self.id
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessageBatch {
    pub queue_url: QueueUrl,
    pub entries: Entries<DeleteMessageBatchEntry>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibility {
    pub queue_url: QueueUrl,
    pub receipt_handle: String,
    pub visibility_timeout: Bounded<0, 43_200>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibilityBatchEntry {
    pub id: String,
    /// Required: checked per entry.
    #[serde(default)]
    pub receipt_handle: Option<String>,
    /// Required, 0 to 43,200: checked per entry (crate::request_fields::bounded).
    #[serde(default)]
    pub visibility_timeout: Option<Value>,
}

impl BatchEntry for ChangeMessageVisibilityBatchEntry {
    const ACTION: &'static str = "ChangeMessageVisibilityBatch";
    fn id(&self) -> &str {
        &self.id
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibilityBatch {
    pub queue_url: QueueUrl,
    pub entries: Entries<ChangeMessageVisibilityBatchEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_fields::{parse, refused};

    #[test]
    fn requests_read_typed() {
        let r: ReceiveMessage = parse(
            br#"{"QueueUrl":"http://h/000000000000/q1","MaxNumberOfMessages":3,"AttributeNames":null,"MessageAttributeNames":["All"]}"#,
        )
        .unwrap();
        assert_eq!((r.queue_url.0.as_str(), r.max_number_of_messages.map(|m| m.0)), ("q1", Some(3)));
        assert!(r.visibility_timeout.is_none() && r.attribute_names.0.is_empty());
        assert_eq!(r.message_attribute_names.0, ["All"]);
        let (queue, m) = parse::<SendMessage>(br#"{"QueueUrl":"q2","MessageBody":"b","DelaySeconds":null,"Unknown":1}"#).unwrap().split();
        assert_eq!((queue.0.as_str(), m.body.as_deref(), m.delay_seconds), ("q2", Some("b"), None));
        let b: SendMessageBatch = parse(br#"{"QueueUrl":"q","Entries":[{"Id":"a"},{"Id":"b","MessageBody":"x"}]}"#).unwrap();
        assert_eq!(b.entries.0.len(), 2);
        let c: ChangeMessageVisibility = parse(br#"{"QueueUrl":"q","ReceiptHandle":"h","VisibilityTimeout":0}"#).unwrap();
        assert_eq!(c.visibility_timeout.0, 0);
    }

    #[test]
    fn refusals_speak_as_sqs() {
        assert_eq!(refused::<DeleteMessage>("[1]"), ("SerializationException", "The request body must be a JSON object".into()));
        assert_eq!(refused::<DeleteMessage>("{"), ("SerializationException", "The request body is not valid JSON".into()));
        assert_eq!(refused::<DeleteMessage>("{} x"), ("SerializationException", "The request body is not valid JSON".into()));
        let missing = ("MissingParameter", "The request must contain the parameter QueueUrl.".to_string());
        assert_eq!(refused::<DeleteMessage>(""), missing);
        assert_eq!(refused::<DeleteMessage>(r#"{"QueueUrl":null}"#), missing);
        assert_eq!(refused::<DeleteMessage>(r#"{"QueueUrl":5}"#).0, "SerializationException");
        assert_eq!(
            refused::<DeleteMessage>(r#"{"QueueUrl":"http://h/1/a.b","ReceiptHandle":"h"}"#),
            ("QueueDoesNotExist", "The specified queue does not exist.".into())
        );
        assert_eq!(
            refused::<ReceiveMessage>(r#"{"QueueUrl":"q","MaxNumberOfMessages":11}"#),
            (
                "InvalidParameterValue",
                "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.".into()
            )
        );
        assert_eq!(
            refused::<ReceiveMessage>(r#"{"QueueUrl":"q","WaitTimeSeconds":"5"}"#).1,
            "Value \"5\" for parameter WaitTimeSeconds is invalid. Reason: Must be between 0 and 20, if provided."
        );
        assert_eq!(
            refused::<ChangeMessageVisibility>(r#"{"QueueUrl":"q","ReceiptHandle":"h","VisibilityTimeout":null}"#),
            ("MissingParameter", "The request must contain the parameter VisibilityTimeout.".into())
        );
        assert_eq!(
            refused::<SendMessage>(r#"{"QueueUrl":"q","MessageAttributes":{"a":{"StringValue":"x"}}}"#),
            ("InvalidParameterValue", "MessageAttributes: missing field `DataType`".into())
        );
        assert_eq!(refused::<SendMessageBatch>(r#"{"QueueUrl":"q"}"#).1, "The request must contain the parameter Entries.");
        assert_eq!(
            refused::<SendMessageBatch>(r#"{"QueueUrl":"q","Entries":[]}"#),
            ("EmptyBatchRequest", "There should be at least one SendMessageBatchRequestEntry in the request.".into())
        );
        let eleven =
            format!(r#"{{"QueueUrl":"q","Entries":[{}]}}"#, (0..11).map(|i| format!(r#"{{"Id":"{i}"}}"#)).collect::<Vec<_>>().join(","));
        assert_eq!(
            refused::<DeleteMessageBatch>(&eleven),
            ("TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent 11.".into())
        );
        assert_eq!(refused::<DeleteMessageBatch>(r#"{"QueueUrl":"q","Entries":[{"Id":"a b"}]}"#).0, "InvalidBatchEntryId");
        assert_eq!(
            refused::<ChangeMessageVisibilityBatch>(r#"{"QueueUrl":"q","Entries":[{"Id":"a"},{"Id":"a"}]}"#),
            ("BatchEntryIdsNotDistinct", "Id a repeated.".into())
        );
        assert_eq!(refused::<DeleteMessageBatch>(r#"{"QueueUrl":"q","Entries":[{}]}"#).1, "The request must contain the parameter Id.");
        // An entry is an object, never a list read field by field.
        assert_eq!(refused::<DeleteMessageBatch>(r#"{"QueueUrl":"q","Entries":[["a","h"]]}"#).0, "SerializationException");
    }
}
