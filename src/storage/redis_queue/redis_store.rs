//! The `Store` the queue's rules run on, over the queue's keys.

use std::cell::OnceCell;

use redis_module::raw;

use crate::core::codec;
use crate::core::journal::Note;
use crate::core::kind::Kind;
use crate::core::names::KeyId;
use crate::core::policy::{Field, Policy};
use crate::core::queue_store::{Dead, Flight, Indexed, Set, Store, Waiting};
use crate::ffi::call::call;
use crate::ffi::key::Key;
use crate::ffi::rstr::Shared;
use crate::ffi::RStr;
use crate::storage::keys::Header;
use crate::storage::{busy, headers, last_ids};

use super::encoding::skiplist_at;
use super::header::ids_field;
use super::scratch::Scratch;
use super::RedisQueue;

impl Store for RedisQueue {
    type M = RStr;

    fn len(&self, set: Set) -> u64 {
        self.key(KeyId::of(set)).map_or(0, |k| k.len() as u64)
    }

    fn score(&self, set: Set, m: &RStr) -> Option<f64> {
        self.key(KeyId::of(set))?.zscore(m)
    }

    fn add(&mut self, set: Set, m: &RStr, score: f64) {
        self.zadd(KeyId::of(set), m, score, 0);
    }

    /// One lookup instead of `score` then `add`: the member's hash lookup is the main
    /// cost of a push into a large queue.
    fn upsert(&mut self, set: Set, m: &RStr, score: f64, replace: bool) -> bool {
        let flags = self.zadd(KeyId::of(set), m, score, if replace { 0 } else { raw::REDISMODULE_ZADD_NX as i32 });
        flags & raw::REDISMODULE_ZADD_ADDED as i32 != 0
    }

    /// A set this command takes past the listpack bound is made a skiplist at its first add
    /// rather than at its bound (`skiplist_at`): each listpack insert scans the set (a TPOP visit
    /// to a queue whose `prepare{Q}` had emptied paid ~6,000 instructions an insert).
    fn will_add(&mut self, set: Set, n: usize) {
        let len = self.len(set) as usize;
        let at = skiplist_at(KeyId::of(set));
        if len < at && len + n >= at {
            self.grow |= 1 << KeyId::of(set) as u8;
        }
    }

