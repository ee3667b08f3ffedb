//! Load driver for `make bench` (bench/bench.py runs it; see its header).
//!
//!   rmq-bench-driver MODE --url redis://127.0.0.1:PORT/ --peer rmq|lua|streams|zset|ping [options]
//!
//! Modes (each prints one JSON object on stdout):
//!   cpu      FLUSHALL, then three phases, each after CONFIG RESETSTAT: push --messages
//!            messages (--batch per command), pop them all (COUNT --batch), ack them all
//!            (--batch per command). Reports INFO commandstats usec/calls and the server's
//!            process CPU (INFO cpu) of each phase.
//!   e2e      FLUSHALL, then --producers connections push and --consumers connections
//!            pop + ack flat out for --warmup + --secs seconds, all pipelined; reports acked
//!            messages per second over the last --secs.
//!   latency  FLUSHALL, then one producer pushes --rate messages/s (one per command, stamped
//!            with its scheduled send time) while --consumers pop (blocking where the peer
//!            can) and ack; reports push→pop latency percentiles.
//!   fill     pushes --messages messages into --queue in commands of --batch (no FLUSHALL).
//!   scale    on a filled queue: --cycles times {RESETSTAT; --depth single pushes; stats;
//!            RESETSTAT; --depth single pops; stats; RESETSTAT; --depth single acks; stats},
//!            so the queue keeps its size; reports usec per call of each.
//!   memory   FLUSHALL, fill --messages, MEMORY USAGE (SAMPLES 0) of the peer's keys; pop
//!            them all under a long lease; MEMORY USAGE again.
//!   gfill    (make bench-delivery-features) pushes --groups × --per-group messages into --queue (no
//!            FLUSHALL): in --order adjacent (a group's messages one after another in the
//!            queue's order) or interleaved (the first message of every group, then the
//!            second, …), with GROUP g<j> when --grouped 1 (RMQ only). Peer tpop spreads
//!            them over the topic's --slots queues.
//!   drain    (make bench-delivery-features) --consumers connections each loop {ack what it popped last;
//!            pop COUNT --count} (one round trip) until --messages are acked; reports
//!            acked messages/s and INFO commandstats of the drain.
//!
//!   cluster  (make bench-cluster) a topic over every primary of a Redis Cluster, or one
//!            standalone server: see cluster.rs.
//!
//!   sqs-load, sqs-latency  (make bench-gateway) an SQS endpoint (rmq-gateway, ElasticMQ,
//!            moto) over signed, kept-alive HTTP: see sqs_load.rs.
//!
//!   cpu takes --policy "field value …" (RMQ.POLICY q SET …, after the FLUSHALL) and
//!   --warm-ms (one POP on the empty queue, then a pause that long, so a rate bucket has
//!   refilled before the measuring starts). Peer tpop takes --slots (the topic's queues)
//!   and --quantum (TPOP's QUANTUM, default 1).
//!
//! Every connection has a read timeout and the whole run a watchdog (--timeout seconds):
//! no wait is unbounded.

mod cluster;
mod peer;
mod sqs_http;
mod sqs_load;
/// The module's own topic routing and cluster key hashing (RMQ.ROUTE), not a copy.
#[path = "../../../src/core/route.rs"]
#[allow(dead_code)]
mod route;
/// What `route` uses of the module's number formatting.
#[path = "../../../src/core/num.rs"]
#[allow(dead_code)]
mod num;

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, Value};

use peer::{Item, Kind, Peer};

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Args {
    mode: String,
    opts: HashMap<String, String>,
}

impl Args {
    fn parse() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let mode = it.next().ok_or("usage: rmq-bench-driver MODE --url URL --peer PEER [--option value …]")?;
        let mut opts = HashMap::new();
        while let Some(k) = it.next() {
            let k = k.strip_prefix("--").ok_or_else(|| format!("expected --option, got {k}"))?.to_string();
            let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
            opts.insert(k, v);
        }
        Ok(Args { mode, opts })
    }
    fn str(&self, k: &str, default: &str) -> String {
        self.opts.get(k).cloned().unwrap_or_else(|| default.to_string())
    }
    fn num(&self, k: &str, default: u64) -> Res<u64> {
        match self.opts.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{k}: not a number: {v}").into()),
        }
    }
    fn float(&self, k: &str, default: f64) -> Res<f64> {
        match self.opts.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{k}: not a number: {v}").into()),
        }
    }
    fn peer(&self) -> Res<Kind> {
        let p = self.str("peer", "rmq");
        Kind::parse(&p).ok_or_else(|| format!("unknown --peer {p}").into())
    }
}

fn connect(url: &str) -> Res<Connection> {
    let client = redis::Client::open(url)?;
    let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    con.set_read_timeout(Some(Duration::from_secs(120)))?;
    con.set_write_timeout(Some(Duration::from_secs(30)))?;
    Ok(con)
}

