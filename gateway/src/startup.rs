//! Before serving: say which Redis the gateway waits for, wait for it a bounded time, and
//! refuse to start when it has no RMQ module (every request would fail). Logs name that
//! Redis and carry no colour codes unless stderr is a terminal.

use std::fmt;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};

use crate::redis_client::Access;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How long the gateway waits at start for its Redis to answer.
pub const WAIT: Duration = Duration::from_secs(10);
/// Each connection attempt, and the module check, within this.
const ATTEMPT: Duration = Duration::from_secs(2);
/// Between attempts.
const PAUSE: Duration = Duration::from_millis(250);

/// The Redis servers a target names, for people: `host:port` (or a socket path), the
/// password left out; the seeds of a cluster joined with commas.
pub fn describe(urls: &[String]) -> String {
    urls.iter()
        .map(|u| match Client::open(u.as_str()) {
            Ok(c) => c.get_connection_info().addr().to_string(),
            Err(_) => "(an invalid URL)".to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Logs to stderr, plain unless it is a terminal; warnings and errors name the Redis.
pub fn init_logs(redis: String) {
    let ansi = std::io::stderr().is_terminal();
    let inner = tracing_subscriber::fmt::format().with_target(false).with_ansi(ansi);
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(ansi).event_format(NamesRedis { inner, redis }).init();
}

/// The default format, with `(Redis at ADDR)` before the message of a warning or error.
struct NamesRedis<F> {
    inner: F,
    redis: String,
}

impl<S, N, F> FormatEvent<S, N> for NamesRedis<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        if *event.metadata().level() <= Level::WARN {
            write!(writer, "(Redis at {}) ", self.redis)?;
        }
        self.inner.format_event(ctx, writer, event)
    }
}

/// Waits (at most WAIT) for the first of `urls` that answers, then checks that it has the
/// RMQ module. Says on stderr what it waits for; an error says what to do.
pub async fn check(urls: &[String], cluster: bool, access: &Access) -> Result<(), String> {
    let addr = describe(urls);
    let what = if cluster { format!("the Redis Cluster at {}", urls_shown(urls)) } else { format!("Redis at {addr}") };
    eprintln!("rmq-gateway: waiting for {what}{} (up to {} s)", access.describe(urls), WAIT.as_secs());
    let deadline = Instant::now() + WAIT;
    let mut conn = loop {
        match first_answering(urls, access).await {
            Ok(c) => break c,
            // A certificate refused will not be accepted by waiting.
            Err(e) if is_tls_refusal(&e) => {
                return Err(format!("cannot reach {what}: TLS refused ({e}): check --redis-ca, --redis-cert and --redis-key"));
            }
            Err(e) if Instant::now() >= deadline => {
                let flag = if cluster { "--cluster URL[,URL...]" } else { "--redis URL" };
                return Err(format!("cannot reach {what} within {} s ({e}): start it, or pass {flag}", WAIT.as_secs()));
            }
            Err(_) => tokio::time::sleep(PAUSE).await,
        }
    };
    let reply = tokio::time::timeout(ATTEMPT, crate::rmq_client::cmd_module_check().query_async::<Value>(&mut conn)).await;
    match reply {
        Ok(Ok(Value::Array(v))) if v.first().is_some_and(|c| matches!(c, Value::Nil)) => Err(format!(
            "{what} has no RMQ module (it does not know {}): start it with \
             `redis-server --loadmodule /path/to/librmq.so`, or add `loadmodule /path/to/librmq.so` \
             to its redis.conf (`cargo build --release` builds target/release/librmq.so)",
            crate::rmq_client::PROBE
        )),
        Ok(Ok(_)) => Ok(()),
        // A user whose ACL denies COMMAND, or a slow server: requests will tell.
        Ok(Err(e)) => {
            tracing::warn!("cannot check for the RMQ module: {e}");
            Ok(())
        }
        Err(_) => {
            tracing::warn!("cannot check for the RMQ module: no answer within {} s", ATTEMPT.as_secs());
            Ok(())
        }
    }
}

/// Seeds as URLs again, their scheme kept and their passwords left out.
fn urls_shown(urls: &[String]) -> String {
    urls.iter()
        .map(|u| {
            let scheme = if u.starts_with("rediss://") { "rediss" } else { "redis" };
            format!("{scheme}://{}", describe(std::slice::from_ref(u)))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A handshake that failed on a certificate (unknown issuer, wrong name, a client
/// certificate the server refused), as opposed to a server not up yet.
fn is_tls_refusal(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    ["certificate", "Certificate", "handshake", "Handshake", "alert"].iter().any(|w| text.contains(w))
}

async fn first_answering(urls: &[String], access: &Access) -> redis::RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new().set_connection_timeout(Some(ATTEMPT)).set_response_timeout(Some(ATTEMPT));
    let mut last = None;
    for url in urls {
        match access.client(url, None) {
            Ok(client) => match client.get_multiplexed_async_connection_with_config(&config).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            },
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "no Redis URL"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_host_and_port_never_the_password() {
        let urls = vec!["redis://user:secret@127.0.0.1:6390/2".to_string(), "redis://10.0.0.2:7000".to_string()];
        assert_eq!(describe(&urls), "127.0.0.1:6390,10.0.0.2:7000");
        assert_eq!(describe(&["redis://localhost".to_string()]), "localhost:6379");
        assert_eq!(describe(&["nope".to_string()]), "(an invalid URL)");
        let seeds = vec!["rediss://u:secret@127.0.0.1:7000".to_string(), "redis://127.0.0.1:7001".to_string()];
        assert_eq!(urls_shown(&seeds), "rediss://127.0.0.1:7000,redis://127.0.0.1:7001");
    }
}
