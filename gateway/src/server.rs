//! HTTP: the AWS JSON 1.0 endpoint (`POST /`), `/health` and `/metrics`; access checks;
//! start refusal rules and graceful stop.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::actions::{self, Caller};
use crate::cli_args::Args;
use crate::errors::SqsError;
use crate::gateway_state::{stopped, Gateway};
use crate::metrics::{self, Metrics};
use crate::redis_backend::{Backend, Durable};
use crate::redis_client::Access;
use crate::request_admission::{self as admission, Named, Refusal, Signer};
use crate::sigv4::{self, Credentials};

/// Request bodies larger than this are refused unread.
const MAX_BODY: usize = 2 * 1024 * 1024;
/// How long a client may take to send its headers, and then its body: a slow sender
/// (slowloris) must not hold one of the connections for long. hyper's header timer starts
/// at a request's first byte, so a new connection gets as long for that first byte.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Open connections at most.
const MAX_CONNECTIONS: usize = 10_000;
/// Connections waiting to be accepted at most (see `listen`).
const BACKLOG: u32 = 4096;
/// How long requests in progress may take to finish after a stop signal.
const DRAIN: Duration = Duration::from_secs(5);

pub async fn run(args: Args, access: Access, tls: Option<TlsAcceptor>) -> Result<(), String> {
    let credentials = match &args.credentials {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the credentials file {}: {e}", path.display()))?;
            Some(Credentials::parse(&text).map_err(|e| format!("credentials file {}: {e}", path.display()))?)
        }
        None => None,
    };
    if credentials.is_none() && !args.listen.ip().is_loopback() {
        return Err(format!(
            "refusing to listen on {} without --credentials: only a loopback address may serve unsigned requests",
            args.listen
        ));
    }
    let target = args.target();
    let durable = (args.durable > 0).then_some(Durable { replicas: args.durable, timeout_ms: args.durable_timeout_ms });
    let default = Backend::connect(&target, &access, None, durable, args.queue_cache_ms, args.max_redis_connections)
        .await
        .map_err(|e| format!("cannot reach {target}: {e}"))?;
    crate::stored_size::make_room(&mut default.conn.clone(), crate::stored_size::needed(MAX_BODY)).await;
    let mut per_key = HashMap::new();
    for key in credentials.iter().flat_map(Credentials::keys) {
        if let Some(user) = &key.redis_user {
            let b = Backend::connect(&target, &access, Some(user), durable, args.queue_cache_ms, args.max_redis_connections)
                .await
                .map_err(|e| format!("access key {}: cannot connect to Redis as {}: {e}", key.id, user.0))?;
            per_key.insert(key.id.clone(), b);
        }
    }
    let listener = listen(args.listen).map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (stop_tx, stop_rx) = watch::channel(false);
    let gw = Arc::new(Gateway {
        region: args.region,
        account: args.account,
        public_url: args.public_url.unwrap_or_else(|| format!("{scheme}://{local}")).trim_end_matches('/').to_string(),
        credentials,
        default,
        per_key,
        metrics: Metrics::default(),
        stopping: stop_rx,
    });
    let app = Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(any(sqs))
        .layer(axum::middleware::map_response(crate::replies::with_request_id))
        .with_state(gw.clone());
    crate::redrive::spawn(gw.default.clone(), gw.stopping.clone());
    println!("rmq-gateway listening on {scheme}://{local}");
    serve(listener, app, stop_tx, tls).await;
    // Stopped, not killed: the first receives still waiting are written.
    for b in std::iter::once(&gw.default).chain(gw.per_key.values()) {
        b.first_receives.write(&b.conn).await;
    }
    Ok(())
}

/// The listening socket, with a backlog for a burst of new connections: with tokio's
/// default (1,024) a burst while the gateway is busy overflows it, and each dropped SYN costs
/// its client a 1 s retransmit (the kernel caps the backlog at net.core.somaxconn).
fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Accepts connections (at most MAX_CONNECTIONS open) until SIGINT or SIGTERM, then lets
/// requests in progress finish for at most DRAIN; waiting long polls are answered empty.
/// With `tls`, each connection is HTTPS.
async fn serve(listener: tokio::net::TcpListener, app: Router, stop_tx: watch::Sender<bool>, tls: Option<TlsAcceptor>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = tokio::task::JoinSet::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(_) => {
                    // Out of descriptors or memory: give closing connections a moment
                    // rather than spin on the same error.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Over the limit: refused (closed), not queued.
            drop(stream);
            continue;
        };
        let app = app.clone();
        let stopping = stop_tx.subscribe();
        // Two kinds of task, so that an HTTP connection's carries no TLS state.
        match &tls {
            None => tasks.spawn(async move {
                let _permit = permit;
                if first_byte(&stream).await {
                    serve_connection(stream, app, stopping).await
                }
            }),
            Some(tls) => {
                let tls = tls.clone();
                tasks.spawn(async move {
                    let _permit = permit;
                    // A handshake that trickles is cut off like headers that do.
                    if first_byte(&stream).await {
                        if let Ok(Ok(stream)) = tokio::time::timeout(HEADER_TIMEOUT, tls.accept(stream)).await {
                            serve_connection(stream, app, stopping).await
                        }
                    }
                })
            }
        };
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
}

