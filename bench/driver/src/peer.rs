//! The systems compared, each as the commands one message lifecycle (push → pop → ack)
//! takes on it. Every peer fills a pipeline; the caller sends it and parses the pops.

use std::cell::Cell;

use redis::{Connection, Pipeline, Value};

use crate::now_ms;

pub const PUSH_LUA: &str = include_str!("../../lua/push.lua");
pub const POP_LUA: &str = include_str!("../../lua/pop.lua");
pub const ACK_LUA: &str = include_str!("../../lua/ack.lua");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// RMQ.PUSH q PRIORITY p m…; RMQ.POP q [COUNT n]; RMQ.ACK q m…
    Rmq,
    /// The original RMQ design: push/pop/ack Lua scripts through EVALSHA.
    Lua,
    /// Redis Streams: XADD; XREADGROUP COUNT n; XACK + XDEL.
    Streams,
    /// Bare sorted-set moves of one lifecycle: ZADD q; ZPOPMAX q + ZADD prepare; ZREM prepare.
    Zset,
    /// PING: the transport floor (no message moves).
    Ping,
    /// RMQ.TPOP over the topic `q` of `slots` queues `q_0 … q_{slots-1}` (pushes go to
    /// `q_{i mod slots}`, acks to each message's own queue).
    Tpop,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "rmq" => Kind::Rmq,
            "lua" => Kind::Lua,
            "streams" => Kind::Streams,
            "zset" => Kind::Zset,
            "ping" => Kind::Ping,
            "tpop" => Kind::Tpop,
            _ => return None,
        })
    }

    /// The top-level commands this peer sends (what `INFO commandstats` is summed over;
    /// commands run inside a script are counted in EVALSHA's time, not again).
    pub fn commands(self) -> &'static [&'static str] {
        match self {
            Kind::Rmq => &["rmq.push", "rmq.pop", "rmq.ack"],
            Kind::Lua => &["evalsha"],
            Kind::Streams => &["xadd", "xreadgroup", "xack", "xdel"],
            Kind::Zset => &["zadd", "zpopmax", "zrem"],
            Kind::Ping => &["ping"],
            Kind::Tpop => &["rmq.push", "rmq.tpop", "rmq.ack"],
        }
    }
}

/// A popped message: its content, and its entry id for Streams (its queue for TPOP).
#[derive(Clone, Debug)]
pub struct Item {
    pub msg: Vec<u8>,
    pub id: Vec<u8>,
}

pub struct Peer {
    pub kind: Kind,
    pub q: String,
    prepare: String,
    meta: String,
    dead: String,
    shas: [String; 3],
    pub lease_ms: u64,
    consumer: String,
    /// RMQ: `GROUP g` on every push while set.
    pub group: Option<String>,
    /// TPOP: the topic's slot count, and where the next push starts spreading.
    pub slots: usize,
    spread: Cell<usize>,
    /// TPOP: QUANTUM (messages per queue per turn; 1, the default, is not sent).
    pub quantum: usize,
}

const GROUP: &str = "g";

impl Peer {
    /// `q` is the queue (or stream, or sorted set); `consumer` names a Streams consumer.
    pub fn new(kind: Kind, q: &str, consumer: &str, con: &mut Connection) -> redis::RedisResult<Peer> {
        let mut shas = [String::new(), String::new(), String::new()];
        if kind == Kind::Lua {
            for (i, src) in [PUSH_LUA, POP_LUA, ACK_LUA].iter().enumerate() {
                shas[i] = redis::cmd("SCRIPT").arg("LOAD").arg(*src).query(con)?;
            }
        }
        Ok(Peer {
            kind,
            q: q.to_string(),
            prepare: format!("prepare{{{q}}}"),
            meta: format!("meta{{{q}}}"),
            dead: format!("dead{{{q}}}"),
            shas,
            lease_ms: 30_000,
            consumer: consumer.to_string(),
            group: None,
            slots: 1,
            spread: Cell::new(0),
            quantum: 1,
        })
    }

    /// The keys this peer keeps for one queue (for MEMORY USAGE).
    pub fn keys(&self) -> Vec<String> {
        match self.kind {
            Kind::Rmq | Kind::Lua => vec![self.q.clone(), self.prepare.clone(), self.meta.clone(), self.dead.clone()],
            Kind::Streams | Kind::Zset | Kind::Ping => vec![self.q.clone()],
            Kind::Tpop => (0..self.slots).map(|i| self.slot_queue(i)).collect(),
        }
    }

