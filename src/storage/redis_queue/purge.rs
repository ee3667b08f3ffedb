//! `Store::purge_all` over the keys (RMQ.PURGE, RMQ.DROP): the sets it empties are
//! unlinked (a large one is freed in the background), and `meta{Q}`, when it holds
//! per-message records, is unlinked and made anew with what stays (the kind, the policy,
//! the last delivery name and, without DEAD, the dead messages' records): the command's
//! cost is what stays, never what goes.

use crate::core::codec;
use crate::core::names::{KeyId, PURGED};
use crate::core::queue_store::{Set, Store};
use crate::ffi::key::Key;
use crate::ffi::RStr;
use crate::storage::{busy, headers, keys};

use super::header::{ids_field, kind_field, policy_field};
use super::RedisQueue;

impl RedisQueue {
    pub(super) fn purge_keys(&mut self, dead: bool) {
        let kept = self.has_message_meta().then(|| self.kept_fields(dead));
        for &id in PURGED.iter().chain(dead.then_some(&KeyId::Dead)) {
            self.unlink(id);
        }
        if let Some(fields) = kept {
            self.unlink(KeyId::Meta);
            for (f, v) in fields {
                self.hset(f, Some(v));
            }
        }
        let (q, db) = (self.names[0].as_ref(), self.ctx.db());
        // Nothing is in flight any more, nor waiting with a record, nor pinned.
        busy::forget(q, db);
        self.header();
        if let Some(h) = self.header.get_mut() {
            h.waiting_records = false;
            h.pins = Some(0);
            headers::set(q, db, h);
        }
    }

    /// The fields of `meta{Q}` a purge keeps.
    fn kept_fields(&self, dead: bool) -> Vec<(RStr, RStr)> {
        let mut out = Vec::new();
        let Some(meta) = self.key(KeyId::Meta) else { return out };
        for f in [kind_field(), policy_field(), ids_field()] {
            if let Some(v) = meta.hget(f) {
                out.push((f.clone(), v));
            }
        }
        if !dead {
            self.scan(Set::Dead, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, _| {
                if let Some(v) = self.record(codec::DEAD, m.as_ref()) {
                    out.push((self.tagged_field(codec::DEAD, m.as_ref()), v));
                }
                true
            });
        }
        out
    }

    /// Unlinks key `id`, if it exists: sent on as UNLINK; made anew (a listpack again) by
    /// a later write.
    fn unlink(&mut self, id: KeyId) {
        if self.key(id).is_some_and(Key::unlink) {
            self.effects.record(c"UNLINK", id, || []);
            self.touched(id);
            self.big &= !(1 << id as u8);
            keys::created(self.names[0].as_ref(), id, self.ctx.db());
        }
    }
}
