//! The tag actions' requests (TagQueue, UntagQueue, ListQueueTags), read by
//! crate::request_fields::parse, and SQS's tag limits.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::errors::{SqsError, SqsResult};
use crate::request_fields::{ByQueueUrl, Names, QueueUrl, StringMap};

/// SQS's tag limits: at most 50 on a queue (`existing` more than `tags` has already), keys
/// of 1–128 characters and values of at most 256.
pub fn check_tags(queue: &str, tags: &BTreeMap<String, String>, existing: usize) -> SqsResult<()> {
    if tags.len() + existing > 50 {
        return Err(SqsError::invalid_parameter_value(format!("Too many tags added for queue {queue}.")));
    }
    if tags.keys().any(|k| k.is_empty() || k.chars().count() > 128) {
        return Err(SqsError::invalid_parameter_value("Tag keys must be between 1 and 128 characters in length."));
    }
    if tags.values().any(|v| v.chars().count() > 256) {
        return Err(SqsError::invalid_parameter_value("Tag values must be at most 256 characters in length."));
    }
    Ok(())
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct TagQueue {
    pub queue_url: QueueUrl,
    /// Required, not empty: checked by the action once the queue is found (SQS's order).
    #[serde(default)]
    pub tags: StringMap,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct UntagQueue {
    pub queue_url: QueueUrl,
    /// Required, not empty: checked by the action once the queue is found.
    #[serde(default)]
    pub tag_keys: Names,
}

pub type ListQueueTags = ByQueueUrl;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_fields::parse;

    #[test]
    fn tag_requests_read_typed() {
        let t: TagQueue = parse(br#"{"QueueUrl":"q","Tags":{"a":"1"}}"#).unwrap();
        assert_eq!((t.queue_url.0.as_str(), t.tags.0["a"].as_str()), ("q", "1"));
        let u: UntagQueue = parse(br#"{"QueueUrl":"q","TagKeys":null}"#).unwrap();
        assert!(u.tag_keys.0.is_empty());
        assert_eq!(parse::<TagQueue>(br#"{"QueueUrl":"q","Tags":{"a":1}}"#).unwrap_err().code, "SerializationException");
        assert_eq!(parse::<UntagQueue>(br#"{"QueueUrl":"q","TagKeys":[1]}"#).unwrap_err().code, "SerializationException");
    }

    #[test]
    fn tag_limits() {
        let many: BTreeMap<String, String> = (0..51).map(|i| (i.to_string(), String::new())).collect();
        assert_eq!(check_tags("q", &many, 0).unwrap_err().message, "Too many tags added for queue q.");
        let one = BTreeMap::from([("k".to_string(), "v".repeat(256))]);
        assert!(check_tags("q", &one, 49).is_ok());
        assert!(check_tags("q", &one, 50).is_err());
        assert!(check_tags("q", &BTreeMap::from([("k".to_string(), "v".repeat(257))]), 0).is_err());
        assert!(check_tags("q", &BTreeMap::from([("k".repeat(129), String::new())]), 0).is_err());
    }
}
