//! What a running gateway holds (its names for queues, its keys, its backends, its
//! metrics, whether it is stopping): made by crate::server, read by the actions.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::redis_backend::Backend;
use crate::sigv4::Credentials;

pub struct Gateway {
    pub region: String,
    pub account: String,
    pub public_url: String,
    pub credentials: Option<Credentials>,
    /// The URL's user, and one backend per access key with a Redis user of its own.
    pub default: Arc<Backend>,
    pub per_key: HashMap<String, Arc<Backend>>,
    pub metrics: Metrics,
    pub stopping: watch::Receiver<bool>,
}

impl Gateway {
    pub fn queue_url(&self, name: &str) -> String {
        format!("{}/{}/{}", self.public_url, self.account, name)
    }
    pub fn queue_arn(&self, name: &str) -> String {
        format!("arn:aws:sqs:{}:{}:{}", self.region, self.account, name)
    }
}

/// Resolves once the gateway is stopping.
pub async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
