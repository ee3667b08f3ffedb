//! `moving{Q}`: dead messages of `Q` claimed for a move to another queue (RMQ.REDRIVE), a
//! hash of message → `core::ledger_records::Claim`, tagged `{Q}`. It holds only moves under way
//! and goes with its last claim. Every change is replicated at once (HSET/HDEL) and
//! signalled for WATCH.

use crate::core::error::{Result, RmqError};
use crate::core::ledger_records::Claim;
use crate::core::ledger_rules::ClaimStore;
use crate::core::names::{other_key, Other};
use crate::ffi::key::{Key, KeyType};
use crate::ffi::{Ctx, RStr};
use crate::storage::effects::send_now;

pub struct Claims {
    ctx: Ctx,
    name: RStr,
    key: Key,
}

impl Claims {
    /// Opens `moving{q}`; WRONGTYPE if it holds no hash.
    pub fn open(ctx: Ctx, q: &[u8]) -> Result<Claims> {
        let name = RStr::from_bytes(&other_key(q, Other::Moving));
        let key = Key::open(ctx, &name, true);
        if !matches!(key.key_type(), KeyType::Empty | KeyType::Hash) {
            return Err(RmqError::WrongType);
        }
        Ok(Claims { ctx, name, key })
    }

    pub fn name(&self) -> &RStr {
        &self.name
    }

    pub fn is_empty(&self) -> bool {
        self.key.len() == 0
    }
}

impl ClaimStore for Claims {
    /// Every claim, in the hash's order (a value that cannot be read counts as claimed at
    /// time 0, so it is taken again as stale).
    fn claims(&self) -> Vec<(Vec<u8>, Claim)> {
        let mut out = Vec::new();
        self.key.hscan(&mut |m, v| {
            out.push((m.to_vec(), Claim::decode(v).unwrap_or(Claim { at: 0, priority: None, group: None })));
        });
        out
    }

    fn put_claim(&mut self, m: &[u8], c: &Claim) {
        let (m, value) = (RStr::from_bytes(m), RStr::from_bytes(&c.encode()));
        self.key.hset(&m, Some(&value));
        send_now(self.ctx, c"HSET", &self.name, &[&m, &value]);
        self.ctx.signal_modified(&self.name);
    }

    fn drop_claim(&mut self, m: &[u8]) -> bool {
        let m = RStr::from_bytes(m);
        if self.key.hset(&m, None) == 0 {
            return false;
        }
        send_now(self.ctx, c"HDEL", &self.name, &[&m]);
        self.ctx.signal_modified(&self.name);
        true
    }
}
