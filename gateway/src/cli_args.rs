//! The command line (and its environment variables): what `rmq-gateway --help` lists.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::{queue, redis_backend, redis_client};

#[derive(Parser, Debug)]
#[command(name = "rmq-gateway", about = "The Amazon SQS API over RMQ queues")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9324")]
    pub listen: SocketAddr,
    /// The Redis server with the RMQ module: redis://[user:pass@]host:port[/db],
    /// rediss://… for TLS, or unix:///path/to/redis.sock. Without a password in it, the
    /// user and password in RMQ_REDIS_USERNAME and RMQ_REDIS_PASSWORD.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    pub redis: String,
    /// Redis Cluster seed nodes instead of --redis: URL[,URL…].
    #[arg(long, conflicts_with = "redis", value_delimiter = ',')]
    pub cluster: Option<Vec<String>>,
    /// With rediss:// URLs: the CA certificates (PEM) Redis' certificate is checked against
    /// (default: the system's).
    #[arg(long)]
    pub redis_ca: Option<PathBuf>,
    /// With rediss:// URLs: the client certificate (PEM) for a Redis that asks for one
    /// (tls-auth-clients); with --redis-key.
    #[arg(long, requires = "redis_key")]
    pub redis_cert: Option<PathBuf>,
    /// The private key (PEM) of --redis-cert.
    #[arg(long, requires = "redis_cert")]
    pub redis_key: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM); with --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Access keys, one per line: ACCESS_KEY_ID SECRET_ACCESS_KEY [REDIS_USER REDIS_PASSWORD].
    #[arg(long, env = "RMQ_GATEWAY_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
    /// The region requests must be signed for.
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// The account id in queue URLs and ARNs (12 digits).
    #[arg(long, default_value = "000000000000", value_parser = parse_account)]
    pub account: String,
    /// The base of queue URLs (default http://ADDR:PORT).
    #[arg(long)]
    pub public_url: Option<String>,
    /// Worker threads (default: one per core). On a small shared machine 1 costs less CPU
    /// per message (bench/results/bench_gateway.md): everything then runs on the one thread;
    /// gateways are stateless, so more processes scale too.
    #[arg(long)]
    pub threads: Option<std::num::NonZeroUsize>,
    /// Durable mode: SendMessage(Batch) and DeleteMessage(Batch) answer only once this many
    /// replicas hold the change (WAIT), else a retryable 503 ServiceUnavailable. 0: off.
    /// With --cluster, the replicas of the primary serving the queue.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub durable: u32,
    /// How long a queue's attributes read for one request serve the next ones (ms) before
    /// they are read again: another gateway's SetQueueAttributes reaches this one within it.
    /// 0: read them for every request (one more Redis round trip each).
    #[arg(long, default_value_t = queue::FRESH_MS, value_parser = clap::value_parser!(u64).range(0..=queue::MAX_FRESH_MS))]
    pub queue_cache_ms: u64,
    /// Redis connections this gateway opens per Redis user at most (the shared one, long
    /// polls' and durable writes'). Past it a long poll waits its turn within its wait time
    /// (else answers empty) and a durable write within --durable-timeout-ms (else 503).
    #[arg(long, default_value_t = redis_backend::MAX_REDIS_CONNECTIONS, value_parser = parse_max_connections)]
    pub max_redis_connections: usize,
    /// How long durable mode waits for the replicas (ms).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=2_147_483_648))]
    pub durable_timeout_ms: u64,
}

impl Args {
    /// The Redis URLs the gateway connects to: --redis, or the --cluster seeds.
    pub fn redis_urls(&self) -> Vec<String> {
        self.cluster.clone().unwrap_or_else(|| vec![self.redis.clone()])
    }

    pub fn tls_files(&self) -> redis_client::TlsFiles {
        redis_client::TlsFiles { ca: self.redis_ca.clone(), cert: self.redis_cert.clone(), key: self.redis_key.clone() }
    }

    pub fn target(&self) -> redis_backend::Target {
        match &self.cluster {
            Some(seeds) => redis_backend::Target::Cluster(seeds.clone()),
            None => redis_backend::Target::Single(self.redis.clone()),
        }
    }
}

fn parse_account(s: &str) -> Result<String, String> {
    if s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit()) {
        Ok(s.to_string())
    } else {
        Err("an account id is 12 digits".into())
    }
}

fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (2..=1_000_000).contains(&n) => Ok(n),
        _ => Err("a number from 2 (the shared connection and one more) to 1000000".into()),
    }
}
