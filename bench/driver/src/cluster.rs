//! Mode `cluster` (make bench-cluster, bench/bench_cluster.py): a topic driven over every
//! primary of a Redis Cluster (or one standalone server, which then owns every slot).
//!
//! - The slot map comes from CLUSTER SLOTS; every thread keeps one connection per primary.
//!   MOVED updates the map (the slot's new owner), ASK sends ASKING + the command to the
//!   node named, TRYAGAIN / CLUSTERDOWN / a lost connection retry after a pause (a lost
//!   connection also re-reads the map). Each MOVED and ASK is counted as a redirection.
//! - Producers push batches of `--batch` messages, one batch per routing basis, to the
//!   queue RMQ.ROUTE names for it (`route::queue_for`, the module's own code): a topic
//!   `--topic` of `--slots` queues. Every message's content is unique (producer, sequence).
//! - `--consumers` consumers per primary, each sending RMQ.TPOP topic slots COUNT `--count`
//!   (QUANTUM `--quantum` when the server accepts it: tried once at start; BLOCK
//!   `--block-ms` if not 0) to its primary and ACKing each message on its own queue, in the same
//!   round trip as its next TPOP.
//! - Producers pause while more than `--backlog` messages per primary are unacked.
//! - Producers stop after `--secs` (after `--warmup`), `--messages`, or once the file
//!   `--stop-file` exists (the script ends the traffic a while after an event); consumers then drain
//!   until everything acknowledged was acked, or nothing moved for `--drain-secs`.
//! - Checks every message: acknowledged by a PUSH reply, delivered (with its delivery
//!   count: a count above 1 is a redelivery after a lease ran out), acked. Lost = pushed
//!   and acknowledged but never delivered; an uncounted duplicate = a second delivery
//!   whose delivery count is 1. A batch whose PUSH got no reply (connection lost) is
//!   pushed again and its messages listed as uncertain (they may exist twice).
//! - With `--pids port=pid,…`, each primary's own CPU (utime + stime from /proc/<pid>/stat,
//!   `--clk-tck` ticks a second) over the measured window, and the messages it acked.
//! - A timeline (every 100 ms: wall-clock ms, pushed, acked, redirections, errors) for the
//!   throughput around a resharding or a failover.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, Value};

use crate::{now_ms, route, Args, Res};

const HASH_SLOTS: usize = 16384;

/// Which primary serves each hash slot (an index into `addrs`).
#[derive(Clone)]
struct SlotMap {
    owner: Vec<u16>,
    addrs: Vec<String>,
}

impl SlotMap {
    fn addr_of(&self, slot: u16) -> &str {
        &self.addrs[self.owner[slot as usize] as usize]
    }
    fn index_of(&mut self, addr: &str) -> u16 {
        match self.addrs.iter().position(|a| a == addr) {
            Some(i) => i as u16,
            None => {
                self.addrs.push(addr.to_string());
                (self.addrs.len() - 1) as u16
            }
        }
    }
    /// The primaries that own at least one slot, in a stable order.
    fn primaries(&self) -> Vec<String> {
        let used: HashSet<u16> = self.owner.iter().copied().collect();
        let mut out: Vec<String> = used.into_iter().map(|i| self.addrs[i as usize].clone()).collect();
        out.sort();
        out
    }
}

fn connect(addr: &str) -> Res<Connection> {
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    con.set_read_timeout(Some(Duration::from_secs(20)))?;
    con.set_write_timeout(Some(Duration::from_secs(20)))?;
    Ok(con)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The slot map as `addr` sees it: CLUSTER SLOTS, or every slot on `addr` when cluster
/// support is disabled (a standalone server).
fn read_slot_map(addr: &str) -> Res<SlotMap> {
    let mut con = connect(addr)?;
    let reply: redis::RedisResult<Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con);
    let mut map = SlotMap { owner: vec![u16::MAX; HASH_SLOTS], addrs: Vec::new() };
    match reply {
        Err(e) if e.to_string().contains("cluster support disabled") => {
            map.addrs.push(addr.to_string());
            map.owner.fill(0);
        }
        Err(e) => return Err(e.into()),
        Ok(Value::Array(ranges)) => {
            for r in ranges {
                let Value::Array(r) = r else { continue };
                let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(node))) = (r.first(), r.get(1), r.get(2)) else {
                    continue;
                };
                let (Some(ip), Some(Value::Int(port))) = (node.first().and_then(text), node.get(1)) else { continue };
                let ip = if ip.is_empty() { addr.rsplit_once(':').map(|(h, _)| h.to_string()).unwrap_or_default() } else { ip };
                let i = map.index_of(&format!("{ip}:{port}"));
                for s in *a..=*b {
                    map.owner[s as usize] = i;
                }
            }
        }
        Ok(other) => return Err(format!("CLUSTER SLOTS: unexpected reply {other:?}").into()),
    }
    if map.owner.contains(&u16::MAX) {
        return Err(format!("{addr}: not every slot is served").into());
    }
    Ok(map)
}

