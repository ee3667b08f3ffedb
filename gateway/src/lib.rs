//! rmq-gateway's pure parts: SQS's errors, reading a request's input (a presigned one's
//! from its query string too), SigV4, the stored message format and SQS's MD5s. A library
//! so that the fuzz targets (gateway/fuzz) call them without a server; the binary
//! (main.rs) adds HTTP, Redis and the actions.

pub mod errors;
pub mod gateway_keys;
pub mod input;
pub mod md5s;
pub mod message;
pub mod message_requests;
pub mod presigned;
pub mod query_string;
pub mod request_fields;
pub mod rmq_kind;
pub mod sigv4;
