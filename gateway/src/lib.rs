//! rmq-gateway's pure parts: SQS's errors, a request's admission (SigV4, a presigned one's
//! parameters in its query string, every action's typed request and its checks), the
//! stored message format and SQS's MD5s. A library so that the fuzz targets (gateway/fuzz)
//! call them without a server; the binary (main.rs) adds HTTP, Redis and the actions.

pub mod errors;
pub mod gateway_keys;
pub mod input;
pub mod md5s;
pub mod message;
pub mod message_requests;
pub mod move_task_requests;
pub mod presigned;
pub mod query_string;
pub mod queue_attribute_checks;
pub mod queue_requests;
pub mod request_admission;
pub mod request_fields;
pub mod rmq_kind;
pub mod sigv4;
pub mod sqs_requests;
pub mod tag_requests;