fn flushall(con: &mut Connection) -> Res<()> {
    redis::cmd("FLUSHALL").arg("SYNC").query::<()>(con)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Server-side accounting: INFO commandstats and INFO cpu.

#[derive(Default, Clone)]
struct Phase {
    /// usec and calls summed over the peer's own top-level commands.
    usec: u64,
    calls: u64,
    /// Server process CPU (user + sys) over the phase, microseconds.
    cpu_us: f64,
    by_cmd: BTreeMap<String, (u64, u64)>,
}

impl Phase {
    fn add(&mut self, o: &Phase) {
        self.usec += o.usec;
        self.calls += o.calls;
        self.cpu_us += o.cpu_us;
        for (k, (c, u)) in &o.by_cmd {
            let e = self.by_cmd.entry(k.clone()).or_default();
            e.0 += c;
            e.1 += u;
        }
    }
    fn json(&self) -> String {
        let mut s = format!("{{\"usec\":{},\"calls\":{},\"cpu_us\":{:.1},\"by_cmd\":{{", self.usec, self.calls, self.cpu_us);
        let parts: Vec<String> = self.by_cmd.iter().map(|(k, (c, u))| format!("\"{k}\":[{c},{u}]")).collect();
        s.push_str(&parts.join(","));
        s.push_str("}}");
        s
    }
}

fn server_cpu_us(con: &mut Connection) -> Res<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con)?;
    let mut total = 0.0;
    for line in info.lines() {
        for k in ["used_cpu_sys:", "used_cpu_user:"] {
            if let Some(v) = line.strip_prefix(k) {
                total += v.trim().parse::<f64>().unwrap_or(0.0);
            }
        }
    }
    Ok(total * 1e6)
}

fn commandstats(con: &mut Connection) -> Res<BTreeMap<String, (u64, u64)>> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
        let Some((name, fields)) = rest.split_once(':') else { continue };
        let (mut calls, mut usec) = (0u64, 0u64);
        for f in fields.trim().split(',') {
            if let Some(v) = f.strip_prefix("calls=") {
                calls = v.parse().unwrap_or(0);
            } else if let Some(v) = f.strip_prefix("usec=") {
                usec = v.parse().unwrap_or(0);
            }
        }
        out.insert(name.to_string(), (calls, usec));
    }
    Ok(out)
}

fn resetstat(con: &mut Connection) -> Res<()> {
    redis::cmd("CONFIG").arg("RESETSTAT").query::<()>(con)?;
    Ok(())
}

/// Runs `work` between CONFIG RESETSTAT and a read of the counters.
fn measure(con: &mut Connection, kind: Kind, with_cpu: bool, work: &mut dyn FnMut(&mut Connection) -> Res<()>) -> Res<Phase> {
    resetstat(con)?;
    let c0 = if with_cpu { server_cpu_us(con)? } else { 0.0 };
    work(con)?;
    let c1 = if with_cpu { server_cpu_us(con)? } else { 0.0 };
    let stats = commandstats(con)?;
    let mut ph = Phase { cpu_us: c1 - c0, ..Phase::default() };
    for name in kind.commands() {
        if let Some(&(c, u)) = stats.get(*name) {
            ph.usec += u;
            ph.calls += c;
            ph.by_cmd.insert(name.to_string(), (c, u));
        }
    }
    Ok(ph)
}

fn check_replies(replies: &[Value]) -> Res<()> {
    for r in replies {
        if let Value::ServerError(e) = r {
            return Err(format!("server error: {e:?}").into());
        }
    }
    Ok(())
}

fn msg_name(prefix: &str, i: u64) -> String {
    format!("{prefix}:{i:016}")
}

// ---------------------------------------------------------------------------------------
// Building blocks shared by the modes.

/// Pushes `msgs` in commands of `batch`, `per_rt` commands per round trip.
fn push_all(con: &mut Connection, peer: &Peer, msgs: &[String], batch: usize, per_rt: usize, cmd_no: &mut u64) -> Res<()> {
    for rt in msgs.chunks(batch * per_rt) {
        let mut p = redis::pipe();
        for chunk in rt.chunks(batch) {
            peer.add_push(&mut p, (*cmd_no % 8) as i64, chunk);
            *cmd_no += 1;
        }
        let r: Vec<Value> = p.query(con)?;
        check_replies(&r)?;
    }
    Ok(())
}

