//! SQS's checks of a queue's settable attributes (CreateQueue, SetQueueAttributes), and the
//! RedrivePolicy they read.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::errors::{SqsError, SqsResult};
use crate::input::valid_queue_name;

/// Checks settable attributes as SQS does; `creating` allows FifoQueue.
pub fn check_attributes(attrs: &BTreeMap<String, String>, fifo: bool, creating: bool) -> SqsResult<()> {
    for (k, v) in attrs {
        let range = match k.as_str() {
            "DelaySeconds" => Some((0, 900)),
            "MaximumMessageSize" => Some((1024, 1_048_576)),
            "MessageRetentionPeriod" => Some((60, 1_209_600)),
            "ReceiveMessageWaitTimeSeconds" => Some((0, 20)),
            "VisibilityTimeout" => Some((0, 43_200)),
            _ => None,
        };
        let ok = match (k.as_str(), range) {
            (_, Some((lo, hi))) => v.parse::<i64>().is_ok_and(|n| (lo..=hi).contains(&n)),
            ("FifoQueue", _) => creating && ((v == "true") == fifo) && (v == "true" || v == "false"),
            ("ContentBasedDeduplication", _) => fifo && (v == "true" || v == "false"),
            ("DeduplicationScope", _) => fifo && (v == "messageGroup" || v == "queue"),
            ("FifoThroughputLimit", _) => fifo && (v == "perQueue" || v == "perMessageGroupId"),
            ("SqsManagedSseEnabled", _) => v == "true" || v == "false",
            ("KmsDataKeyReusePeriodSeconds", _) => v.parse::<i64>().is_ok_and(|n| (60..=86_400).contains(&n)),
            ("RedrivePolicy", _) => redrive_policy(v).map(|_| true)?,
            ("Policy" | "RedriveAllowPolicy" | "KmsMasterKeyId", _) => true,
            _ => return Err(SqsError::invalid_attribute_name(format!("Unknown Attribute {k}."))),
        };
        if !ok {
            return Err(SqsError::invalid_attribute_value(format!("Invalid value for the parameter {k}.")));
        }
    }
    Ok(())
}

/// The attributes that an empty value removes rather than sets.
pub fn removable(name: &str) -> bool {
    matches!(name, "Policy" | "RedrivePolicy" | "RedriveAllowPolicy")
}

/// A checked RedrivePolicy: the target queue and maxReceiveCount.
pub struct Policy {
    pub target: String,
    pub max_receive_count: i64,
}

/// Reads a RedrivePolicy value ("" removes the policy).
pub fn redrive_policy(value: &str) -> SqsResult<Option<Policy>> {
    if value.is_empty() {
        return Ok(None);
    }
    let invalid = |why: &str| SqsError::invalid_attribute_value(format!("Invalid value for the parameter RedrivePolicy. Reason: {why}"));
    let v: Value = serde_json::from_str(value).map_err(|_| invalid("it is not JSON"))?;
    let arn = v.get("deadLetterTargetArn").and_then(Value::as_str).ok_or_else(|| invalid("deadLetterTargetArn is missing"))?;
    let max = match v.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .filter(|n| (1..=1000).contains(n))
    .ok_or_else(|| invalid("maxReceiveCount must be an integer from 1 to 1000"))?;
    let target = arn.rsplit(':').next().unwrap_or("");
    if !arn.starts_with("arn:") || !valid_queue_name(target) {
        return Err(invalid("deadLetterTargetArn is not a queue ARN"));
    }
    Ok(Some(Policy { target: target.to_string(), max_receive_count: max }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_checked_as_sqs_does() {
        let one = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(check_attributes(&one("VisibilityTimeout", "43200"), false, false).is_ok());
        assert_eq!(check_attributes(&one("VisibilityTimeout", "43201"), false, false).unwrap_err().code, "InvalidAttributeValue");
        assert_eq!(check_attributes(&one("Nope", "1"), false, false).unwrap_err().message, "Unknown Attribute Nope.");
        assert!(check_attributes(&one("FifoQueue", "true"), true, true).is_ok());
        assert!(check_attributes(&one("FifoQueue", "true"), true, false).is_err());
        assert!(check_attributes(&one("ContentBasedDeduplication", "true"), false, true).is_err());
        assert!(removable("Policy") && !removable("DelaySeconds"));
    }

    #[test]
    fn redrive_policies() {
        let p = redrive_policy(r#"{"deadLetterTargetArn":"arn:aws:sqs:r:1:dlq","maxReceiveCount":"3"}"#).unwrap().unwrap();
        assert_eq!((p.target.as_str(), p.max_receive_count), ("dlq", 3));
        assert!(redrive_policy("").unwrap().is_none());
        let why = |v: &str| redrive_policy(v).err().map(|e| e.message).unwrap_or_default();
        assert!(why("{").ends_with("it is not JSON"));
        assert!(why(r#"{"maxReceiveCount":1}"#).ends_with("deadLetterTargetArn is missing"));
        assert!(why(r#"{"deadLetterTargetArn":"arn:a:dlq","maxReceiveCount":1001}"#).ends_with("an integer from 1 to 1000"));
        assert!(why(r#"{"deadLetterTargetArn":"x:dlq","maxReceiveCount":1}"#).ends_with("is not a queue ARN"));
    }
}
