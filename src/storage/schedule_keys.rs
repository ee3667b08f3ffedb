//! `sched{Q}`: a queue's schedules (RMQ.SCHEDULE), a hash of schedule name → stored
//! schedule (`core::cron_schedule::Stored`), tagged `{Q}` so it lives in the queue's slot.
//! It stays while the queue is empty and goes with its last schedule. Every change is
//! replicated at once as HSET/HDEL (inside a command or a timer step, Redis wraps them
//! with the step's other effects in one MULTI/EXEC) and signalled for WATCH.

use std::ffi::CStr;

use crate::core::cron_schedule::Stored;
use crate::core::error::{Result, RmqError};
use crate::core::names::schedule_key;
use crate::ffi::key::{Key, KeyType};
use crate::ffi::{Ctx, RStr};
use crate::storage::effects;

/// A queue's schedule key, open.
pub struct Schedules {
    ctx: Ctx,
    name: RStr,
    key: Key,
    changed: bool,
}

const HSET: &CStr = c"HSET";
const HDEL: &CStr = c"HDEL";

impl Schedules {
    /// Opens `sched{q}` (for writing if `write`); WRONGTYPE if it holds no hash.
    pub fn open(ctx: Ctx, q: &[u8], write: bool) -> Result<Schedules> {
        let name = RStr::from_bytes(&schedule_key(q));
        let key = Key::open(ctx, &name, write);
        if !matches!(key.key_type(), KeyType::Empty | KeyType::Hash) {
            return Err(RmqError::WrongType);
        }
        Ok(Schedules { ctx, name, key, changed: false })
    }

    /// How many schedules the queue has.
    pub fn count(&self) -> usize {
        self.key.len()
    }

    /// The raw stored value of schedule `name`.
    fn raw(&self, name: &[u8]) -> Option<RStr> {
        self.key.hget(&RStr::from_bytes(name))
    }

    /// Schedule `name`, if it exists and passes SET's checks (else it is never fired).
    pub fn get(&self, name: &[u8]) -> Option<Stored> {
        Stored::decode(self.raw(name)?.as_ref()).ok()
    }

    fn replicate(&mut self, cmd: &'static CStr, args: &[&RStr]) {
        self.changed = true;
        effects::send_now(self.ctx, cmd, &self.name, args);
    }

    /// Writes schedule `name`.
    pub fn put(&mut self, name: &[u8], s: &Stored) {
        let (field, value) = (RStr::from_bytes(name), RStr::from_bytes(&s.encode()));
        self.key.hset(&field, Some(&value));
        self.replicate(HSET, &[&field, &value]);
    }

    /// Deletes schedule `name`; false if there was none.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let field = RStr::from_bytes(name);
        if self.key.hset(&field, None) == 0 {
            return false;
        }
        self.replicate(HDEL, &[&field]);
        true
    }

    /// Every schedule, as (name, raw stored value), in the hash's order.
    pub fn all(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.count());
        self.key.hscan(&mut |k, v| out.push((k.to_vec(), v.to_vec())));
        out
    }
}

impl Drop for Schedules {
    fn drop(&mut self) {
        if self.changed {
            self.ctx.signal_modified(&self.name);
        }
    }
}

/// How many schedules queue `q` has (RMQ.INFO; none if `sched{Q}` is no hash).
pub fn count(ctx: Ctx, q: &[u8]) -> usize {
    Schedules::open(ctx, q, false).map_or(0, |s| s.count())
}
