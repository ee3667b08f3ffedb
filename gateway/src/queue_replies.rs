//! The JSON bodies of the queue, attribute, tag and move task actions, serialised from
//! these types (crate::replies::to_body); an action that answers nothing but success
//! answers crate::replies::Done.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// CreateQueue, GetQueueUrl.
#[derive(Serialize)]
pub struct QueueUrlReply {
    #[serde(rename = "QueueUrl")]
    pub queue_url: String,
}

#[derive(Serialize)]
pub struct QueueUrls {
    #[serde(rename = "QueueUrls")]
    pub queue_urls: Vec<String>,
    #[serde(rename = "NextToken", skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// ListDeadLetterSourceQueues (SQS spells its field so).
#[derive(Serialize)]
pub struct DeadLetterSources {
    #[serde(rename = "queueUrls")]
    pub queue_urls: Vec<String>,
}

/// GetQueueAttributes: `{}` when none was asked for.
#[derive(Serialize)]
pub struct QueueAttributes {
    #[serde(rename = "Attributes", skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// ListQueueTags: `{}` for a queue without tags.
#[derive(Serialize)]
pub struct QueueTags {
    #[serde(rename = "Tags", skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

#[derive(Serialize)]
pub struct TaskStarted {
    #[serde(rename = "TaskHandle")]
    pub task_handle: String,
}

#[derive(Serialize)]
pub struct TaskCancelled {
    #[serde(rename = "ApproximateNumberOfMessagesMoved")]
    pub moved: i64,
}

#[derive(Serialize)]
pub struct MoveTasks {
    #[serde(rename = "Results")]
    pub results: Vec<MoveTask>,
}

/// A move task as its state hash holds it (crate::movetask): what the hash has, counts as
/// numbers.
#[derive(Serialize, Default)]
#[serde(rename_all = "PascalCase")]
pub struct MoveTask {
    #[serde(skip_serializing_if = "Option::is_none")]
    task_handle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    destination_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approximate_number_of_messages_moved: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approximate_number_of_messages_to_move: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_number_of_messages_per_second: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_reason: Option<String>,
}

impl MoveTask {
    pub fn of_hash(mut h: HashMap<String, String>) -> MoveTask {
        let num = |k: &str| -> Option<i64> { h.get(k).and_then(|v| v.parse().ok()) };
        let (moved, to_move, rate, started) = (
            num("ApproximateNumberOfMessagesMoved"),
            num("ApproximateNumberOfMessagesToMove"),
            num("MaxNumberOfMessagesPerSecond"),
            num("StartedTimestamp"),
        );
        MoveTask {
            task_handle: h.remove("TaskHandle"),
            status: h.remove("Status"),
            source_arn: h.remove("SourceArn"),
            destination_arn: h.remove("DestinationArn"),
            approximate_number_of_messages_moved: moved,
            approximate_number_of_messages_to_move: to_move,
            max_number_of_messages_per_second: rate,
            started_timestamp: started,
            failure_reason: h.remove("FailureReason"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replies::to_body;

    #[test]
    fn queue_bodies_hold_what_is_there() {
        assert_eq!(to_body(&QueueTags { tags: BTreeMap::new() }), b"{}");
        assert_eq!(to_body(&QueueAttributes { attributes: BTreeMap::from([("A".into(), "1".into())]) }), br#"{"Attributes":{"A":"1"}}"#);
        assert_eq!(to_body(&QueueUrls { queue_urls: vec!["u".into()], next_token: None }), br#"{"QueueUrls":["u"]}"#);
        assert_eq!(to_body(&DeadLetterSources { queue_urls: vec![] }), br#"{"queueUrls":[]}"#);
        let h = HashMap::from([
            ("TaskHandle".to_string(), "12".to_string()),
            ("Status".to_string(), "RUNNING".to_string()),
            ("ApproximateNumberOfMessagesMoved".to_string(), "3".to_string()),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&to_body(&MoveTasks { results: vec![MoveTask::of_hash(h)] })).unwrap();
        assert_eq!(v, serde_json::json!({"Results": [{"TaskHandle": "12", "Status": "RUNNING", "ApproximateNumberOfMessagesMoved": 3}]}));
    }
}
