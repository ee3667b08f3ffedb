//! The Redis side: connections (one multiplexed connection for short commands, a bounded
//! pool of dedicated ones for long polls and durable writes, crate::pool, per Redis user).
//! Every action is atomic on the server through RMQ's commands (crate::rmq_client); every
//! key of queue `N` is tagged `{N}` (crate::gateway_keys). The send sequence and FIFO
//! deduplication are the module's, and so are the names of its keys: DeleteQueue and
//! PurgeQueue go through the module's own commands, so the gateway spells none of them;
//! receipt handles name RMQ's own delivery ids, which the module ends exactly, so the
//! gateway keeps no delivery records.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::Client;

use crate::pool::{Lease, Pool};
use crate::redis_client::Access;

/// `--max-redis-connections`' default: what one gateway opens per Redis user at most.
pub const MAX_REDIS_CONNECTIONS: usize = 512;
/// A dedicated connection idle this long is closed (checked every IDLE_CHECK): after a
/// burst the pool is back to what is in use within 30 s.
const IDLE_CLOSE: Duration = Duration::from_secs(20);
const IDLE_CHECK: Duration = Duration::from_secs(5);

/// Where the queues live: one server, or a Redis Cluster given by seed nodes.
#[derive(Debug, Clone)]
pub enum Target {
    Single(String),
    Cluster(Vec<String>),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Single(url) => write!(f, "Redis at {url}"),
            Target::Cluster(seeds) => write!(f, "the Redis Cluster at {}", seeds.join(",")),
        }
    }
}

/// A connection to the target. Both kinds speak `ConnectionLike`, so every action runs the
/// same commands on either: each touches the keys of one queue only, all in
/// its `{N}` slot, and the cluster connection follows MOVED/ASK and failovers.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }
    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// Runs `pipe` on one connection to the primary serving `key`'s slot (on a cluster:
    /// MOVED and failovers followed by sending the whole pipeline again there), so that a
    /// WAIT in it counts the replicas of the node that took its writes. A cluster pipeline
    /// would otherwise go wherever its first routable command points.
    pub async fn query_on_owner<T: redis::FromRedisValue>(&mut self, key: &str, pipe: &redis::Pipeline) -> redis::RedisResult<T> {
        match self {
            Conn::Single(c) => pipe.query_async(c).await,
            Conn::Cluster(c) => pipe.query_async(&mut OnOwner { conn: c, route: Route::with_key(key, SlotAddr::Master) }).await,
        }
    }

    /// The primaries serving slots: the one server, or every primary of a cluster.
    pub async fn primaries(&mut self) -> redis::RedisResult<Vec<Node>> {
        Ok(match self {
            Conn::Single(_) => vec![Node(None)],
            Conn::Cluster(c) => {
                let text: String = redis::cmd("CLUSTER").arg("NODES").query_async(c).await?;
                primaries(&text).into_iter().map(|(host, port)| Node(Some(SingleNodeRoutingInfo::ByAddress { host, port }))).collect()
            }
        })
    }

    /// Runs `cmd` on that node.
    pub async fn on(&mut self, node: &Node, cmd: redis::Cmd) -> redis::RedisResult<redis::Value> {
        match (&mut *self, &node.0) {
            (Conn::Cluster(c), Some(route)) => c.route_command(cmd, RoutingInfo::SingleNode(route.clone())).await,
            _ => cmd.query_async(self).await,
        }
    }
}

/// One primary of the target (for a single server, it).
pub struct Node(Option<SingleNodeRoutingInfo>);

/// A cluster connection that sends pipelines to one slot's primary.
struct OnOwner<'a> {
    conn: &'a mut ClusterConnection,
    route: Route,
}

impl ConnectionLike for OnOwner<'_> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, redis::Value> {
        self.conn.req_packed_command(cmd)
    }
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        let route = SingleNodeRoutingInfo::SpecificNode(self.route);
        Box::pin(self.conn.route_pipeline(pipeline.clone(), offset, count, route))
    }
    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// The addresses of the primaries serving slots, from CLUSTER NODES text.
pub fn primaries(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            let flags = parts.get(2)?;
            if !flags.split(',').any(|f| f == "master") || flags.contains("fail") || parts.len() < 9 {
                return None;
            }
            let addr = parts.get(1)?.split('@').next()?;
            let (host, port) = addr.rsplit_once(':')?;
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect()
}

/// Boxed: a client with TLS parameters is a few hundred bytes.
enum Connector {
    Single(Box<Client>),
    Cluster(Box<ClusterClient>),
}

/// Durable mode (`--durable`): writes wait for this many replicas, at most this long.
#[derive(Clone, Copy, Debug)]
pub struct Durable {
    pub replicas: u32,
    pub timeout_ms: u64,
}

/// The connections of one Redis user (or of the URL's).
pub struct Backend {
    connector: Connector,
    pub durable: Option<Durable>,
    pub conn: Conn,
    /// The queues this user read recently (crate::queue).
    pub queues: crate::queue::Cache,
    /// Dedicated connections: at most --max-redis-connections less the shared one.
    dedicated: Pool<Conn>,
    polls: AtomicUsize,
    /// First receives waiting to be written (crate::first_receive).
    pub first_receives: Arc<crate::first_receive::Pending>,
}

