//! rmq-gateway: the Amazon SQS API (AWS JSON 1.0) over RMQ queues. The contract is
//! docs/gateway.md; the differences from SQS are listed in the README.

mod actions;
mod body_merge;
mod first_receive;
mod https;
mod metrics;
mod movetask;
mod pool;
mod queue;
mod redis_client;
mod redrive;
mod replies;
mod server;
mod startup;
mod store;
mod stored_size;

// The pure parts live in the library (src/lib.rs), which the fuzz targets call too.
use rmq_gateway::{errors, input, md5s, message, presigned, rmq_kind, sigv4};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// mimalloc: a request allocates and frees many small buffers (headers, JSON values,
/// Redis replies); glibc's malloc spent a fifth of the gateway's instructions on them.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "rmq-gateway", about = "The Amazon SQS API over RMQ queues")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9324")]
    listen: SocketAddr,
    /// The Redis server with the RMQ module: redis://[user:pass@]host:port[/db],
    /// rediss://… for TLS, or unix:///path/to/redis.sock. Without a password in it, the
    /// user and password in RMQ_REDIS_USERNAME and RMQ_REDIS_PASSWORD.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Redis Cluster seed nodes instead of --redis: URL[,URL…].
    #[arg(long, conflicts_with = "redis", value_delimiter = ',')]
    cluster: Option<Vec<String>>,
    /// With rediss:// URLs: the CA certificates (PEM) Redis' certificate is checked against
    /// (default: the system's).
    #[arg(long)]
    redis_ca: Option<PathBuf>,
    /// With rediss:// URLs: the client certificate (PEM) for a Redis that asks for one
    /// (tls-auth-clients); with --redis-key.
    #[arg(long, requires = "redis_key")]
    redis_cert: Option<PathBuf>,
    /// The private key (PEM) of --redis-cert.
    #[arg(long, requires = "redis_cert")]
    redis_key: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM); with --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Access keys, one per line: ACCESS_KEY_ID SECRET_ACCESS_KEY [REDIS_USER REDIS_PASSWORD].
    #[arg(long, env = "RMQ_GATEWAY_CREDENTIALS")]
    credentials: Option<PathBuf>,
    /// The region requests must be signed for.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// The account id in queue URLs and ARNs (12 digits).
    #[arg(long, default_value = "000000000000", value_parser = parse_account)]
    account: String,
    /// The base of queue URLs (default http://ADDR:PORT).
    #[arg(long)]
    public_url: Option<String>,
    /// Worker threads (default: one per core). On a small shared machine 1 costs less CPU
    /// per message (bench/results/bench_gateway.md); gateways are stateless, so more
    /// processes scale too.
    #[arg(long)]
    threads: Option<std::num::NonZeroUsize>,
    /// Durable mode: SendMessage(Batch) and DeleteMessage(Batch) answer only once this many
    /// replicas hold the change (WAIT), else a retryable 503 ServiceUnavailable. 0: off.
    /// With --cluster, the replicas of the primary serving the queue.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    durable: u32,
    /// How long a queue's attributes read for one request serve the next ones (ms) before
    /// they are read again: another gateway's SetQueueAttributes reaches this one within it.
    /// 0: read them for every request (one more Redis round trip each).
    #[arg(long, default_value_t = queue::FRESH_MS, value_parser = clap::value_parser!(u64).range(0..=queue::MAX_FRESH_MS))]
    queue_cache_ms: u64,
    /// Redis connections this gateway opens per Redis user at most (the shared one, long
    /// polls' and durable writes'). Past it a long poll waits its turn within its wait time
    /// (else answers empty) and a durable write within --durable-timeout-ms (else 503).
    #[arg(long, default_value_t = store::MAX_REDIS_CONNECTIONS, value_parser = parse_max_connections)]
    max_redis_connections: usize,
    /// How long durable mode waits for the replicas (ms).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=2_147_483_648))]
    durable_timeout_ms: u64,
}

impl Args {
    /// The Redis URLs the gateway connects to: --redis, or the --cluster seeds.
    fn redis_urls(&self) -> Vec<String> {
        self.cluster.clone().unwrap_or_else(|| vec![self.redis.clone()])
    }

    fn tls_files(&self) -> redis_client::TlsFiles {
        redis_client::TlsFiles { ca: self.redis_ca.clone(), cert: self.redis_cert.clone(), key: self.redis_key.clone() }
    }

    fn target(&self) -> store::Target {
        match &self.cluster {
            Some(seeds) => store::Target::Cluster(seeds.clone()),
            None => store::Target::Single(self.redis.clone()),
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

/// Lifts the soft limit on open files to the hard one: the gateway holds up to 10,000
/// connections (and its Redis ones), past the common default of 1,024.
fn raise_fd_limit() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (2..=1_000_000).contains(&n) => Ok(n),
        _ => Err("a number from 2 (the shared connection and one more) to 1000000".into()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    raise_fd_limit();
    startup::init_logs(startup::describe(&args.redis_urls()));
    // Every file is read before Redis is waited for: a wrong one is said at once.
    let files = redis_client::Access::new(&args.redis_urls(), &args.tls_files(), |k| std::env::var(k).ok()).and_then(|access| {
        match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Ok((access, Some(https::acceptor(cert, key)?))),
            _ => Ok((access, None)),
        }
    });
    let (access, tls) = match files {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rmq-gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        builder.worker_threads(n.get());
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rmq-gateway: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (urls, cluster) = (args.redis_urls(), args.cluster.is_some());
    match runtime.block_on(async move {
        startup::check(&urls, cluster, &access).await?;
        server::run(args, access, tls).await
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmq-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}
