//! The message move task actions' requests (StartMessageMoveTask, ListMessageMoveTasks,
//! CancelMessageMoveTask), read by crate::request_fields::parse. The ARNs are read by the
//! action, which answers a missing queue by its ARN.

use serde::Deserialize;

use crate::request_fields::Bounded;

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct StartMessageMoveTask {
    pub source_arn: String,
    #[serde(default)]
    pub destination_arn: Option<String>,
    #[serde(default)]
    pub max_number_of_messages_per_second: Option<Bounded<1, 500>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ListMessageMoveTasks {
    pub source_arn: String,
    /// Checked, though a queue has one task at most to list.
    #[serde(default)]
    pub max_results: Option<Bounded<1, 10>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct CancelMessageMoveTask {
    pub task_handle: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_fields::parse;

    #[test]
    fn move_task_requests_read_typed() {
        let s: StartMessageMoveTask = parse(br#"{"SourceArn":"arn:a","MaxNumberOfMessagesPerSecond":500}"#).unwrap();
        assert_eq!(
            (s.source_arn.as_str(), s.destination_arn, s.max_number_of_messages_per_second.map(|r| r.0)),
            ("arn:a", None, Some(500))
        );
        assert_eq!(
            parse::<StartMessageMoveTask>(br#"{"SourceArn":"a","MaxNumberOfMessagesPerSecond":501}"#).unwrap_err().message,
            "Value 501 for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500, if provided."
        );
        assert_eq!(parse::<ListMessageMoveTasks>(b"{}").unwrap_err().message, "The request must contain the parameter SourceArn.");
        assert_eq!(parse::<ListMessageMoveTasks>(br#"{"SourceArn":"a","MaxResults":11}"#).unwrap_err().code, "InvalidParameterValue");
        assert_eq!(parse::<CancelMessageMoveTask>(br#"{"TaskHandle":7}"#).unwrap_err().code, "SerializationException");
        assert_eq!(parse::<CancelMessageMoveTask>(br#"{"TaskHandle":"h"}"#).unwrap().task_handle, "h");
    }
}