/// Commands other than long polls answer within this, or fail as retryable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection attempt (at start, and each reconnection attempt) gives up after this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A dedicated connection's command (a long poll's BLOCK of at most 20 s, a durable write's
/// WAIT of at most --durable-timeout-ms) answers within this, or its node is taken for gone.
const POLL_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A request waits on its connection's reconnection: by default six attempts, backing off
/// to 6.4 s (a send took 46 s to fail once Redis was gone). Two quick ones instead: the
/// request fails in about a second as a retryable error, and the next one tries again.
fn reconnect_briefly(config: ConnectionManagerConfig) -> ConnectionManagerConfig {
    config.set_number_of_retries(2).set_min_delay(Duration::from_millis(100)).set_max_delay(Duration::from_millis(400))
}

impl Backend {
    pub async fn connect(
        target: &Target,
        access: &Access,
        user: Option<&(String, String)>,
        durable: Option<Durable>,
        queue_cache_ms: u64,
        max_connections: usize,
    ) -> redis::RedisResult<Arc<Backend>> {
        let (connector, conn) = match target {
            Target::Single(url) => {
                let client = access.client(url, user)?;
                let config = reconnect_briefly(ConnectionManagerConfig::new())
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_connection_timeout(Some(CONNECT_TIMEOUT));
                let conn = ConnectionManager::new_with_config(client.clone(), config).await?;
                (Connector::Single(Box::new(client)), Conn::Single(conn))
            }
            Target::Cluster(seeds) => {
                let client = access.cluster(seeds, user).connection_timeout(CONNECT_TIMEOUT).build()?;
                let config = ClusterConfig::new().set_response_timeout(RESPONSE_TIMEOUT).set_connection_timeout(CONNECT_TIMEOUT);
                let conn = client.get_async_connection_with_config(config).await?;
                (Connector::Cluster(Box::new(client)), Conn::Cluster(conn))
            }
        };
        let backend = Arc::new(Backend {
            connector,
            durable,
            conn,
            queues: crate::queue::Cache::new(queue_cache_ms),
            dedicated: Pool::new(max_connections.saturating_sub(1).max(1)),
            polls: AtomicUsize::new(0),
            first_receives: Arc::default(),
        });
        spawn_first_receive_writer(backend.first_receives.clone(), Arc::downgrade(&backend));
        let weak = Arc::downgrade(&backend);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(IDLE_CHECK).await;
                let Some(b) = weak.upgrade() else { break };
                b.dedicated.close_idle(IDLE_CLOSE);
            }
        });
        Ok(backend)
    }

    /// A dedicated connection (for a long poll or a durable write: a blocking command on
    /// the shared connection would hold up every command queued behind it), waiting at
    /// most `wait` for one when --max-redis-connections are open; `None` if none came.
    pub async fn dedicated(&self, wait: Duration) -> redis::RedisResult<Option<Lease<'_, Conn>>> {
        self.dedicated
            .take(wait, || async {
                Ok(match &self.connector {
                    Connector::Single(client) => {
                        let config = reconnect_briefly(ConnectionManagerConfig::new())
                            .set_response_timeout(Some(POLL_RESPONSE_TIMEOUT))
                            .set_connection_timeout(Some(CONNECT_TIMEOUT));
                        Conn::Single(ConnectionManager::new_with_config(Client::clone(client), config).await?)
                    }
                    Connector::Cluster(client) => {
                        let config =
                            ClusterConfig::new().set_response_timeout(POLL_RESPONSE_TIMEOUT).set_connection_timeout(CONNECT_TIMEOUT);
                        Conn::Cluster(client.get_async_connection_with_config(config).await?)
                    }
                })
            })
            .await
    }

    /// Counts a long poll as open while the guard lives.
    pub fn poll_started(&self) -> PollGuard<'_> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        PollGuard(&self.polls)
    }

    pub fn open_polls(&self) -> usize {
        self.polls.load(Ordering::Relaxed)
    }

    /// Dedicated connections open now.
    pub fn open_dedicated(&self) -> usize {
        self.dedicated.open()
    }
}

/// The first receives' writer: after a record is left, waits first_receive::WINDOW for more,
/// then writes them; ends with its backend.
fn spawn_first_receive_writer(pending: Arc<crate::first_receive::Pending>, backend: std::sync::Weak<Backend>) {
    tokio::spawn(async move {
        loop {
            // Woken now and then without a record, to end once the backend is gone.
            let _ = tokio::time::timeout(Duration::from_secs(1), pending.left()).await;
            let Some(b) = backend.upgrade() else { break };
            tokio::time::sleep(crate::first_receive::WINDOW).await;
            pending.write(&b.conn).await;
        }
    });
}

pub struct PollGuard<'a>(&'a AtomicUsize);

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_are_the_masters_serving_slots() {
        let nodes = "a 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460\n\
                     b 127.0.0.1:7002@17002 slave a 0 0 1 connected\n\
                     c 127.0.0.1:7003@17003 master - 0 0 2 connected 5461-10922 [5461-<-x]\n\
                     d 127.0.0.1:7004@17004 master,fail - 0 0 3 connected 10923-16383\n\
                     e 127.0.0.1:7005@17005 master - 0 0 4 connected\n";
        assert_eq!(primaries(nodes), vec![("127.0.0.1".to_string(), 7001), ("127.0.0.1".to_string(), 7003)]);
    }
}