/// The shared view of the cluster, and the counters every thread adds to.
struct Shared {
    map: RwLock<Arc<SlotMap>>,
    /// Every address ever seen (where a refresh may ask).
    known: Mutex<Vec<String>>,
    stop_producing: AtomicBool,
    stop_consuming: AtomicBool,
    pushed: AtomicU64,
    /// Messages acknowledged by the first PUSH that carried them (not pushed again after a
    /// lost reply): the drain waits for this many acks.
    pushed_sure: AtomicU64,
    acked: AtomicU64,
    /// When a TPOP last returned something (ms).
    last_pop_ms: AtomicU64,
    redirects: AtomicU64,
    errors: AtomicU64,
    /// Batches claimed by producers (for `--messages`).
    batches: AtomicU64,
    /// Messages acked per primary address.
    acked_on: Mutex<HashMap<String, u64>>,
}

impl Shared {
    fn map(&self) -> Arc<SlotMap> {
        self.map.read().map(|m| m.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }
    /// MOVED: the slot's owner is `addr` from now on.
    fn moved(&self, slot: u16, addr: &str) {
        let mut g = self.map.write().unwrap_or_else(|p| p.into_inner());
        let mut m = (**g).clone();
        let i = m.index_of(addr);
        m.owner[slot as usize] = i;
        *g = Arc::new(m);
    }
    /// Reads the slot map again from the first node that answers with every slot served.
    fn refresh(&self) {
        let known = self.known.lock().map(|k| k.clone()).unwrap_or_default();
        for addr in known {
            if let Ok(m) = read_slot_map(&addr) {
                if let Ok(mut k) = self.known.lock() {
                    for a in &m.addrs {
                        if !k.contains(a) {
                            k.push(a.clone());
                        }
                    }
                }
                *self.map.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(m);
                return;
            }
        }
    }
}

/// One connection per node, made when first needed and dropped when it fails.
#[derive(Default)]
struct Conns(HashMap<String, Connection>);

impl Conns {
    /// Sends `p` to `addr`. A failure drops the connection: `Err(false)` when nothing was
    /// sent (no connection), `Err(true)` when the commands may have run (no reply).
    fn send(&mut self, addr: &str, p: &redis::Pipeline) -> Result<Vec<Value>, bool> {
        if !self.0.contains_key(addr) {
            self.0.insert(addr.to_string(), connect(addr).map_err(|_| false)?);
        }
        let con = self.0.get_mut(addr).ok_or(false)?;
        p.query::<Vec<Value>>(con).map_err(|_| {
            self.0.remove(addr);
            true
        })
    }
}

/// A pipeline whose server errors come back as values (MOVED, ASK, … are handled per reply).
fn pipe() -> redis::Pipeline {
    let mut p = redis::pipe();
    p.ignore_errors();
    p
}

/// What a reply says to do with the command it answers.
enum Outcome {
    Done(Value),
    /// MOVED (the map is updated) or TRYAGAIN / CLUSTERDOWN: send it again later.
    Retry,
    /// ASK: send it to this node after ASKING.
    Ask(String),
}

fn outcome(sh: &Shared, v: Value) -> Res<Outcome> {
    let Value::ServerError(e) = &v else { return Ok(Outcome::Done(v)) };
    let details = e.details().unwrap_or("");
    match e.code() {
        "MOVED" | "ASK" => {
            sh.redirects.fetch_add(1, Ordering::Relaxed);
            let mut it = details.split_whitespace();
            let slot: u16 = it.next().and_then(|s| s.parse().ok()).ok_or("bad redirection")?;
            let addr = it.next().ok_or("bad redirection")?.to_string();
            if e.code() == "MOVED" {
                sh.moved(slot, &addr);
                Ok(Outcome::Retry)
            } else {
                Ok(Outcome::Ask(addr))
            }
        }
        "TRYAGAIN" | "CLUSTERDOWN" | "LOADING" | "MASTERDOWN" => {
            sh.errors.fetch_add(1, Ordering::Relaxed);
            Ok(Outcome::Retry)
        }
        c => Err(format!("server error: {c} {details}").into()),
    }
}

/// A message's content: its producer and sequence number, 16 hex digits.
fn content(id: u64) -> String {
    format!("{id:016x}")
}

fn parse_content(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok().and_then(|s| u64::from_str_radix(s, 16).ok())
}

struct Batch {
    queue: String,
    slot: u16,
    msgs: Vec<u64>,
    /// Sent before without a reply: its messages may exist already.
    uncertain: bool,
    /// Times sent without success.
    tries: u32,
}

#[derive(Default)]
struct ProducerLog {
    acknowledged: Vec<u64>,
    uncertain: Vec<u64>,
}

fn push_cmd(p: &mut redis::Pipeline, b: &Batch) {
    let c = p.cmd("RMQ.PUSH").arg(&b.queue).arg("PRIORITY").arg(0);
    for m in &b.msgs {
        c.arg(content(*m));
    }
}

struct Cfg {
    topic: String,
    slots: u32,
    batch: usize,
    depth: usize,
    count: u64,
    quantum: Option<u64>,
    lease_ms: u64,
    block_ms: u64,
    backlog: u64,
    max_batches: u64,
}

fn producer(id: u64, cfg: Arc<Cfg>, sh: Arc<Shared>) -> Res<ProducerLog> {
    let mut conns = Conns::default();
    let mut log = ProducerLog::default();
    let mut pending: Vec<Batch> = Vec::new();
    let mut seq: u64 = 0;
    let mut basis_no: u64 = 0;
    loop {
        let stopping = sh.stop_producing.load(Ordering::Relaxed);
        if stopping && pending.is_empty() {
            break;
        }
        if !stopping {
            let inflight = sh.pushed.load(Ordering::Relaxed).saturating_sub(sh.acked.load(Ordering::Relaxed));
            if inflight > cfg.backlog {
                thread::sleep(Duration::from_micros(100));
                continue;
            }
            // Batches waiting for a shard that does not answer (a failover) do not hold
            // back the others: up to `depth` new ones a round, at most 1000 waiting.
            let waiting = pending.iter().filter(|b| b.tries > 0).count();
            while pending.len() < (cfg.depth + waiting).min(1000) {
                if sh.batches.fetch_add(1, Ordering::Relaxed) >= cfg.max_batches {
                    sh.stop_producing.store(true, Ordering::Relaxed);
                    break;
                }
                basis_no += 1;
                let queue = route::queue_for(cfg.topic.as_bytes(), cfg.slots, format!("p{id}:{basis_no}").as_bytes());
                let queue = String::from_utf8(queue)?;
                let slot = route::key_slot(queue.as_bytes());
                let msgs = (0..cfg.batch)
                    .map(|_| {
                        seq += 1;
                        id << 40 | seq
                    })
                    .collect();
                pending.push(Batch { queue, slot, msgs, uncertain: false, tries: 0 });
            }
        }
        // One pipeline per primary; what is not done stays pending.
        let map = sh.map();
        let mut by_addr: BTreeMap<String, Vec<Batch>> = BTreeMap::new();
        for b in pending.drain(..) {
            by_addr.entry(map.addr_of(b.slot).to_string()).or_default().push(b);
        }
        let mut stalled = false;
        for (addr, batches) in by_addr {
            let mut p = pipe();
            for b in &batches {
                push_cmd(&mut p, b);
            }
            let replies = match conns.send(&addr, &p) {
                Ok(r) => r,
                Err(maybe_ran) => {
                    sh.errors.fetch_add(1, Ordering::Relaxed);
                    pending.extend(batches.into_iter().map(|b| Batch { uncertain: b.uncertain || maybe_ran, tries: b.tries + 1, ..b }));
                    stalled = true;
                    continue;
                }
            };
            for (b, r) in batches.into_iter().zip(replies) {
                let mut r = outcome(&sh, r)?;
                if let Outcome::Ask(to) = &r {
                    let mut p = pipe();
                    p.cmd("ASKING").ignore();
                    push_cmd(&mut p, &b);
                    r = match conns.send(to, &p) {
                        Ok(mut v) => outcome(&sh, v.pop().unwrap_or(Value::Nil))?,
                        Err(_) => Outcome::Retry,
                    };
                }
                match r {
                    Outcome::Done(_) => {
                        sh.pushed.fetch_add(b.msgs.len() as u64, Ordering::Relaxed);
                        if b.uncertain {
                            log.uncertain.extend(&b.msgs);
                        } else {
                            sh.pushed_sure.fetch_add(b.msgs.len() as u64, Ordering::Relaxed);
                        }
                        log.acknowledged.extend(b.msgs);
                    }
                    _ => {
                        stalled = true;
                        pending.push(Batch { tries: b.tries + 1, ..b });
                    }
                }
            }
        }
        if stalled {
            thread::sleep(Duration::from_millis(20));
            sh.refresh();
        }
    }
    Ok(log)
}

#[derive(Default)]
struct ConsumerLog {
    /// Per message: first deliveries (delivery count 1) and redeliveries (count > 1).
    seen: HashMap<u64, (u32, u32)>,
    tpops: u64,
    empty_tpops: u64,
    foreign: u64,
}

struct Item {
    queue: String,
    msg: Vec<u8>,
}

fn tpop_cmd(p: &mut redis::Pipeline, cfg: &Cfg) {
    let c = p.cmd("RMQ.TPOP").arg(&cfg.topic).arg(cfg.slots).arg("COUNT").arg(cfg.count).arg("LEASE").arg(cfg.lease_ms);
    if let Some(q) = cfg.quantum {
        c.arg("QUANTUM").arg(q);
    }
    if cfg.block_ms > 0 {
        c.arg("BLOCK").arg(cfg.block_ms);
    }
}

/// ACK commands for `items`, one per queue, with the queues in the order they come.
fn ack_cmds(items: &[Item]) -> Vec<(String, Vec<&[u8]>)> {
    let mut out: Vec<(String, Vec<&[u8]>)> = Vec::new();
    for it in items {
        match out.iter_mut().find(|(q, _)| *q == it.queue) {
            Some((_, ms)) => ms.push(&it.msg),
            None => out.push((it.queue.clone(), vec![&it.msg])),
        }
    }
    out
}

fn add_ack(p: &mut redis::Pipeline, q: &str, msgs: &[&[u8]]) {
    let c = p.cmd("RMQ.ACK").arg(q);
    for m in msgs {
        c.arg(*m);
    }
}

/// Consumer number `lane` serves primary `lane mod N` (of the primaries in the current map,
/// so a promoted replica is served in its primary's place): TPOP, with BLOCK `--block-ms`
/// if not 0, else a pause of 0.5 ms after an empty one.
fn consumer(lane: usize, cfg: Arc<Cfg>, sh: Arc<Shared>) -> Res<ConsumerLog> {
    let mut conns = Conns::default();
    let mut log = ConsumerLog::default();
    // Messages popped and not yet acked, by the node they were popped from.
    let mut to_ack: HashMap<String, Vec<Item>> = HashMap::new();
    loop {
        let stop = sh.stop_consuming.load(Ordering::Relaxed);
        let map = sh.map();
        let mut got = 0usize;
        let primaries = map.primaries();
        let mine = primaries[lane % primaries.len()].clone();
        // Its own primary, then any other node it still holds unacked messages from.
        let mut targets = vec![mine.clone()];
        targets.extend(to_ack.keys().filter(|a| **a != mine).cloned());
        for addr in targets {
            let items = to_ack.remove(&addr).unwrap_or_default();
            // ACKs go where the map says each queue is now; those for `addr` share the
            // round trip with its TPOP.
            let mut here: Vec<(String, Vec<&[u8]>)> = Vec::new();
            let mut elsewhere: Vec<(String, String, Vec<&[u8]>)> = Vec::new();
            for (q, ms) in ack_cmds(&items) {
                let owner = map.addr_of(route::key_slot(q.as_bytes())).to_string();
                if owner == addr {
                    here.push((q, ms));
                } else {
                    elsewhere.push((owner, q, ms));
                }
            }
            for (owner, q, ms) in elsewhere {
                ack_one(&sh, &mut conns, &owner, &q, &ms, 0)?;
            }
            let pop = !stop && addr == mine;
            if !pop && here.is_empty() {
                continue;
            }
            let mut p = pipe();
            for (q, ms) in &here {
                add_ack(&mut p, q, ms);
            }
            if pop {
                tpop_cmd(&mut p, &cfg);
            }
            let mut replies = match conns.send(&addr, &p) {
                Ok(r) => r,
                Err(_) => {
                    // Unacked: their leases run out and they come again (counted).
                    sh.errors.fetch_add(1, Ordering::Relaxed);
                    thread::sleep(Duration::from_millis(20));
                    sh.refresh();
                    continue;
                }
            };
            let tpop = if pop { replies.pop() } else { None };
            for ((q, ms), r) in here.iter().zip(replies) {
                match outcome(&sh, r)? {
                    Outcome::Done(Value::Int(n)) => count_acked(&sh, &addr, n as u64),
                    Outcome::Done(v) => return Err(format!("ACK: unexpected reply {v:?}").into()),
                    Outcome::Ask(to) => ack_one(&sh, &mut conns, &to, q, ms, 1)?,
                    Outcome::Retry => {
                        let owner = sh.map().addr_of(route::key_slot(q.as_bytes())).to_string();
                        ack_one(&sh, &mut conns, &owner, q, ms, 0)?
                    }
                }
            }
            let Some(tpop) = tpop else { continue };
            log.tpops += 1;
            let Outcome::Done(v) = outcome(&sh, tpop)? else { continue };
            let mut popped = Vec::new();
            if let Value::Array(entries) = v {
                for e in entries {
                    let Value::Array(t) = e else { continue };
                    let (Some(Value::BulkString(q)), Some(Value::BulkString(m)), Some(Value::Int(d))) = (t.first(), t.get(1), t.get(2))
                    else {
                        continue;
                    };
                    match parse_content(m) {
                        Some(id) => {
                            let e = log.seen.entry(id).or_default();
                            if *d <= 1 {
                                e.0 += 1;
                            } else {
                                e.1 += 1;
                            }
                        }
                        None => log.foreign += 1,
                    }
                    popped.push(Item { queue: String::from_utf8_lossy(q).into_owned(), msg: m.clone() });
                }
            }
            if popped.is_empty() {
                log.empty_tpops += 1;
            } else {
                sh.last_pop_ms.store(now_ms() as u64, Ordering::Relaxed);
            }
            got += popped.len();
            to_ack.insert(addr, popped);
        }
        if stop && to_ack.values().all(|v| v.is_empty()) {
            break;
        }
        if got == 0 && cfg.block_ms == 0 {
            thread::sleep(Duration::from_micros(500));
        }
    }
    Ok(log)
}

fn count_acked(sh: &Shared, addr: &str, n: u64) {
    sh.acked.fetch_add(n, Ordering::Relaxed);
    if let Ok(mut m) = sh.acked_on.lock() {
        *m.entry(addr.to_string()).or_default() += n;
    }
}

/// One ACK on its own, following redirections (at most a few hops; a message whose ACK
/// cannot be delivered comes again when its lease runs out, and is counted so).
fn ack_one(sh: &Shared, conns: &mut Conns, addr: &str, q: &str, ms: &[&[u8]], hop: u32) -> Res<()> {
    let mut addr = addr.to_string();
    let mut asking = hop > 0;
    for _ in 0..5 {
        let mut p = pipe();
        if asking {
            p.cmd("ASKING").ignore();
        }
        add_ack(&mut p, q, ms);
        let Ok(mut r) = conns.send(&addr, &p) else {
            sh.errors.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        match outcome(sh, r.pop().unwrap_or(Value::Nil))? {
            Outcome::Done(Value::Int(n)) => {
                count_acked(sh, &addr, n as u64);
                return Ok(());
            }
            Outcome::Done(v) => return Err(format!("ACK: unexpected reply {v:?}").into()),
            Outcome::Ask(to) => (addr, asking) = (to, true),
            Outcome::Retry => {
                thread::sleep(Duration::from_millis(10));
                (addr, asking) = (sh.map().addr_of(route::key_slot(q.as_bytes())).to_string(), false);
            }
        }
    }
    Ok(())
}

/// utime + stime of `pid`, in seconds.
fn proc_cpu_s(pid: u32, tck: f64) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return f64::NAN };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let Some(rest) = s.rfind(')').map(|i| &s[i + 2..]) else { return f64::NAN };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (get(11) + get(12)) / tck
}

