//! SQS's errors as the AWS JSON 1.0 protocol sends them: `{"__type": "com.amazonaws.sqs#Code",
//! "message": …}` and the `x-amzn-query-error` header, from which the SDKs (query-compatible
//! SQS) take the code they raise as a typed exception.

use axum::http::StatusCode;

#[derive(Debug, Clone)]
pub struct SqsError {
    pub status: StatusCode,
    /// The JSON shape name (`__type`).
    pub code: &'static str,
    /// The query-protocol code and fault (`x-amzn-query-error`).
    pub query: &'static str,
    pub message: String,
}

pub type SqsResult<T> = Result<T, SqsError>;

macro_rules! errors {
    ($($fn_name:ident => $status:ident, $code:literal, $query:literal;)*) => {
        impl SqsError {
            $(pub fn $fn_name(message: impl Into<String>) -> SqsError {
                SqsError { status: StatusCode::$status, code: $code, query: $query, message: message.into() }
            })*
        }
    };
}

errors! {
    queue_does_not_exist => BAD_REQUEST, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender";
    queue_name_exists => BAD_REQUEST, "QueueNameExists", "QueueAlreadyExists;Sender";
    queue_deleted_recently => BAD_REQUEST, "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently;Sender";
    invalid_attribute_name => BAD_REQUEST, "InvalidAttributeName", "InvalidAttributeName;Sender";
    invalid_attribute_value => BAD_REQUEST, "InvalidAttributeValue", "InvalidAttributeValue;Sender";
    invalid_parameter_value => BAD_REQUEST, "InvalidParameterValue", "InvalidParameterValue;Sender";
    missing_parameter => BAD_REQUEST, "MissingParameter", "MissingParameter;Sender";
    receipt_handle_is_invalid => BAD_REQUEST, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender";
    message_not_inflight => BAD_REQUEST, "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight;Sender";
    empty_batch_request => BAD_REQUEST, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest;Sender";
    too_many_entries => BAD_REQUEST, "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest;Sender";
    batch_ids_not_distinct => BAD_REQUEST, "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct;Sender";
    invalid_batch_entry_id => BAD_REQUEST, "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId;Sender";
    batch_request_too_long => BAD_REQUEST, "BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong;Sender";
    invalid_message_contents => BAD_REQUEST, "InvalidMessageContents", "InvalidMessageContents;Sender";
    unsupported_operation => BAD_REQUEST, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender";
    resource_not_found => BAD_REQUEST, "ResourceNotFoundException", "ResourceNotFoundException;Sender";
    serialization => BAD_REQUEST, "SerializationException", "SerializationException;Sender";
    missing_authentication_token => FORBIDDEN, "MissingAuthenticationToken", "MissingAuthenticationToken;Sender";
    invalid_client_token_id => FORBIDDEN, "InvalidClientTokenId", "InvalidClientTokenId;Sender";
    signature_does_not_match => FORBIDDEN, "SignatureDoesNotMatch", "SignatureDoesNotMatch;Sender";
    request_expired => FORBIDDEN, "RequestExpired", "RequestExpired;Sender";
    access_denied => FORBIDDEN, "AccessDenied", "AccessDenied;Sender";
    request_entity_too_large => PAYLOAD_TOO_LARGE, "RequestEntityTooLarge", "RequestEntityTooLarge;Sender";
    request_timeout => REQUEST_TIMEOUT, "RequestTimeout", "RequestTimeout;Sender";
    service_unavailable => SERVICE_UNAVAILABLE, "ServiceUnavailable", "ServiceUnavailable;Server";
    internal => INTERNAL_SERVER_ERROR, "InternalError", "InternalError;Receiver";
}

impl SqsError {
    /// Whether the fault is the caller's (`SenderFault` of a batch entry).
    pub fn sender_fault(&self) -> bool {
        self.query.ends_with(";Sender")
    }

    pub fn body(&self) -> String {
        serde_json::json!({"__type": format!("com.amazonaws.sqs#{}", self.code), "message": self.message}).to_string()
    }
}

/// A Redis error as the client sees it: ACL refusals are `AccessDenied`, a server that
/// cannot answer now is retryable `ServiceUnavailable`; anything else is internal.
impl From<redis::RedisError> for SqsError {
    fn from(e: redis::RedisError) -> SqsError {
        if refused_by_acl(&e) {
            return SqsError::access_denied("the access key's Redis user may not use this queue");
        }
        if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_cluster_error() {
            return SqsError::service_unavailable("the queue store is unavailable; retry");
        }
        tracing::warn!("redis error: {e}");
        SqsError::internal("the queue store refused the request")
    }
}

/// Whether Redis refused a command for the user's ACL: a NOPERM of its own, or one inside
/// a pipeline or MULTI (EXECABORT names the queued commands' errors, as kinds, not codes)
/// or in a script's error text.
pub fn refused_by_acl(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.clone().into_server_errors().is_some_and(|errs| errs.iter().any(|(_, s)| s.code() == "NOPERM"))
        || e.to_string().contains("NOPERM")
}