    /// The topic's queue number `i` (TPOP).
    pub fn slot_queue(&self, i: usize) -> String {
        format!("{}_{i}", self.q)
    }

    /// Creates what must exist before the first push (the Streams consumer group).
    pub fn setup(&self, con: &mut Connection) -> redis::RedisResult<()> {
        if self.kind == Kind::Streams {
            let r: redis::RedisResult<Value> =
                redis::cmd("XGROUP").arg("CREATE").arg(&self.q).arg(GROUP).arg("0").arg("MKSTREAM").query(con);
            if let Err(e) = r {
                if !e.to_string().contains("BUSYGROUP") {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Adds the commands that push `msgs` (one command for all of them, except Streams:
    /// one XADD each). Returns how many commands were added.
    pub fn add_push(&self, p: &mut Pipeline, prio: i64, msgs: &[String]) -> usize {
        match self.kind {
            Kind::Rmq => {
                let c = p.cmd("RMQ.PUSH").arg(&self.q).arg("PRIORITY").arg(prio);
                if let Some(g) = &self.group {
                    c.arg("GROUP").arg(g);
                }
                for m in msgs {
                    c.arg(m.as_str());
                }
                1
            }
            Kind::Tpop => {
                // Spread over the topic's queues, one command per queue that gets some.
                let mut per: Vec<Vec<&str>> = vec![Vec::new(); self.slots];
                let off = self.spread.get();
                for (i, m) in msgs.iter().enumerate() {
                    per[(off + i) % self.slots].push(m.as_str());
                }
                self.spread.set((off + msgs.len()) % self.slots);
                let mut n = 0;
                for (i, ms) in per.iter().enumerate().filter(|(_, ms)| !ms.is_empty()) {
                    let c = p.cmd("RMQ.PUSH").arg(self.slot_queue(i)).arg("PRIORITY").arg(prio);
                    for m in ms {
                        c.arg(*m);
                    }
                    n += 1;
                }
                n
            }
            Kind::Lua => {
                let c = p.cmd("EVALSHA").arg(&self.shas[0]).arg(2).arg(&self.q).arg(&self.meta).arg("PRIORITY").arg(prio);
                for m in msgs {
                    c.arg(m.as_str());
                }
                1
            }
            Kind::Streams => {
                for m in msgs {
                    p.cmd("XADD").arg(&self.q).arg("*").arg("m").arg(m.as_str());
                }
                msgs.len()
            }
            Kind::Zset => {
                let c = p.cmd("ZADD").arg(&self.q);
                for m in msgs {
                    c.arg(prio).arg(m.as_str());
                }
                1
            }
            Kind::Ping => {
                p.cmd("PING");
                1
            }
        }
    }

    /// Adds one pop command for up to `n` messages (`n == 1`: the unbatched form, no COUNT
    /// where the command has a default). `block_ms`: block that long when nothing is there
    /// (RMQ and Streams only).
    pub fn add_pop(&self, p: &mut Pipeline, n: usize, block_ms: Option<u64>) {
        match self.kind {
            Kind::Rmq => self.pop_options(p.cmd("RMQ.POP").arg(&self.q), n, block_ms),
            Kind::Lua => {
                p.cmd("EVALSHA").arg(&self.shas[1]).arg(3).arg(&self.q).arg(&self.prepare).arg(&self.meta).arg(n).arg(self.lease_ms);
            }
            Kind::Streams => {
                let c = p.cmd("XREADGROUP").arg("GROUP").arg(GROUP).arg(&self.consumer).arg("COUNT").arg(n);
                if let Some(b) = block_ms {
                    c.arg("BLOCK").arg(b);
                }
                c.arg("STREAMS").arg(&self.q).arg(">");
            }
            Kind::Zset => {
                let c = p.cmd("ZPOPMAX").arg(&self.q);
                if n != 1 {
                    c.arg(n);
                }
            }
            Kind::Ping => {
                p.cmd("PING");
            }
            Kind::Tpop => {
                let c = p.cmd("RMQ.TPOP").arg(&self.q).arg(self.slots);
                if self.quantum != 1 {
                    c.arg("QUANTUM").arg(self.quantum);
                }
                self.pop_options(c, n, block_ms)
            }
        }
    }

    /// RMQ.POP's and RMQ.TPOP's options: COUNT (unless 1), LEASE (unless the default), BLOCK.
    fn pop_options(&self, c: &mut Pipeline, n: usize, block_ms: Option<u64>) {
        if n != 1 {
            c.arg("COUNT").arg(n);
        }
        if self.lease_ms != 30_000 {
            c.arg("LEASE").arg(self.lease_ms);
        }
        if let Some(b) = block_ms {
            c.arg("BLOCK").arg(b);
        }
    }

    /// Parses one pop reply into `out`.
    pub fn parse_pop(&self, v: &Value, out: &mut Vec<Item>) {
        match self.kind {
            Kind::Rmq | Kind::Lua => {
                if let Value::Array(entries) = v {
                    for e in entries {
                        if let Value::Array(pair) = e {
                            if let Some(Value::BulkString(m)) = pair.first() {
                                out.push(Item { msg: m.clone(), id: Vec::new() });
                            }
                        }
                    }
                }
            }
            Kind::Streams => {
                // [[stream, [[id, [field, value]], …]]]
                let Value::Array(streams) = v else { return };
                for s in streams {
                    let Value::Array(sv) = s else { continue };
                    let Some(Value::Array(entries)) = sv.get(1) else { continue };
                    for e in entries {
                        let Value::Array(ev) = e else { continue };
                        let (Some(Value::BulkString(id)), Some(Value::Array(fv))) = (ev.first(), ev.get(1)) else { continue };
                        if let Some(Value::BulkString(m)) = fv.get(1) {
                            out.push(Item { msg: m.clone(), id: id.clone() });
                        }
                    }
                }
            }
            Kind::Zset => {
                // RESP2: [member, score, member, score, …]
                if let Value::Array(flat) = v {
                    for pair in flat.chunks(2) {
                        if let Value::BulkString(m) = &pair[0] {
                            out.push(Item { msg: m.clone(), id: Vec::new() });
                        }
                    }
                }
            }
            Kind::Ping => {}
            Kind::Tpop => {
                // [[queue, message, deliveries], …]
                if let Value::Array(entries) = v {
                    for e in entries {
                        if let Value::Array(t) = e {
                            if let (Some(Value::BulkString(q)), Some(Value::BulkString(m))) = (t.first(), t.get(1)) {
                                out.push(Item { msg: m.clone(), id: q.clone() });
                            }
                        }
                    }
                }
            }
        }
    }

    /// What must follow a pop before the message counts as in flight (only the bare
    /// sorted sets need it: ZADD prepare deadline m…). Returns how many commands.
    pub fn add_post_pop(&self, p: &mut Pipeline, items: &[Item]) -> usize {
        if self.kind != Kind::Zset || items.is_empty() {
            return 0;
        }
        let deadline = now_ms() + self.lease_ms as i64;
        let c = p.cmd("ZADD").arg(&self.prepare);
        for it in items {
            c.arg(deadline).arg(&it.msg[..]);
        }
        1
    }

    /// Adds the commands that ack `items` (one command for all, Streams: XACK + XDEL).
    /// Returns how many commands were added.
    pub fn add_ack(&self, p: &mut Pipeline, items: &[Item]) -> usize {
        if items.is_empty() {
            return 0;
        }
        match self.kind {
            Kind::Rmq => {
                let c = p.cmd("RMQ.ACK").arg(&self.q);
                for it in items {
                    c.arg(&it.msg[..]);
                }
                1
            }
            Kind::Lua => {
                let c = p.cmd("EVALSHA").arg(&self.shas[2]).arg(4).arg(&self.q).arg(&self.prepare).arg(&self.meta).arg(&self.dead);
                for it in items {
                    c.arg(&it.msg[..]);
                }
                1
            }
            Kind::Streams => {
                let c = p.cmd("XACK").arg(&self.q).arg(GROUP);
                for it in items {
                    c.arg(&it.id[..]);
                }
                let c = p.cmd("XDEL").arg(&self.q);
                for it in items {
                    c.arg(&it.id[..]);
                }
                2
            }
            Kind::Zset => {
                let c = p.cmd("ZREM").arg(&self.prepare);
                for it in items {
                    c.arg(&it.msg[..]);
                }
                1
            }
            Kind::Ping => 0,
            Kind::Tpop => {
                // One RMQ.ACK per queue, in the order the queues first appear.
                let mut order: Vec<&[u8]> = Vec::new();
                for it in items {
                    if !order.contains(&&it.id[..]) {
                        order.push(&it.id[..]);
                    }
                }
                for q in &order {
                    let c = p.cmd("RMQ.ACK").arg(*q);
                    for it in items.iter().filter(|it| &it.id[..] == *q) {
                        c.arg(&it.msg[..]);
                    }
                }
                order.len()
            }
        }
    }
}