/// Pops `n` messages in pops of COUNT `batch`, `per_rt` pops per round trip (never more pops
/// than needed). Bare sorted sets also ZADD prepare what they popped (in the next round trip,
/// before the next pops, one ZADD per pop).
fn pop_all(con: &mut Connection, peer: &Peer, n: usize, batch: usize, per_rt: usize) -> Res<Vec<Item>> {
    let mut got: Vec<Item> = Vec::with_capacity(n);
    let mut post: Vec<Vec<Item>> = Vec::new();
    let mut idle = 0;
    while got.len() < n {
        let want = (n - got.len()).div_ceil(batch).min(per_rt);
        let mut p = redis::pipe();
        for items in post.drain(..) {
            peer.add_post_pop(&mut p, &items);
        }
        for _ in 0..want {
            peer.add_pop(&mut p, batch, None);
        }
        let r: Vec<Value> = p.query(con)?;
        check_replies(&r)?;
        let before = got.len();
        for v in &r[r.len() - want..] {
            let mut items = Vec::new();
            peer.parse_pop(v, &mut items);
            if !items.is_empty() {
                got.extend(items.iter().cloned());
                post.push(items);
            }
        }
        if got.len() == before {
            idle += 1;
            if idle > 3 {
                return Err(format!("pop: got {} of {n} messages, then nothing", got.len()).into());
            }
        }
    }
    let mut p = redis::pipe();
    for items in post.drain(..) {
        peer.add_post_pop(&mut p, &items);
    }
    if !p.is_empty() {
        let r: Vec<Value> = p.query(con)?;
        check_replies(&r)?;
    }
    Ok(got)
}

fn ack_all(con: &mut Connection, peer: &Peer, items: &[Item], batch: usize, per_rt: usize) -> Res<()> {
    for rt in items.chunks(batch * per_rt) {
        let mut p = redis::pipe();
        for chunk in rt.chunks(batch) {
            peer.add_ack(&mut p, chunk);
        }
        let r: Vec<Value> = p.query(con)?;
        check_replies(&r)?;
    }
    Ok(())
}

/// One consumer round trip: the acks of what `prev` holds (after the bare sorted sets'
/// ZADD prepare), in commands of `batch`, and `pops` pops of COUNT `batch`; then `prev`
/// holds what those pops gave. Returns how many were acked, or None with nothing to send.
fn consume_step(con: &mut Connection, peer: &Peer, prev: &mut Vec<Item>, batch: usize, pops: usize) -> Res<Option<usize>> {
    let mut p = redis::pipe();
    for chunk in prev.chunks(batch) {
        peer.add_post_pop(&mut p, chunk);
        peer.add_ack(&mut p, chunk);
    }
    for _ in 0..pops {
        peer.add_pop(&mut p, batch, None);
    }
    if p.is_empty() {
        return Ok(None);
    }
    let r: Vec<Value> = p.query(con)?;
    check_replies(&r)?;
    let acked = prev.len();
    prev.clear();
    for v in &r[r.len() - pops..] {
        peer.parse_pop(v, prev);
    }
    Ok(Some(acked))
}

/// Commands per round trip: 100 single-message commands, or 10 commands of 100.
fn per_rt(batch: usize) -> usize {
    (1000 / batch).clamp(1, 100)
}

// ---------------------------------------------------------------------------------------
// Modes.

fn mode_cpu(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let n = a.num("messages", 50_000)? as usize;
    let batch = a.num("batch", 1)?.max(1) as usize;
    let mut con = connect(&url)?;
    flushall(&mut con)?;
    let peer = Peer::new(kind, "q", "c0", &mut con)?;
    peer.setup(&mut con)?;
    apply_policy(&mut con, a, "q")?;
    let per_rt = per_rt(batch);
    if kind == Kind::Ping {
        let ph = measure(&mut con, kind, true, &mut |con| {
            for _ in 0..n.div_ceil(100) {
                let mut p = redis::pipe();
                for _ in 0..100 {
                    p.cmd("PING");
                }
                let _: Vec<Value> = p.query(con)?;
            }
            Ok(())
        })?;
        return Ok(format!("{{\"peer\":\"ping\",\"messages\":{},\"ping\":{}}}", n.div_ceil(100) * 100, ph.json()));
    }
    let msgs: Vec<String> = (0..n as u64).map(|i| msg_name("msg", i)).collect();
    let mut cmd_no = 0;
    let push = measure(&mut con, kind, true, &mut |con| push_all(con, &peer, &msgs, batch, per_rt, &mut cmd_no))?;
    let mut items = Vec::new();
    let pop = measure(&mut con, kind, true, &mut |con| {
        items = pop_all(con, &peer, n, batch, per_rt)?;
        Ok(())
    })?;
    let ack = measure(&mut con, kind, true, &mut |con| ack_all(con, &peer, &items, batch, per_rt))?;
    if !a.str("policy", "").trim().is_empty() {
        // The policy stays (in meta{q}) while the queue is empty: drop it for the check.
        redis::cmd("RMQ.POLICY").arg("q").arg("RESET").query::<i64>(&mut con)?;
    }
    let left: i64 = match kind {
        Kind::Streams => redis::cmd("XLEN").arg(&peer.q).query(&mut con)?,
        _ => redis::cmd("EXISTS").arg(peer.keys()).query(&mut con)?,
    };
    if left != 0 {
        return Err(format!("after acking everything, keys/entries remain: {left}").into());
    }
    Ok(format!(
        "{{\"peer\":\"{}\",\"batch\":{batch},\"messages\":{n},\"push\":{},\"pop\":{},\"ack\":{}}}",
        a.str("peer", ""),
        push.json(),
        pop.json(),
        ack.json()
    ))
}

