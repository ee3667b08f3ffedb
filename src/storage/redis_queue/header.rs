//! The two things a queue handle remembers beyond the command: its header (`headers`)
//! and its grouped deliveries in flight (`busy`), read from `meta{Q}` when not known.

use std::cell::{OnceCell, RefCell};
use std::sync::OnceLock;

use crate::core::codec;
use crate::core::kind::Kind;
use crate::core::names::KeyId;
use crate::core::policy::Policy;
use crate::core::queue_store::{Set, Store};
use crate::ffi::key::KeyType;
use crate::ffi::rstr::Shared;
use crate::ffi::RStr;
use crate::storage::busy::{self, Flights};
use crate::storage::headers;
use crate::storage::keys::Header;

use super::RedisQueue;

fn shared(b: &'static [u8]) -> impl Fn() -> Shared {
    move || Shared(RStr::from_bytes(b))
}

pub(super) fn kind_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(shared(codec::KIND_FIELD)).0
}

pub(super) fn policy_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(shared(codec::POLICY_FIELD)).0
}

pub(super) fn ids_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(shared(codec::IDS_FIELD)).0
}

impl RedisQueue {
    pub(super) fn stored_policy(&self) -> &Option<Policy> {
        &self.header().policy
    }

    /// The kind and the policy, the first time (unless known from an earlier command when
    /// the queue was opened: `headers`): read in one lookup (most commands need both).
    pub(super) fn header(&self) -> &Header {
        self.header.get_or_init(|| {
            let Some(meta) = self.key(KeyId::Meta).filter(|k| k.key_type() == KeyType::Hash) else {
                return Header { pins: self.pins_if_no_index(), ..Header::default() };
            };
            let (kind, policy) = meta.hget_pair(kind_field(), Some(policy_field()));
            let (policy, kind_in_policy) = policy.map_or((None, None), |v| {
                let (p, k) = decode_policy(v.as_ref());
                (Some(p), k)
            });
            let waiting_records = message_meta(meta.len(), || (kind.is_some(), policy.is_some()));
            // Only a hash with more than its header can have names (read once: `headers`).
            let named = waiting_records && meta.hget(ids_field()).is_some();
            let h = Header {
                kind: kind.as_ref().map_or(kind_in_policy, |v| Kind::from_name(v.as_ref())),
                kind_field: kind.is_some(),
                policy,
                waiting_records,
                named,
                pins: self.pins_if_no_index(),
            };
            headers::set(self.names[0].as_ref(), self.ctx.db(), &h);
            h
        })
    }

    /// Writes the kind and the policy (whichever changed), the kind inside the policy's
    /// value when there is one.
    pub(super) fn set_header(&mut self, kind: Option<Kind>, policy: Option<Policy>) {
        let old = self.header().clone();
        let in_field = policy.is_none() && kind.is_some();
        // Fields are added before others are deleted: the hash never empties on the way.
        if in_field && (!old.kind_field || old.kind != kind) {
            self.hset(kind_field().clone(), kind.map(|k| RStr::from_bytes(k.name().as_bytes())));
        }
        let (old_value, new_value) =
            (old.policy.as_ref().map(|p| codec::policy_value(p, old.kind)), policy.as_ref().map(|p| codec::policy_value(p, kind)));
        if new_value != old_value {
            self.hset(policy_field().clone(), new_value.map(|v| RStr::from_bytes(&v)));
        }
        if !in_field && old.kind_field {
            self.hset(kind_field().clone(), None);
        }
        let h = Header { kind, kind_field: in_field, policy, ..old };
        headers::set(self.names[0].as_ref(), self.ctx.db(), &h);
        self.header = OnceCell::from(h);
    }

    /// The pinned heads known at a header's read: none while `parkidx{Q}` has no member,
    /// else not known (counting them would read the whole index).
    pub(super) fn pins_if_no_index(&self) -> Option<u64> {
        self.key(KeyId::ParkIndex).is_none_or(|k| k.len() == 0).then_some(0)
    }

    /// A pinned member was added to `parkidx{Q}` (`added`) or removed from it: the known
    /// count follows. A removal the count cannot account for means it drifted: not known
    /// any more (slower, never wrong), unless the index is empty.
    pub(super) fn count_pins(&mut self, added: bool) {
        let pins = self.header().pins.and_then(|n| if added { n.checked_add(1) } else { n.checked_sub(1) });
        self.set_pins(pins.or(self.pins_if_no_index()));
    }

    /// Records how many pinned heads `parkidx{Q}` is known to hold, here and in `headers`.
    pub(super) fn set_pins(&mut self, pins: Option<u64>) {
        self.header();
        if let Some(h) = self.header.get_mut().filter(|h| h.pins != pins) {
            h.pins = pins;
            headers::set(self.names[0].as_ref(), self.ctx.db(), h);
        }
    }

    /// Runs `f` on the queue's grouped deliveries in flight (`busy`), filled from its
    /// in-flight records if they are not known.
    pub(super) fn flights<R>(&self, f: impl FnOnce(&mut Flights) -> R) -> R {
        let fill = || {
            let mut known = Flights::default();
            if self.has_message_meta() {
                self.scan(Set::Prepare, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, _| {
                    if let Some(g) = self.record(codec::GROUP_FLIGHT, m.as_ref()).and_then(|v| codec::decode_flight(v.as_ref()).group) {
                        known.start(Shared(m), g);
                    }
                    true
                });
            }
            known
        };
        busy::with(self.names[0].as_ref(), self.ctx.db(), fill, f)
    }

    /// Forgets a delivery in memory, if known (its record is deleted), which frees its
    /// group: the group it had, `Some(None)` for a delivery without one, `None` if not known.
    pub(super) fn forget_flight(&self, m: &RStr) -> Option<Option<Vec<u8>>> {
        busy::if_known(self.names[0].as_ref(), self.ctx.db(), |s| s.end(m.as_ref()))
    }
}

/// Whether a `meta{Q}` of `n` fields holds anything besides the kind and the policy
/// (`header`: whether it has a kind field and a policy, asked only when it matters).
pub(super) fn message_meta(n: usize, header: impl FnOnce() -> (bool, bool)) -> bool {
    // The kind and the policy are at most two fields (both only in a hash written before
    // the policy carried the kind); a queue written by ZADD has neither, so its one field
    // may be a delivery record.
    n > 2
        || (n > 0 && {
            let (kind, policy) = header();
            n > usize::from(kind) + usize::from(policy)
        })
}

/// Decodes a stored policy and the kind it carries, remembering the last one: a queue's
/// policy is read by every command, the queues of a topic usually share one, and decoding
/// cost more than reading.
fn decode_policy(b: &[u8]) -> (Policy, Option<Kind>) {
    thread_local!(static LAST: RefCell<(Vec<u8>, Policy, Option<Kind>)> = RefCell::default());
    LAST.with_borrow_mut(|(bytes, p, k)| {
        if bytes.as_slice() != b {
            (*p, *k) = (Policy::decode(b), codec::kind_in_policy(b));
            *bytes = b.to_vec();
        }
        (p.clone(), *k)
    })
}