    fn rem(&mut self, set: Set, m: &RStr) -> bool {
        self.zrem(KeyId::of(set), m)
    }

    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(RStr, f64) -> bool) {
        if let Some(k) = self.key(KeyId::of(set)) {
            k.zscan(min, max, rev, f);
        }
    }

    fn count(&self, set: Set, min: f64, max: f64) -> u64 {
        if self.len(set) == 0 {
            return 0;
        }
        let (lo, hi) = (RStr::from_score(min), RStr::from_score(max));
        let name = &self.names[KeyId::of(set) as usize];
        call(self.ctx, c"ZCOUNT", &[name, &lo, &hi]).and_then(|r| r.integer()).map_or(0, |n| n.max(0) as u64)
    }

    /// With `index_head`, the only writer of `parkidx{Q}`'s members (besides the removal of
    /// the whole key: `abandon`, `purge_keys`): the two keep the count of pinned heads
    /// (`Header::pins`).
    fn park_keyed(&mut self, m: &RStr, score: f64, key: f64, g: &[u8]) {
        self.zadd(KeyId::Park, m, score, 0);
        let member = self.index_member(key, m);
        let flags = self.zadd(KeyId::ParkIndex, &member, codec::group_score(g), 0);
        if key == codec::PINNED && flags & raw::REDISMODULE_ZADD_ADDED as i32 != 0 {
            self.count_pins(true);
        }
    }

    fn unpark_scored(&mut self, m: &RStr, score: f64) {
        self.zrem(KeyId::Park, m);
        self.index_head(m, score, None);
    }

    fn index_head(&mut self, m: &RStr, score: f64, g: Option<&[u8]>) -> bool {
        // A queue known to have no pinned head has no pinned member to remove.
        if g.is_none() && score == codec::PINNED && self.header().pins == Some(0) {
            return false;
        }
        let member = self.index_member(score, m);
        let changed = match g {
            Some(g) => self.zadd(KeyId::ParkIndex, &member, codec::group_score(g), 0) & raw::REDISMODULE_ZADD_ADDED as i32 != 0,
            None => self.zrem(KeyId::ParkIndex, &member),
        };
        if changed && score == codec::PINNED {
            self.count_pins(g.is_some());
        } else if changed && g.is_none() && self.header().pins.is_none() {
            // The last member's removal makes an unknown count known.
            self.set_pins(self.pins_if_no_index());
        }
        changed
    }

    fn best_indexed(&self, g: &[u8]) -> Option<Indexed<RStr>> {
        let index = self.key(KeyId::ParkIndex)?;
        let h = codec::group_score(g);
        let mut best = None;
        // Groups that share a hash share a score: skip the other groups' members.
        index.zscan(h, h, false, &mut |member, _| {
            let member = member.as_ref();
            let m = RStr::from_bytes(codec::index_message(member));
            if self.waiting_record(&m).is_some_and(|v| codec::waiting_group(v.as_ref()) == Some(g)) {
                let pinned = codec::index_pinned(member);
                // Parked, its head, or (only when pinned) held back by a retry delay.
                let sets: &[Set] = if pinned { &[Set::Park, Set::Store, Set::Hold] } else { &[Set::Park, Set::Store] };
                // Found, `m` itself is kept (a copy of the handle would be retained and freed).
                let found = sets.iter().find_map(|&set| Some((set, self.score(set, &m)?)));
                best = found.map(|(set, score)| Indexed { m, score, set, pinned });
            }
            best.is_none()
        });
        best
    }

    /// A queue known to have no pinned head answers from its header (`Header::pins`).
    /// Else pinned members sort first among their score's (`codec::order_key`): when the
    /// first member at the group's score is not pinned, nothing of the group is, and no
    /// record is read (as `best_indexed` would for the group's head).
    fn pinned_head(&self, g: &[u8]) -> Option<RStr> {
        if self.header().pins == Some(0) {
            return None;
        }
        let h = codec::group_score(g);
        let mut first_pinned = false;
        self.key(KeyId::ParkIndex)?.zscan(h, h, false, &mut |member, _| {
            first_pinned = codec::index_pinned(member.as_ref());
            false
        });
        first_pinned.then(|| self.best_indexed(g)).flatten().filter(|h| h.pinned).map(|h| h.m)
    }

    fn may_have_indexed(&self, g: &[u8]) -> bool {
        let h = codec::group_score(g);
        self.key(KeyId::ParkIndex).is_some_and(|index| index.any_in_score_range(h, h))
    }

    fn kind(&self) -> Option<Kind> {
        self.header().kind
    }

    fn set_kind(&mut self, kind: Kind) {
        let policy = self.stored_policy().clone();
        self.set_header(Some(kind), policy);
    }

    fn clear_meta(&mut self) {
        // Empty: nothing in flight (and no set kept for a queue that is gone).
        busy::forget(self.names[0].as_ref(), self.ctx.db());
        if self.has_policy() {
            let policy = self.stored_policy().clone();
            self.set_header(None, policy);
            // The names go on from the clock (`codec::next_delivery_id`), as for a new queue.
            self.forget_names();
            // Records left by keys deleted by hand around `meta{Q}` would still be read.
            if !self.has_message_meta() {
                self.set_waiting_records(false);
            }
        } else {
            if self.key(KeyId::Meta).is_some_and(Key::delete) {
                self.effects.record(c"DEL", KeyId::Meta, || []);
                self.touched(KeyId::Meta);
            }
            headers::forget(self.names[0].as_ref(), self.ctx.db());
            self.header = OnceCell::from(Header { pins: self.pins_if_no_index(), ..Header::default() });
        }
    }

    fn purge_all(&mut self, dead: bool) {
        self.purge_keys(dead);
    }

    fn waiting(&self, m: &RStr) -> Waiting {
        self.waiting_record(m).map_or_else(Waiting::default, |v| codec::decode_waiting(v.as_ref()))
    }

    fn set_waiting(&mut self, m: &RStr, w: Option<&Waiting>) {
        let value = w.filter(|w| **w != Waiting::default()).map(|w| self.encoded(codec::encode_waiting, w));
        let adds = value.is_some();
        // Without records, a deletion has nothing to delete.
        if adds || self.header().waiting_records {
            self.set_record(codec::WAITING, m.as_ref(), value);
        }
        if adds {
            self.set_waiting_records(true);
        }
    }

    fn flight(&self, m: &RStr) -> Flight {
        let record = || self.record(codec::FLIGHT, m.as_ref()).or_else(|| self.record(codec::GROUP_FLIGHT, m.as_ref()));
        record().map_or_else(Flight::default, |v| codec::decode_flight(v.as_ref()))
    }

    fn set_flight(&mut self, m: &RStr, f: Option<&Flight>) {
        match f {
            Some(f) => {
                let tag = if f.group.is_some() { codec::GROUP_FLIGHT } else { codec::FLIGHT };
                let value = self.flight_value(f);
                self.set_record(tag, m.as_ref(), Some(value));
                if let Some(id) = f.id {
                    let field = self.named_field(id);
                    self.hset(field, Some(m.clone()));
                }
            }
            None => {
                self.set_record(codec::FLIGHT, m.as_ref(), None);
                self.set_record(codec::GROUP_FLIGHT, m.as_ref(), None);
            }
        }
    }

    /// Ends the delivery's name with it, if it had one.
    fn take_flight(&mut self, m: &RStr) -> Flight {
        self.forget_flight(m);
        let record = self.take_record(codec::FLIGHT, m).or_else(|| self.take_record(codec::GROUP_FLIGHT, m));
        let f = record.map_or_else(Flight::default, |v| codec::decode_flight(v.as_ref()));
        if let Some(id) = f.id {
            let field = self.named_field(id);
            self.hset(field, None);
        }
        f
    }

    /// Every ACK pays this: a delivery ends in one deletion, with no read, when it has no
    /// group or its group is known in memory (then freed in the same look-up), and the
    /// queue never named a delivery.
    fn end_flight(&mut self, m: &RStr) -> Option<Vec<u8>> {
        if !self.has_message_meta() {
            return None;
        }
        if self.header().named {
            return self.take_flight(m).group;
        }
        // No waiting record since the queue last had no records: nothing was pushed with a
        // group, so no delivery has one (nor is any known in memory): no look-up there.
        if !self.header().waiting_records {
            self.hset(self.tagged_field(codec::FLIGHT, m.as_ref()), None);
            return None;
        }
        if let Some(group) = self.forget_flight(m) {
            // Known: a delivery without a group in memory has no group record.
            let tag = if group.is_some() { codec::GROUP_FLIGHT } else { codec::FLIGHT };
            self.hset(self.tagged_field(tag, m.as_ref()), None);
            return group;
        }
        if self.hset(self.tagged_field(codec::FLIGHT, m.as_ref()), None) {
            return None;
        }
        // Not known in memory: filled from the records, this one gone, when next needed.
        self.take_record(codec::GROUP_FLIGHT, m).and_then(|v| codec::decode_flight(v.as_ref()).group)
    }

    fn name_deliveries(&mut self, now: i64, n: u64) -> u64 {
        let (q, db) = (self.names[0].as_ref(), self.ctx.db());
        let kept = self.hget(ids_field()).and_then(|v| codec::parse_id(v.as_ref()));
        let first = codec::next_delivery_id(kept.max(last_ids::last(q, db)), now);
        let last = first.saturating_add(n.saturating_sub(1));
        last_ids::note(q, db, last, now);
        self.hset(ids_field().clone(), Some(RStr::from_bytes(last.to_string().as_bytes())));
        self.set_named(true);
        first
    }

    fn named(&self, id: u64) -> Option<RStr> {
        if !self.header().named {
            return None;
        }
        self.hget(&self.named_field(id))
    }

    fn dead(&self, m: &RStr) -> Dead {
        self.record(codec::DEAD, m.as_ref()).map_or_else(Dead::default, |v| codec::decode_dead(v.as_ref()))
    }

    fn set_dead(&mut self, m: &RStr, d: Option<&Dead>) {
        let value = d.map(|d| self.encoded(codec::encode_dead, d));
        self.set_record(codec::DEAD, m.as_ref(), value);
    }

    fn busy(&self, g: &[u8]) -> bool {
        self.flights(|s| s.busy(g))
    }

    /// A delivery's group is kept with it until the delivery ends, which frees the group
    /// (`take_flight`, `end_flight`).
    fn set_busy(&mut self, g: Vec<u8>, m: &RStr) {
        self.flights(|s| s.start(Shared(m.clone()), g));
    }

    /// Nothing left to do: the delivery's end freed its group.
    fn set_free(&mut self, _: &[u8]) {}

    fn policy(&self) -> Policy {
        self.stored_policy().clone().unwrap_or_default()
    }

    /// From the header every command reads: no look-up of its own.
    fn journal_len(&self) -> u64 {
        self.stored_policy().as_ref().and_then(|p| p.get(Field::Journal)).unwrap_or(0) as u64
    }

    fn note(&mut self, n: Note<RStr>) {
        self.scratch.get_mut().get_or_insert_with(Scratch::lend).notes.push(n);
    }

    fn set_policy(&mut self, p: Option<&Policy>) -> bool {
        let had = self.has_policy();
        // The values it has write nothing (nor signal to WATCH).
        if p != self.stored_policy().as_ref() {
            let kind = self.kind();
            self.set_header(kind, p.cloned());
        }
        had
    }
}