struct Shared {
    pushed: AtomicU64,
    acked: AtomicU64,
    stop: AtomicBool,
}

fn mode_e2e(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    if kind == Kind::Ping {
        return Err("e2e: no lifecycle for ping".into());
    }
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let secs = a.float("secs", 5.0)?;
    let warmup = a.float("warmup", 1.0)?;
    let batch = a.num("batch", 1)?.max(1) as usize;
    let producers = a.num("producers", 2)? as usize;
    let consumers = a.num("consumers", 2)? as usize;
    let backlog = a.num("backlog", 20_000)?;
    let push_depth = a.num("push-depth", if batch == 1 { 100 } else { 4 })? as usize;
    let pop_depth = a.num("pop-depth", if batch == 1 { 100 } else { 2 })? as usize;
    let mut con = connect(&url)?;
    flushall(&mut con)?;
    Peer::new(kind, "q", "c0", &mut con)?.setup(&mut con)?;
    let sh = Arc::new(Shared { pushed: AtomicU64::new(0), acked: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let mut handles = Vec::new();
    for id in 0..producers {
        let (sh, url) = (sh.clone(), url.clone());
        handles.push(thread::spawn(move || -> Res<()> {
            let mut con = connect(&url)?;
            let peer = Peer::new(kind, "q", "p", &mut con)?;
            let mut seq: u64 = 0;
            let mut cmd_no: u64 = id as u64;
            while !sh.stop.load(Ordering::Relaxed) {
                let inflight = sh.pushed.load(Ordering::Relaxed).saturating_sub(sh.acked.load(Ordering::Relaxed));
                if inflight > backlog {
                    thread::sleep(Duration::from_micros(50));
                    continue;
                }
                let mut p = redis::pipe();
                for _ in 0..push_depth {
                    let msgs: Vec<String> = (0..batch)
                        .map(|_| {
                            seq += 1;
                            msg_name(&format!("p{id:02}"), seq)
                        })
                        .collect();
                    peer.add_push(&mut p, (cmd_no % 8) as i64, &msgs);
                    cmd_no += 1;
                }
                let r: Vec<Value> = p.query(&mut con)?;
                check_replies(&r)?;
                sh.pushed.fetch_add((push_depth * batch) as u64, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for id in 0..consumers {
        let (sh, url) = (sh.clone(), url.clone());
        handles.push(thread::spawn(move || -> Res<()> {
            let mut con = connect(&url)?;
            let peer = Peer::new(kind, "q", &format!("c{id}"), &mut con)?;
            let mut prev: Vec<Item> = Vec::new();
            loop {
                let stopping = sh.stop.load(Ordering::Relaxed);
                let pops = if stopping { 0 } else { pop_depth };
                let Some(acked) = consume_step(&mut con, &peer, &mut prev, batch, pops)? else { break };
                sh.acked.fetch_add(acked as u64, Ordering::Relaxed);
                if prev.is_empty() {
                    if stopping {
                        break;
                    }
                    thread::sleep(Duration::from_micros(100));
                }
            }
            Ok(())
        }));
    }
    thread::sleep(Duration::from_secs_f64(warmup));
    // The measured window: acked messages, the server's process CPU and, from a RESETSTAT
    // at its start, what each command cost in the steady state.
    resetstat(&mut con)?;
    let (a0, p0, c0, t0) = (sh.acked.load(Ordering::Relaxed), sh.pushed.load(Ordering::Relaxed), server_cpu_us(&mut con)?, Instant::now());
    thread::sleep(Duration::from_secs_f64(secs));
    let (a1, p1, c1, dt) = (sh.acked.load(Ordering::Relaxed), sh.pushed.load(Ordering::Relaxed), server_cpu_us(&mut con)?, t0.elapsed().as_secs_f64());
    let stats = commandstats(&mut con)?;
    let inflight = inflight_now(&mut con, kind)?;
    sh.stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| "a load thread panicked")??;
    }
    let window: Vec<String> = kind
        .commands()
        .iter()
        .filter_map(|c| stats.get(*c).map(|(calls, usec)| format!("\"{c}\":[{calls},{usec}]")))
        .collect();
    Ok(format!(
        "{{\"peer\":\"{}\",\"batch\":{batch},\"msgs_per_s\":{:.0},\"pushed_per_s\":{:.0},\"server_cpu_pct\":{:.1},\"producers\":{producers},\"consumers\":{consumers},\"pop_depth\":{pop_depth},\"acked\":{},\"inflight_at_end\":{inflight},\"window\":{{{}}}}}",
        a.str("peer", ""),
        (a1 - a0) as f64 / dt,
        (p1 - p0) as f64 / dt,
        (c1 - c0) / 1e6 / dt * 100.0,
        a1 - a0,
        window.join(",")
    ))
}

/// How many messages are in flight (prepare{q}, or the Streams group's pending list).
fn inflight_now(con: &mut Connection, kind: Kind) -> Res<i64> {
    Ok(match kind {
        Kind::Rmq | Kind::Lua | Kind::Zset => redis::cmd("ZCARD").arg("prepare{q}").query(con)?,
        Kind::Streams => {
            let v: Value = redis::cmd("XPENDING").arg("q").arg("g").query(con)?;
            match v {
                Value::Array(a) => match a.first() {
                    Some(Value::Int(n)) => *n,
                    _ => 0,
                },
                _ => 0,
            }
        }
        Kind::Ping | Kind::Tpop => 0,
    })
}

fn mode_latency(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    if !matches!(kind, Kind::Rmq | Kind::Lua | Kind::Streams) {
        return Err("latency: peers rmq, lua, streams".into());
    }
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let rate = a.float("rate", 10_000.0)?;
    let secs = a.float("secs", 5.0)?;
    let warmup = a.float("warmup", 1.0)?;
    let consumers = a.num("consumers", 2)? as usize;
    let poll_us = a.num("poll-us", 1000)?;
    let block_ms = a.num("block-ms", 100)?;
    let mut con = connect(&url)?;
    flushall(&mut con)?;
    Peer::new(kind, "q", "c0", &mut con)?.setup(&mut con)?;
    let base = Instant::now();
    // Consumers get 200 ms to start (and block) before the first message is due.
    let start_ns = 200_000_000u64;
    let measure_from = start_ns + (warmup * 1e9) as u64;
    let end_ns = measure_from + (secs * 1e9) as u64;
    let sh = Arc::new(Shared { pushed: AtomicU64::new(0), acked: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let lats: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let mut consumers_h = Vec::new();
    for id in 0..consumers {
        let (sh, url, lats) = (sh.clone(), url.clone(), lats.clone());
        consumers_h.push(thread::spawn(move || -> Res<()> {
            let mut con = connect(&url)?;
            let peer = Peer::new(kind, "q", &format!("c{id}"), &mut con)?;
            let block = if kind == Kind::Lua { None } else { Some(block_ms) };
            let mut prev: Vec<Item> = Vec::new();
            let mut mine: Vec<u64> = Vec::with_capacity(200_000);
            while !sh.stop.load(Ordering::Relaxed) || !prev.is_empty() {
                let mut p = redis::pipe();
                peer.add_ack(&mut p, &prev);
                let stopping = sh.stop.load(Ordering::Relaxed);
                if !stopping {
                    peer.add_pop(&mut p, 100, block);
                }
                let r: Vec<Value> = p.query(&mut con)?;
                let now = base.elapsed().as_nanos() as u64;
                check_replies(&r)?;
                sh.acked.fetch_add(prev.len() as u64, Ordering::Relaxed);
                prev.clear();
                if stopping {
                    continue;
                }
                peer.parse_pop(r.last().unwrap_or(&Value::Nil), &mut prev);
                for it in &prev {
                    let stamp: u64 = std::str::from_utf8(&it.msg[2..]).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
                    if stamp >= measure_from {
                        mine.push(now.saturating_sub(stamp));
                    }
                }
                if prev.is_empty() && kind == Kind::Lua {
                    thread::sleep(Duration::from_micros(poll_us));
                }
            }
            lats.lock().map_err(|_| "poisoned")?.extend(mine);
            Ok(())
        }));
    }
    // The producer: message i is due at start + i/rate; it is stamped with that time (so a
    // late send counts against the latency: no coordinated omission).
    let producer = {
        let (sh, url) = (sh.clone(), url.clone());
        thread::spawn(move || -> Res<u64> {
            let mut con = connect(&url)?;
            let peer = Peer::new(kind, "q", "p", &mut con)?;
            let step = 1e9 / rate;
            let mut i: u64 = 0;
            loop {
                let now = base.elapsed().as_nanos() as u64;
                if now >= end_ns {
                    break;
                }
                let due = if now < start_ns { 0 } else { ((now - start_ns) as f64 / step) as u64 + 1 };
                if i >= due {
                    let next = start_ns + (i as f64 * step) as u64;
                    thread::sleep(Duration::from_nanos(next.saturating_sub(now).min(200_000)));
                    continue;
                }
                let mut p = redis::pipe();
                while i < due {
                    let stamp = start_ns + (i as f64 * step) as u64;
                    peer.add_push(&mut p, 5, &[format!("l:{stamp:018}")]);
                    i += 1;
                }
                let r: Vec<Value> = p.query(&mut con)?;
                check_replies(&r)?;
                sh.pushed.store(i, Ordering::Relaxed);
            }
            Ok(i)
        })
    };
    let sent = producer.join().map_err(|_| "producer panicked")??;
    let deadline = Instant::now() + Duration::from_secs(5);
    while sh.acked.load(Ordering::Relaxed) < sent && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    sh.stop.store(true, Ordering::Relaxed);
    for h in consumers_h {
        h.join().map_err(|_| "a consumer panicked")??;
    }
    let mut l = std::mem::take(&mut *lats.lock().map_err(|_| "poisoned")?);
    l.sort_unstable();
    let pct = |q: f64| -> f64 {
        if l.is_empty() {
            return f64::NAN;
        }
        let idx = ((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1;
        l[idx] as f64 / 1000.0
    };
    let sent_window = ((secs * rate) as u64).max(1);
    Ok(format!(
        "{{\"peer\":\"{}\",\"rate\":{rate},\"measured\":{},\"expected\":{sent_window},\"acked\":{},\"sent\":{sent},\"p50_us\":{:.1},\"p99_us\":{:.1},\"p999_us\":{:.1},\"max_us\":{:.1}}}",
        a.str("peer", ""),
        l.len(),
        sh.acked.load(Ordering::Relaxed),
        pct(0.50),
        pct(0.99),
        pct(0.999),
        pct(1.0)
    ))
}

fn fill(con: &mut Connection, peer: &Peer, n: u64, start: u64, batch: usize, depth: usize) -> Res<()> {
    let mut cmd_no = 0;
    let mut i = start;
    let end = start + n;
    while i < end {
        let k = ((end - i) as usize).min(batch * depth);
        let msgs: Vec<String> = (i..i + k as u64).map(|j| msg_name("msg", j)).collect();
        push_all(con, peer, &msgs, batch, depth, &mut cmd_no)?;
        i += k as u64;
    }
    Ok(())
}

fn mode_fill(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let q = a.str("queue", "q");
    let n = a.num("messages", 1000)?;
    let start = a.num("start", 0)?;
    let batch = a.num("batch", 1000)? as usize;
    let depth = a.num("depth", 10)? as usize;
    let mut con = connect(&url)?;
    let peer = Peer::new(kind, &q, "c0", &mut con)?;
    peer.setup(&mut con)?;
    let t = Instant::now();
    fill(&mut con, &peer, n, start, batch, depth)?;
    Ok(format!("{{\"peer\":\"{}\",\"queue\":\"{q}\",\"filled\":{n},\"secs\":{:.2}}}", a.str("peer", ""), t.elapsed().as_secs_f64()))
}

fn mode_scale(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let q = a.str("queue", "q");
    let cycles = a.num("cycles", 200)?;
    let depth = a.num("depth", 100)? as usize;
    let start = a.num("start", 0)?;
    let mut con = connect(&url)?;
    let peer = Peer::new(kind, &q, "c0", &mut con)?;
    let (mut push, mut pop, mut ack) = (Phase::default(), Phase::default(), Phase::default());
    let mut next = start;
    let mut cmd_no = 0;
    for _ in 0..cycles {
        let msgs: Vec<String> = (next..next + depth as u64).map(|j| msg_name("new", j)).collect();
        next += depth as u64;
        push.add(&measure(&mut con, kind, false, &mut |con| push_all(con, &peer, &msgs, 1, depth, &mut cmd_no))?);
        let mut items = Vec::new();
        pop.add(&measure(&mut con, kind, false, &mut |con| {
            items = pop_all(con, &peer, depth, 1, depth)?;
            Ok(())
        })?);
        ack.add(&measure(&mut con, kind, false, &mut |con| ack_all(con, &peer, &items, 1, depth))?);
    }
    let n = cycles * depth as u64;
    Ok(format!(
        "{{\"peer\":\"{}\",\"queue\":\"{q}\",\"messages\":{n},\"push\":{},\"pop\":{},\"ack\":{}}}",
        a.str("peer", ""),
        push.json(),
        pop.json(),
        ack.json()
    ))
}

fn memory_usage(con: &mut Connection, keys: &[String]) -> Res<(u64, String)> {
    let mut total = 0u64;
    let mut parts = Vec::new();
    for k in keys {
        let v: Option<u64> = redis::cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0).query(con)?;
        let v = v.unwrap_or(0);
        total += v;
        parts.push(format!("\"{k}\":{v}"));
    }
    Ok((total, format!("{{\"total\":{total},{}}}", parts.join(","))))
}

fn mode_memory(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let n = a.num("messages", 100_000)?;
    let mut con = connect(&url)?;
    flushall(&mut con)?;
    let mut peer = Peer::new(kind, "q", "c0", &mut con)?;
    peer.setup(&mut con)?;
    fill(&mut con, &peer, n, 0, 1000, 10)?;
    let (_, waiting) = memory_usage(&mut con, &peer.keys())?;
    let mut out = format!("{{\"peer\":\"{}\",\"messages\":{n},\"waiting\":{waiting}", a.str("peer", ""));
    if matches!(kind, Kind::Rmq | Kind::Lua | Kind::Streams) {
        peer.lease_ms = 3_600_000;
        let items = pop_all(&mut con, &peer, n as usize, 1000, 10)?;
        if items.len() as u64 != n {
            return Err(format!("memory: popped {} of {n}", items.len()).into());
        }
        let (_, inflight) = memory_usage(&mut con, &peer.keys())?;
        write!(out, ",\"inflight\":{inflight}")?;
    }
    out.push('}');
    Ok(out)
}

/// `--policy "field value …"`: RMQ.POLICY `q` SET …; then, with `--warm-ms`, one POP on the
/// (empty) queue and a pause that long, so a rate-limit bucket exists (a new bucket starts
/// with one token) and has refilled before anything is measured.
fn apply_policy(con: &mut Connection, a: &Args, q: &str) -> Res<()> {
    let policy = a.str("policy", "");
    if policy.trim().is_empty() {
        return Ok(());
    }
    let mut c = redis::cmd("RMQ.POLICY");
    c.arg(q).arg("SET");
    for w in policy.split_whitespace() {
        c.arg(w);
    }
    c.query::<()>(con)?;
    let warm = a.num("warm-ms", 0)?;
    if warm > 0 {
        let _: Value = redis::cmd("RMQ.POP").arg(q).query(con)?;
        thread::sleep(Duration::from_millis(warm));
    }
    Ok(())
}

/// A peer on `q` as the options say (`--slots` for tpop).
fn make_peer(a: &Args, kind: Kind, q: &str, consumer: &str, con: &mut Connection) -> Res<Peer> {
    let mut peer = Peer::new(kind, q, consumer, con)?;
    peer.slots = a.num("slots", 1)?.max(1) as usize;
    peer.quantum = a.num("quantum", 1)?.max(1) as usize;
    Ok(peer)
}

fn mode_gfill(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let q = a.str("queue", "q");
    let groups = a.num("groups", 10_000)?;
    let per_group = a.num("per-group", 10)?;
    let grouped = a.num("grouped", 1)? != 0;
    let adjacent = match a.str("order", "adjacent").as_str() {
        "adjacent" => true,
        "interleaved" => false,
        o => return Err(format!("--order adjacent|interleaved, not {o}").into()),
    };
    if grouped && kind != Kind::Rmq {
        return Err("gfill: --grouped 1 is for peer rmq".into());
    }
    let mut con = connect(&url)?;
    let mut peer = make_peer(a, kind, &q, "c0", &mut con)?;
    peer.setup(&mut con)?;
    // Units of (priority, group, messages) in the queue's order (highest priority first);
    // without groups, consecutive units of one priority are merged (up to 1000 messages).
    let name = |j: u64, k: u64| format!("m:{j:07}:{k:03}");
    let mut units: Vec<(i64, Option<u64>, Vec<String>)> = Vec::new();
    let mut add = |prio: i64, g: u64, msgs: Vec<String>| {
        if !grouped {
            if let Some(last) = units.last_mut() {
                if last.0 == prio && last.2.len() + msgs.len() <= 1000 {
                    last.2.extend(msgs);
                    return;
                }
            }
        }
        units.push((prio, grouped.then_some(g), msgs));
    };
    if adjacent {
        for j in 0..groups {
            add((groups - j) as i64, j, (0..per_group).map(|k| name(j, k)).collect());
        }
    } else {
        for k in 0..per_group {
            for j in 0..groups {
                add((per_group - k) as i64, j, vec![name(j, k)]);
            }
        }
    }
    let t = Instant::now();
    for rt in units.chunks(200) {
        let mut p = redis::pipe();
        for (prio, g, msgs) in rt {
            peer.group = g.map(|g| format!("g{g:07}"));
            peer.add_push(&mut p, *prio, msgs);
        }
        let r: Vec<Value> = p.query(&mut con)?;
        check_replies(&r)?;
    }
    Ok(format!(
        "{{\"peer\":\"{}\",\"queue\":\"{q}\",\"filled\":{},\"commands\":{},\"secs\":{:.2}}}",
        a.str("peer", ""),
        groups * per_group,
        units.len(),
        t.elapsed().as_secs_f64()
    ))
}

/// INFO rmq counter `field` (0 when absent, e.g. a module without it).
fn info_rmq(con: &mut Connection, field: &str) -> Res<u64> {
    let info: String = redis::cmd("INFO").arg("rmq").query(con)?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

fn mode_drain(a: &Args) -> Res<String> {
    let kind = a.peer()?;
    if kind == Kind::Ping {
        return Err("drain: no lifecycle for ping".into());
    }
    let url = a.str("url", "redis://127.0.0.1:6379/");
    let q = a.str("queue", "q");
    let n = a.num("messages", 100_000)?;
    let consumers = a.num("consumers", 16)? as usize;
    let count = a.num("count", 100)?.max(1) as usize;
    let stall = Duration::from_secs_f64(a.float("stall-secs", 10.0)?);
    let mut con = connect(&url)?;
    let gw0 = info_rmq(&mut con, "rmq_group_waits")?;
    resetstat(&mut con)?;
    let c0 = server_cpu_us(&mut con)?;
    let sh = Arc::new(Shared { pushed: AtomicU64::new(0), acked: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for id in 0..consumers {
        let (sh, url, q) = (sh.clone(), url.clone(), q.clone());
        let slots = a.num("slots", 1)?;
        let quantum = a.num("quantum", 1)?;
        handles.push(thread::spawn(move || -> Res<u64> {
            let mut con = connect(&url)?;
            let mut peer = Peer::new(kind, &q, &format!("c{id}"), &mut con)?;
            peer.slots = slots.max(1) as usize;
            peer.quantum = quantum.max(1) as usize;
            let mut prev: Vec<Item> = Vec::new();
            let mut mine = 0u64;
            loop {
                let done = sh.acked.load(Ordering::Relaxed) >= n || sh.stop.load(Ordering::Relaxed);
                let Some(acked) = consume_step(&mut con, &peer, &mut prev, count, usize::from(!done))? else { break };
                sh.acked.fetch_add(acked as u64, Ordering::Relaxed);
                mine += acked as u64;
                if prev.is_empty() && !done {
                    // Nothing deliverable now (the rest in flight elsewhere, or done).
                    thread::sleep(Duration::from_micros(200));
                }
            }
            Ok(mine)
        }));
    }
    // Watch progress: a drain that stops moving for --stall-secs is an error.
    let (mut last, mut last_t) = (0u64, Instant::now());
    loop {
        let acked = sh.acked.load(Ordering::Relaxed);
        if acked >= n || handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if acked != last {
            (last, last_t) = (acked, Instant::now());
        } else if last_t.elapsed() > stall {
            sh.stop.store(true, Ordering::Relaxed);
            break;
        }
        thread::sleep(Duration::from_millis(2));
    }
    let dt = t0.elapsed().as_secs_f64();
    let mut per_consumer = Vec::new();
    for h in handles {
        per_consumer.push(h.join().map_err(|_| "a consumer panicked")??);
    }
    let acked = sh.acked.load(Ordering::Relaxed);
    let c1 = server_cpu_us(&mut con)?;
    let stats = commandstats(&mut con)?;
    let gw = info_rmq(&mut con, "rmq_group_waits")?.saturating_sub(gw0);
    if acked < n {
        return Err(format!("drain: {acked} of {n} acked, then no progress for {:?}", stall).into());
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con)?;
    let window: Vec<String> = kind
        .commands()
        .iter()
        .filter_map(|c| stats.get(*c).map(|(calls, usec)| format!("\"{c}\":[{calls},{usec}]")))
        .collect();
    let usec: u64 = kind.commands().iter().filter_map(|c| stats.get(*c)).map(|(_, u)| u).sum();
    let (lo, hi) = (per_consumer.iter().min().copied().unwrap_or(0), per_consumer.iter().max().copied().unwrap_or(0));
    Ok(format!(
        "{{\"peer\":\"{}\",\"messages\":{n},\"acked\":{acked},\"secs\":{dt:.3},\"msgs_per_s\":{:.0},\"usec_per_msg\":{:.3},\"server_cpu_us_per_msg\":{:.3},\"consumers\":{consumers},\"count\":{count},\"per_consumer_min\":{lo},\"per_consumer_max\":{hi},\"group_waits\":{gw},\"dbsize_after\":{dbsize},\"window\":{{{}}}}}",
        a.str("peer", ""),
        acked as f64 / dt,
        usec as f64 / acked.max(1) as f64,
        (c1 - c0) / acked.max(1) as f64,
        window.join(",")
    ))
}

fn main() {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rmq-bench-driver: {e}");
            std::process::exit(2);
        }
    };
    let timeout = args.float("timeout", 300.0).unwrap_or(300.0);
    let mode = args.mode.clone();
    thread::spawn(move || {
        thread::sleep(Duration::from_secs_f64(timeout));
        eprintln!("rmq-bench-driver: {mode} still running after {timeout} s (--timeout); giving up");
        std::process::exit(3);
    });
    let r = match args.mode.as_str() {
        "cpu" => mode_cpu(&args),
        "e2e" => mode_e2e(&args),
        "latency" => mode_latency(&args),
        "fill" => mode_fill(&args),
        "scale" => mode_scale(&args),
        "memory" => mode_memory(&args),
        "gfill" => mode_gfill(&args),
        "drain" => mode_drain(&args),
        "cluster" => cluster::mode_cluster(&args),
        "sqs-load" => sqs_load::mode_load(&args),
        "sqs-latency" => sqs_load::mode_latency(&args),
        m => Err(format!("unknown mode {m}").into()),
    };
    match r {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("rmq-bench-driver {}: {e}", args.mode);
            std::process::exit(1);
        }
    }
}
