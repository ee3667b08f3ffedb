//! The keys of RMQ.PUSH's SEQUENCE and DEDUP options, tagged `{Q}`: `seq{Q}` (a string,
//! the last sequence number given, as INCR would keep it), `dedup{Q}` (a hash:
//! deduplication id → `core::ledger_records::Seen`) and `dedupexp{Q}` (a sorted set: id → the end
//! of its window). A push prunes a few ended records, oldest first (`core::ledger_rules`),
//! and both dedup keys expire at the last window's end: they hold at most the ids of one
//! window plus what pruning has not reached yet, and go when pushes with DEDUP stop. Every change is
//! replicated as its effect (SET, HSET, ZADD, HDEL, ZREM, PEXPIREAT with absolute times).

use crate::core::error::{Result, RmqError};
use crate::core::ledger_records::{read_seq, Seen};
use crate::core::ledger_rules::PushLedger;
use crate::core::names::{other_key, Other};
use crate::ffi::key::{Key, KeyType};
use crate::ffi::{Ctx, RStr};
use crate::storage::effects::send_now;
use crate::storage::redis_queue::{RedisQueue, HASHTABLE_AT};

struct Opened {
    name: RStr,
    key: Key,
}

impl Opened {
    fn open(ctx: Ctx, q: &[u8], which: Other, want: KeyType) -> Result<Opened> {
        let name = RStr::from_bytes(&other_key(q, which));
        let key = Key::open(ctx, &name, true);
        if ![KeyType::Empty, want].contains(&key.key_type()) {
            return Err(RmqError::WrongType);
        }
        Ok(Opened { name, key })
    }
}

/// Deletes queue `q`'s push sequence and deduplication records (its `Q` was deleted by
/// hand and nothing else of it is left); the names of the keys it deleted.
pub fn delete(ctx: Ctx, q: &[u8]) -> Vec<RStr> {
    [Other::Sequence, Other::Dedup, Other::DedupEnds]
        .into_iter()
        .filter_map(|which| {
            let name = RStr::from_bytes(&other_key(q, which));
            let gone = Key::open(ctx, &name, true).delete();
            gone.then(|| {
                send_now(ctx, c"DEL", &name, &[]);
                ctx.signal_modified(&name);
                name
            })
        })
        .collect()
}

/// A queue's push sequence and deduplication keys, open for one push (each only when its
/// option was given): `core::ledger_rules::PushLedger` over them.
pub struct Ledger {
    ctx: Ctx,
    seq: Option<Opened>,
    /// `dedup{Q}` and `dedupexp{Q}`.
    dedup: Option<(Opened, Opened)>,
}

impl Ledger {
    /// Opens the keys a push with SEQUENCE (`seq`) and DEDUP (`dedup`) uses; WRONGTYPE if
    /// one holds another type.
    pub fn open(ctx: Ctx, q: &[u8], seq: bool, dedup: bool) -> Result<Ledger> {
        let seq = seq.then(|| Opened::open(ctx, q, Other::Sequence, KeyType::String)).transpose()?;
        let dedup = match dedup {
            true => Some((Opened::open(ctx, q, Other::Dedup, KeyType::Hash)?, Opened::open(ctx, q, Other::DedupEnds, KeyType::ZSet)?)),
            false => None,
        };
        Ok(Ledger { ctx, seq, dedup })
    }
}

impl PushLedger for Ledger {
    fn last_seq(&self) -> Result<u64> {
        match self.seq.as_ref().and_then(|s| s.key.string()) {
            None => Ok(0),
            Some(v) => read_seq(&v).ok_or(RmqError::NotASequence),
        }
    }

    fn set_last_seq(&mut self, last: u64) {
        let Some(s) = &self.seq else { return };
        let v = RStr::from_i64(last as i64);
        if s.key.set_string(&v) {
            send_now(self.ctx, c"SET", &s.name, &[&v]);
            self.ctx.signal_modified(&s.name);
        }
    }

    fn record(&self, id: &[u8]) -> Option<Seen> {
        let (records, _) = self.dedup.as_ref()?;
        Seen::decode(records.key.hget(&RStr::from_bytes(id))?.as_ref())
    }

    fn ended(&self, now: i64, n: usize) -> Vec<Vec<u8>> {
        let mut ended = Vec::new();
        if let (Some((_, ends)), true) = (&self.dedup, n > 0) {
            ends.key.zscan(f64::NEG_INFINITY, now as f64, false, &mut |id, _| {
                ended.push(id.as_ref().to_vec());
                ended.len() < n
            });
        }
        ended
    }

    fn forget(&mut self, id: &[u8]) {
        let Some((records, ends)) = &self.dedup else { return };
        let id = RStr::from_bytes(id);
        if ends.key.zrem(&id) {
            send_now(self.ctx, c"ZREM", &ends.name, &[&id]);
        }
        if records.key.hset(&id, None) > 0 {
            send_now(self.ctx, c"HDEL", &records.name, &[&id]);
        }
    }

    fn put(&mut self, id: &[u8], seen: &Seen) {
        let Some((records, ends)) = &self.dedup else { return };
        let (id, value, end) = (RStr::from_bytes(id), RStr::from_bytes(&seen.encode()), RStr::from_i64(seen.expires));
        records.key.hset(&id, Some(&value));
        send_now(self.ctx, c"HSET", &records.name, &[&id, &value]);
        ends.key.zadd(seen.expires as f64, &id, 0);
        send_now(self.ctx, c"ZADD", &ends.name, &[&end, &id]);
        // Every push looks an id up and adds one: made a hashtable and a skiplist as they
        // grow past HASHTABLE_AT (one at a time, so each passes it), as a queue's own keys
        // are, not left linear scans up to Redis's listpack bounds.
        if records.key.len() == HASHTABLE_AT {
            RedisQueue::convert_meta(&records.key);
            RedisQueue::convert_zset(&ends.key);
        }
        for k in [records, ends] {
            if k.key.expires_at().is_none_or(|at| at < seen.expires) && k.key.expire_at(seen.expires) {
                send_now(self.ctx, c"PEXPIREAT", &k.name, &[&end]);
            }
            self.ctx.signal_modified(&k.name);
        }
    }
}