/// Does the server take TPOP … QUANTUM? (One try on an empty COUNT 1 pop.)
fn quantum_supported(addr: &str, cfg: &Cfg, q: u64) -> Res<bool> {
    let mut con = connect(addr)?;
    let r: redis::RedisResult<Value> =
        redis::cmd("RMQ.TPOP").arg(format!("{}-probe", cfg.topic)).arg(1).arg("COUNT").arg(1).arg("QUANTUM").arg(q).query(&mut con);
    Ok(r.is_ok())
}

pub fn mode_cluster(a: &Args) -> Res<String> {
    let seed = a.str("seed", "127.0.0.1:6379");
    let secs = a.float("secs", 5.0)?;
    let warmup = a.float("warmup", 1.0)?;
    let messages = a.num("messages", 0)?;
    let producers = a.num("producers", 2)?;
    let consumers = a.num("consumers", 2)?;
    let drain = Duration::from_secs_f64(a.float("drain-secs", 10.0)?);
    let quiet_ms = a.num("quiet-ms", 1000)?;
    let tck = a.float("clk-tck", 100.0)?;
    let batch = a.num("batch", 100)?.max(1) as usize;
    let slots = a.num("slots", 1024)? as u32;
    if !slots.is_power_of_two() || slots > route::MAX_SLOTS {
        return Err("--slots: a power of two up to 16384".into());
    }
    let mut cfg = Cfg {
        topic: a.str("topic", "t"),
        slots,
        batch,
        depth: a.num("push-depth", 4)? as usize,
        count: a.num("count", 100)?,
        quantum: None,
        lease_ms: a.num("lease-ms", 30_000)?,
        // Polling by default: a blocked TPOP on a cluster node sometimes never gets its
        // reply (tests/test_cluster_scaleout.py reproduces it).
        block_ms: a.num("block-ms", 0)?,
        backlog: 0,
        max_batches: if messages > 0 { messages.div_ceil(batch as u64) } else { u64::MAX },
    };
    let map = read_slot_map(&seed)?;
    let want_q = a.num("quantum", 100)?;
    if want_q > 0 && quantum_supported(&map.primaries()[0], &cfg, want_q)? {
        cfg.quantum = Some(want_q);
    }
    let pids: HashMap<String, u32> = a
        .str("pids", "")
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(port, pid)| Some((format!("127.0.0.1:{port}"), pid.parse().ok()?)))
        .collect();
    let n_primaries = map.primaries().len();
    // --backlog is per primary: each primary holds about as many messages (and so as many
    // busy queues, which decide how many messages a TPOP takes from each) at any N.
    cfg.backlog = a.num("backlog", 20_000)? * n_primaries as u64;
    let sh = Arc::new(Shared {
        known: Mutex::new(map.addrs.clone()),
        map: RwLock::new(Arc::new(map)),
        stop_producing: AtomicBool::new(false),
        stop_consuming: AtomicBool::new(false),
        pushed: AtomicU64::new(0),
        pushed_sure: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        last_pop_ms: AtomicU64::new(0),
        redirects: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        acked_on: Mutex::new(HashMap::new()),
    });
    let cfg = Arc::new(cfg);
    let t_start = Instant::now();
    let prod: Vec<_> = (0..producers)
        .map(|id| {
            let (cfg, sh) = (cfg.clone(), sh.clone());
            thread::spawn(move || producer(id + 1, cfg, sh))
        })
        .collect();
    let cons: Vec<_> = (0..consumers as usize * n_primaries)
        .map(|lane| {
            let (cfg, sh) = (cfg.clone(), sh.clone());
            thread::spawn(move || consumer(lane, cfg, sh))
        })
        .collect();
    let sample = |sh: &Shared| {
        format!(
            "[{},{},{},{},{}]",
            now_ms(),
            sh.pushed.load(Ordering::Relaxed),
            sh.acked.load(Ordering::Relaxed),
            sh.redirects.load(Ordering::Relaxed),
            sh.errors.load(Ordering::Relaxed)
        )
    };
    let mut timeline = vec![sample(&sh)];
    let tick = Duration::from_millis(100);
    let mut next = Instant::now() + tick;
    // Samples the timeline when due, until `until()` holds (checked at least once after a
    // sample).
    let mut wait_until = |until: &dyn Fn() -> bool, timeline: &mut Vec<String>| loop {
        if Instant::now() >= next {
            timeline.push(sample(&sh));
            next += tick;
        }
        if until() {
            break;
        }
        thread::sleep(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(5)));
    };
    // The measured window: from the end of the warmup to the end of --secs (or to the
    // last push of --messages).
    let warm_end = t_start + Duration::from_secs_f64(warmup);
    wait_until(&|| Instant::now() >= warm_end || sh.stop_producing.load(Ordering::Relaxed), &mut timeline);
    let snap = |sh: &Shared| {
        let cpu: BTreeMap<String, f64> = pids.iter().map(|(a, p)| (a.clone(), proc_cpu_s(*p, tck))).collect();
        let on = sh.acked_on.lock().map(|m| m.clone()).unwrap_or_default();
        (Instant::now(), sh.acked.load(Ordering::Relaxed), sh.pushed.load(Ordering::Relaxed), sh.redirects.load(Ordering::Relaxed), cpu, on)
    };
    let w0 = snap(&sh);
    let run_end = warm_end + Duration::from_secs_f64(secs);
    let stop_file = a.str("stop-file", "");
    if messages == 0 {
        wait_until(&|| Instant::now() >= run_end || (!stop_file.is_empty() && std::path::Path::new(&stop_file).exists()), &mut timeline);
        sh.stop_producing.store(true, Ordering::Relaxed);
    }
    let mut logs = Vec::new();
    for h in prod {
        // Producers finish their pending batches (retrying through a failover) first.
        while !h.is_finished() {
            wait_until(&|| true, &mut timeline);
            thread::sleep(Duration::from_millis(5));
        }
        logs.push(h.join().map_err(|_| "a producer panicked")??);
    }
    let w1 = snap(&sh);
    // Drain: until everything acknowledged was acked and no TPOP found anything for
    // --quiet-ms (redeliveries after a failure), or nothing moved for --drain-secs.
    let (mut last, mut last_t) = (u64::MAX, Instant::now());
    loop {
        let acked = sh.acked.load(Ordering::Relaxed);
        let quiet = (now_ms() as u64).saturating_sub(sh.last_pop_ms.load(Ordering::Relaxed)) >= quiet_ms;
        if (acked >= sh.pushed_sure.load(Ordering::Relaxed) && quiet) || cons.iter().all(|h| h.is_finished()) {
            break;
        }
        if acked != last {
            (last, last_t) = (acked, Instant::now());
        } else if last_t.elapsed() > drain {
            break;
        }
        wait_until(&|| true, &mut timeline);
        thread::sleep(Duration::from_millis(20));
    }
    sh.stop_consuming.store(true, Ordering::Relaxed);
    let mut clogs = Vec::new();
    for h in cons {
        clogs.push(h.join().map_err(|_| "a consumer panicked")??);
    }
    timeline.push(sample(&sh));
    report(a, &cfg, &sh, n_primaries, &w0, &w1, &logs, &clogs, &timeline)
}

