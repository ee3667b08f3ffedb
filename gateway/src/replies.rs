//! The JSON bodies of the message actions (ReceiveMessage, SendMessage(Batch),
//! DeleteMessage(Batch), ChangeMessageVisibility(Batch)), serialised straight from these
//! types rather than through `serde_json::Value` maps, whose every key and value is an
//! allocation of its own.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::message::Attribute;

/// A response body as bytes. The types answered here serialise whatever they hold (their
/// keys are strings; a Vec takes any write).
pub fn to_body<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|_| unreachable!())
}

/// Every response names its request, as SQS's do (`x-amzn-RequestId`, which the SDKs put in
/// their response metadata and errors): a fresh UUID each.
pub async fn with_request_id(mut r: axum::response::Response) -> axum::response::Response {
    let id = uuid::Uuid::new_v4().hyphenated().to_string();
    if let Ok(v) = axum::http::HeaderValue::from_str(&id) {
        r.headers_mut().insert("x-amzn-requestid", v);
    }
    r
}

/// ReceiveMessage: `{}` when nothing was received.
#[derive(Serialize, Default)]
pub struct Receive {
    #[serde(rename = "Messages", skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Received>,
}

#[derive(Serialize)]
pub struct Received {
    #[serde(rename = "MessageId")]
    pub message_id: String,
    #[serde(rename = "ReceiptHandle")]
    pub receipt_handle: String,
    #[serde(rename = "MD5OfBody")]
    pub md5_of_body: String,
    #[serde(rename = "Body")]
    pub body: String,
    /// The system attributes asked for.
    #[serde(rename = "Attributes", skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<&'static str, String>,
    /// With the message attributes asked for, when there are any.
    #[serde(rename = "MD5OfMessageAttributes", skip_serializing_if = "Option::is_none")]
    pub md5_of_message_attributes: Option<String>,
    #[serde(rename = "MessageAttributes", skip_serializing_if = "BTreeMap::is_empty")]
    pub message_attributes: BTreeMap<String, Attribute>,
}

/// SendMessage, or one entry of SendMessageBatch (with its `Id`).
#[derive(Serialize)]
pub struct Sent<'a> {
    #[serde(rename = "Id", skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    #[serde(rename = "MessageId")]
    pub message_id: String,
    #[serde(rename = "MD5OfMessageBody")]
    pub md5_of_message_body: String,
    #[serde(rename = "MD5OfMessageAttributes", skip_serializing_if = "Option::is_none")]
    pub md5_of_message_attributes: Option<String>,
    #[serde(rename = "MD5OfMessageSystemAttributes", skip_serializing_if = "Option::is_none")]
    pub md5_of_message_system_attributes: Option<String>,
    /// FIFO queues only.
    #[serde(rename = "SequenceNumber", skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<String>,
}

#[derive(Serialize)]
pub struct SentBatch<'a> {
    #[serde(rename = "Successful")]
    pub successful: Vec<Sent<'a>>,
    #[serde(rename = "Failed")]
    pub failed: Vec<Failure>,
}

/// A batch entry that failed: its Id and its error.
#[derive(Serialize)]
pub struct Failure {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "SenderFault")]
    pub sender_fault: bool,
    #[serde(rename = "Code")]
    pub code: &'static str,
    #[serde(rename = "Message")]
    pub message: String,
}

impl Failure {
    pub fn of(id: String, e: &crate::errors::SqsError) -> Failure {
        Failure { id, sender_fault: e.sender_fault(), code: e.code, message: e.message.clone() }
    }
}

/// A batch entry that succeeded, where nothing else is said of it.
#[derive(Serialize)]
pub struct Succeeded {
    #[serde(rename = "Id")]
    pub id: String,
}

/// DeleteMessageBatch, ChangeMessageVisibilityBatch.
#[derive(Serialize, Default)]
pub struct BatchResult {
    #[serde(rename = "Successful")]
    pub successful: Vec<Succeeded>,
    #[serde(rename = "Failed")]
    pub failed: Vec<Failure>,
}

/// An action that answers nothing but success: `{}`.
#[derive(Serialize)]
pub struct Done {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_hold_what_is_there() {
        assert_eq!(to_body(&Receive::default()), b"{}");
        let m = Received {
            message_id: "i".into(),
            receipt_handle: "h".into(),
            md5_of_body: "5".into(),
            body: "b\"".into(),
            attributes: BTreeMap::from([("SentTimestamp", "1".to_string())]),
            md5_of_message_attributes: None,
            message_attributes: BTreeMap::new(),
        };
        let v: serde_json::Value = serde_json::from_slice(&to_body(&Receive { messages: vec![m] })).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"Messages": [{"MessageId": "i", "ReceiptHandle": "h", "MD5OfBody": "5", "Body": "b\"",
                "Attributes": {"SentTimestamp": "1"}}]})
        );
        let s = Sent {
            id: Some("0"),
            message_id: "i".into(),
            md5_of_message_body: "5".into(),
            md5_of_message_attributes: None,
            md5_of_message_system_attributes: None,
            sequence_number: Some("00000000000000000001".into()),
        };
        let e = crate::errors::SqsError::invalid_parameter_value("why");
        let v: serde_json::Value =
            serde_json::from_slice(&to_body(&SentBatch { successful: vec![s], failed: vec![Failure::of("1".into(), &e)] })).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"Successful": [{"Id": "0", "MessageId": "i", "MD5OfMessageBody": "5",
                "SequenceNumber": "00000000000000000001"}],
                "Failed": [{"Id": "1", "SenderFault": true, "Code": "InvalidParameterValue", "Message": "why"}]})
        );
        assert_eq!(to_body(&Done {}), b"{}");
        let b = BatchResult { successful: vec![Succeeded { id: "a".into() }], failed: vec![] };
        assert_eq!(to_body(&b), br#"{"Successful":[{"Id":"a"}],"Failed":[]}"#);
    }
}
