//! The queue actions' requests: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
//! PurgeQueue, ListDeadLetterSourceQueues, GetQueueAttributes and SetQueueAttributes, read
//! by crate::request_fields::parse. What depends on a stored queue (its type, its
//! attributes) is checked by the action.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use serde::{Deserialize, Deserializer};

use crate::errors::{SqsError, SqsResult};
use crate::input::valid_queue_name;
use crate::queue_attribute_checks::check_attributes;
use crate::request_fields::{fail, Bounded, ByQueueUrl, Names, QueueUrl, StringMap};
use crate::rmq_kind::{self, KIND_ATTRIBUTE};
use crate::tag_requests::check_tags;

/// A new queue's name: SQS's rule for one, with its own text.
#[derive(Debug)]
pub struct NewQueueName(pub String);

impl<'de> Deserialize<'de> for NewQueueName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if valid_queue_name(&name) {
            Ok(NewQueueName(name))
        } else {
            Err(fail(|_| {
                SqsError::invalid_parameter_value(
                    "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length (a FIFO queue's name ends in .fifo)",
                )
            }))
        }
    }
}

/// An existing queue's name (GetQueueUrl): one that cannot be a queue's does not exist.
#[derive(Debug)]
pub struct QueueName(pub String);

impl<'de> Deserialize<'de> for QueueName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if valid_queue_name(&name) {
            Ok(QueueName(name))
        } else {
            Err(fail(|_| SqsError::queue_does_not_exist("The specified queue does not exist.")))
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct CreateQueue {
    pub queue_name: NewQueueName,
    #[serde(default)]
    pub attributes: StringMap,
    /// CreateQueue's tags are `tags` in SQS's JSON (TagQueue's are `Tags`).
    #[serde(default, rename = "tags")]
    pub tags: StringMap,
}

impl CreateQueue {
    /// The request after SQS's checks of its attributes and tags, with the RMQ kind its
    /// tags choose among its attributes.
    pub fn checked(mut self) -> SqsResult<CreateQueue> {
        let (name, attrs) = (&self.queue_name.0, &mut self.attributes.0);
        let fifo = name.ends_with(".fifo");
        if fifo && attrs.get("FifoQueue").map(String::as_str) != Some("true") {
            return Err(SqsError::invalid_parameter_value("The name of a FIFO queue can only end in .fifo when FifoQueue is true"));
        }
        check_attributes(attrs, fifo, true)?;
        check_tags(name, &self.tags.0, 0)?;
        if let Some(kind) = rmq_kind::kind_of_tags(&self.tags.0, fifo)? {
            rmq_kind::check_queue_attributes(kind, attrs)?;
            attrs.insert(KIND_ATTRIBUTE.into(), kind.as_str().into());
        }
        Ok(self)
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueUrl {
    pub queue_name: QueueName,
}

/// ListQueues' NextToken: the last name of the page before.
#[derive(Debug)]
pub struct NextToken(pub String);

impl<'de> Deserialize<'de> for NextToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let token = String::deserialize(d)?;
        match B64URL.decode(token).ok().and_then(|b| String::from_utf8(b).ok()) {
            Some(after) => Ok(NextToken(after)),
            None => Err(fail(|_| SqsError::invalid_parameter_value("Invalid NextToken"))),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ListQueues {
    #[serde(default)]
    pub queue_name_prefix: Option<String>,
    #[serde(default)]
    pub max_results: Option<Bounded<1, 1000>>,
    #[serde(default)]
    pub next_token: Option<NextToken>,
}

pub type DeleteQueue = ByQueueUrl;
pub type PurgeQueue = ByQueueUrl;
pub type ListDeadLetterSourceQueues = ByQueueUrl;

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueAttributes {
    pub queue_url: QueueUrl,
    #[serde(default)]
    pub attribute_names: Names,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct SetQueueAttributes {
    pub queue_url: QueueUrl,
    /// Checked against the queue's type by the action (crate::queue_attribute_checks).
    #[serde(default)]
    pub attributes: StringMap,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_fields::{parse, refused};

    #[test]
    fn queue_requests_read_typed() {
        let c: CreateQueue = parse(br#"{"QueueName":"a.fifo","Attributes":{"FifoQueue":"true"},"tags":{"t":"v"},"Tags":5}"#).unwrap();
        let c = c.checked().unwrap();
        assert_eq!((c.queue_name.0.as_str(), c.tags.0["t"].as_str()), ("a.fifo", "v"));
        let l: ListQueues = parse(br#"{"QueueNamePrefix":"p","MaxResults":2,"NextToken":"cTE"}"#).unwrap();
        assert_eq!(
            (l.queue_name_prefix.as_deref(), l.max_results.map(|m| m.0), l.next_token.map(|t| t.0)),
            (Some("p"), Some(2), Some("q1".into()))
        );
        let l: ListQueues = parse(br#"{"MaxResults":null,"NextToken":null}"#).unwrap();
        assert!(l.max_results.is_none() && l.next_token.is_none() && l.queue_name_prefix.is_none());
        let g: GetQueueAttributes = parse(br#"{"QueueUrl":"http://h/1/q","AttributeNames":["All"]}"#).unwrap();
        assert_eq!((g.queue_url.0.as_str(), g.attribute_names.0.as_slice()), ("q", ["All".to_string()].as_slice()));
        let s: SetQueueAttributes = parse(br#"{"QueueUrl":"q"}"#).unwrap();
        assert!(s.attributes.0.is_empty());
    }

    #[test]
    fn queue_refusals_speak_as_sqs() {
        assert_eq!(refused::<CreateQueue>("{}"), ("MissingParameter", "The request must contain the parameter QueueName.".into()));
        assert_eq!(refused::<CreateQueue>(r#"{"QueueName":"a b"}"#).0, "InvalidParameterValue");
        assert_eq!(refused::<CreateQueue>(r#"{"QueueName":"a","Attributes":{"DelaySeconds":1}}"#).0, "SerializationException");
        assert_eq!(refused::<CreateQueue>(r#"{"QueueName":"a","tags":[]}"#).0, "SerializationException");
        let checked = |body: &str| parse::<CreateQueue>(body.as_bytes()).unwrap().checked().unwrap_err().code;
        assert_eq!(checked(r#"{"QueueName":"a.fifo"}"#), "InvalidParameterValue");
        assert_eq!(checked(r#"{"QueueName":"a","Attributes":{"DelaySeconds":"901"}}"#), "InvalidAttributeValue");
        assert_eq!(checked(r#"{"QueueName":"a","Attributes":{"Nope":"1"}}"#), "InvalidAttributeName");
        assert_eq!(checked(r#"{"QueueName":"a","tags":{"":"v"}}"#), "InvalidParameterValue");
        assert_eq!(refused::<GetQueueUrl>(r#"{"QueueName":"a b"}"#), ("QueueDoesNotExist", "The specified queue does not exist.".into()));
        assert_eq!(refused::<GetQueueUrl>(r#"{"QueueName":null}"#).0, "MissingParameter");
        assert_eq!(refused::<ListQueues>(r#"{"NextToken":"!"}"#), ("InvalidParameterValue", "Invalid NextToken".into()));
        assert_eq!(refused::<ListQueues>(r#"{"MaxResults":0}"#).0, "InvalidParameterValue");
        assert_eq!(refused::<ListQueues>(r#"{"QueueNamePrefix":1}"#).0, "SerializationException");
        assert_eq!(refused::<DeleteQueue>("{}"), ("MissingParameter", "The request must contain the parameter QueueUrl.".into()));
        assert_eq!(refused::<GetQueueAttributes>(r#"{"QueueUrl":"q","AttributeNames":"All"}"#).0, "SerializationException");
    }
}