type Snap = (Instant, u64, u64, u64, BTreeMap<String, f64>, HashMap<String, u64>);

#[allow(clippy::too_many_arguments)]
fn report(
    a: &Args,
    cfg: &Cfg,
    sh: &Shared,
    n_primaries: usize,
    w0: &Snap,
    w1: &Snap,
    logs: &[ProducerLog],
    clogs: &[ConsumerLog],
    timeline: &[String],
) -> Res<String> {
    let dt = w1.0.duration_since(w0.0).as_secs_f64().max(1e-9);
    let mut nodes = Vec::new();
    for (addr, c1) in &w1.4 {
        let c0 = w0.4.get(addr).copied().unwrap_or(f64::NAN);
        let n = w1.5.get(addr).copied().unwrap_or(0) - w0.5.get(addr).copied().unwrap_or(0);
        let cpu = c1 - c0;
        nodes.push(format!("\"{addr}\":{{\"cpu_s\":{cpu:.3},\"acked\":{n},\"cpu_us_per_msg\":{:.4}}}", cpu * 1e6 / n.max(1) as f64));
    }
    let acked_on_total: Vec<String> =
        sh.acked_on.lock().map(|m| m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect()).unwrap_or_default();
    // The message check.
    let acknowledged: HashSet<u64> = logs.iter().flat_map(|l| l.acknowledged.iter().copied()).collect();
    let uncertain: HashSet<u64> = logs.iter().flat_map(|l| l.uncertain.iter().copied()).collect();
    let mut seen: HashMap<u64, (u32, u32)> = HashMap::new();
    for l in clogs {
        for (id, (f, r)) in &l.seen {
            let e = seen.entry(*id).or_default();
            e.0 += f;
            e.1 += r;
        }
    }
    let lost: Vec<u64> = acknowledged.iter().filter(|id| !seen.contains_key(id)).copied().collect();
    let redelivered: u64 = seen.values().map(|(_, r)| *r as u64).sum();
    let dup =
        |pick: &dyn Fn(&u64) -> bool| -> u64 { seen.iter().filter(|(id, _)| pick(id)).map(|(_, (f, _))| f.saturating_sub(1) as u64).sum() };
    let dup_uncounted = dup(&|id| !uncertain.contains(id));
    let dup_uncertain = dup(&|id| uncertain.contains(id));
    let unknown = seen.keys().filter(|id| !acknowledged.contains(id)).count();
    let sum = |f: &dyn Fn(&ConsumerLog) -> u64| -> u64 { clogs.iter().map(f).sum() };
    let lost_sample: Vec<String> = lost.iter().take(5).map(|id| format!("\"{}\"", content(*id))).collect();
    Ok(format!(
        concat!(
            "{{\"mode\":\"cluster\",\"seed\":\"{}\",\"primaries\":{},\"topic_slots\":{},\"batch\":{},\"count\":{},\"quantum\":{},",
            "\"window_s\":{:.3},\"msgs_per_s\":{:.0},\"pushed_per_s\":{:.0},\"redirects_window\":{},\"nodes\":{{{}}},",
            "\"acked_on\":{{{}}},\"pushed\":{},\"acked\":{},\"redirects\":{},\"errors\":{},\"tpops\":{},\"empty_tpops\":{},",
            "\"acknowledged\":{},\"uncertain\":{},\"delivered\":{},\"lost\":{},\"lost_sample\":[{}],\"redelivered_after_lease\":{},",
            "\"dup_uncounted\":{},\"dup_uncertain\":{},\"unknown_delivered\":{},\"foreign\":{},\"timeline\":[{}]}}"
        ),
        a.str("seed", ""),
        n_primaries,
        cfg.slots,
        cfg.batch,
        cfg.count,
        cfg.quantum.map(|q| q.to_string()).unwrap_or_else(|| "null".into()),
        dt,
        (w1.1 - w0.1) as f64 / dt,
        (w1.2 - w0.2) as f64 / dt,
        w1.3 - w0.3,
        nodes.join(","),
        acked_on_total.join(","),
        sh.pushed.load(Ordering::Relaxed),
        sh.acked.load(Ordering::Relaxed),
        sh.redirects.load(Ordering::Relaxed),
        sh.errors.load(Ordering::Relaxed),
        sum(&|l| l.tpops),
        sum(&|l| l.empty_tpops),
        acknowledged.len(),
        uncertain.len(),
        seen.len(),
        lost.len(),
        lost_sample.join(","),
        redelivered,
        dup_uncounted,
        dup_uncertain,
        unknown,
        sum(&|l| l.foreign),
        timeline.join(",")
    ))
}