/// Whether the connection sent its first byte in time: one that sends nothing is closed (it
/// would hold a permit forever).
async fn first_byte(stream: &tokio::net::TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(tokio::time::timeout(FIRST_BYTE_TIMEOUT, stream.peek(&mut first)).await, Ok(Ok(n)) if n > 0)
}

/// Serves the requests of one connection until it closes, or gracefully once the gateway
/// is stopping.
async fn serve_connection<S>(stream: S, app: Router, stopping: watch::Receiver<bool>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto;
    let svc = hyper_util::service::TowerToHyperService::new(app);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopped(stopping) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! { _ = i.recv() => {}, _ = t.recv() => {} }
        }
        _ => std::future::pending().await,
    }
}

async fn health(State(gw): State<Arc<Gateway>>) -> Response {
    let mut conn = gw.default.conn.clone();
    match redis::cmd("PING").query_async::<String>(&mut conn).await {
        Ok(_) => (StatusCode::OK, "ok\n").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis unavailable\n").into_response(),
    }
}

async fn metrics(State(gw): State<Arc<Gateway>>) -> Response {
    let backends = || std::iter::once(&gw.default).chain(gw.per_key.values());
    let polls = backends().map(|b| b.open_polls()).sum();
    let redis = backends().map(|b| 1 + b.open_dedicated()).sum();
    ([("content-type", "text/plain; version=0.0.4")], gw.metrics.render(polls, redis)).into_response()
}

fn error_response(e: &SqsError) -> Response {
    let mut r = (e.status, e.body()).into_response();
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/x-amz-json-1.0"));
    if let Ok(v) = HeaderValue::from_str(e.query) {
        h.insert("x-amzn-query-error", v);
    }
    r
}

async fn sqs(State(gw): State<Arc<Gateway>>, method: Method, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    use futures_util::FutureExt;
    let started = Instant::now();
    let body = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(b)) => b,
        // Over the limit (or cut off by the client, which then reads no answer).
        Ok(Err(_)) => return error_response(&SqsError::request_entity_too_large("The request body is longer than 2 MiB.")),
        Err(_) => return error_response(&SqsError::request_timeout("The request body was not received in time.")),
    };
    let named = admission::named(uri.query().unwrap_or(""), &headers);
    let action = &*named.action;
    // A panic is a bug, but it must cost only its own request: answered 500, never a
    // dropped connection or a lost worker.
    let handled = std::panic::AssertUnwindSafe(handle(&gw, &method, &uri, &headers, &body, &named)).catch_unwind().await;
    let result = handled.unwrap_or_else(|_| Err(Refusal::Served(SqsError::internal("the request could not be handled"))));
    match result {
        Ok(body) => {
            gw.metrics.observe(metrics::action_label(action), "ok", started.elapsed());
            ([("content-type", "application/x-amz-json-1.0")], body).into_response()
        }
        Err(Refusal::Served(e)) => {
            gw.metrics.observe(metrics::action_label(action), e.code, started.elapsed());
            error_response(&e)
        }
        Err(Refusal::Unauthenticated(e)) => {
            gw.metrics.unauthenticated(e.code);
            error_response(&e)
        }
    }
}

/// Admits the request (crate::request_admission), then runs its action as its caller.
async fn handle(gw: &Gateway, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8], named: &Named<'_>) -> Result<Vec<u8>, Refusal> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let req = sigv4::Request { method: method.as_str(), path: uri.path(), query: uri.query().unwrap_or(""), headers, body };
    let admitted = admission::admit(gw.credentials.as_ref(), &gw.region, now, &req, named)?;
    let caller = match admitted.signer {
        Signer::Key(key) => {
            Caller { backend: gw.per_key.get(&key.id).cloned().unwrap_or_else(|| gw.default.clone()), key_id: key.id.clone() }
        }
        // Local development: any key is served, as the URL's Redis user.
        Signer::Unverified(key_id) => Caller { backend: gw.default.clone(), key_id },
    };
    actions::dispatch(gw, &caller, admitted.request).await.map_err(Refusal::Served)
}
