//! Keyspace notifications. Module writes fire no native events, so RMQ publishes its own,
//! on the queue's key `Q`, in the module class: enabled with the `d` flag (or `A`) of
//! `notify-keyspace-events`, e.g. `notify-keyspace-events Kd` for
//! `__keyspace@<db>__:<Q>` or `Ed` for `__keyevent@<db>__:<event>`. One event per command
//! per kind of change.

use std::ffi::CStr;

use crate::ffi::{Ctx, RStr};

/// Every event RMQ publishes (see README, "Events").
pub const PUSHED: &CStr = c"rmq.pushed";
pub const MERGED: &CStr = c"rmq.merged";
pub const POPPED: &CStr = c"rmq.popped";
pub const ACKED: &CStr = c"rmq.acked";
pub const NACKED: &CStr = c"rmq.nacked";
pub const REQUEUED: &CStr = c"rmq.requeued";
pub const EXPIRED: &CStr = c"rmq.expired";
pub const DEAD: &CStr = c"rmq.dead";
pub const EXTENDED: &CStr = c"rmq.extended";
pub const CANCELLED: &CStr = c"rmq.cancelled";
pub const REPLAYED: &CStr = c"rmq.replayed";
pub const PURGED: &CStr = c"rmq.purged";
pub const DROPPED: &CStr = c"rmq.dropped";

/// Publishes `event` on queue `q` if `happened`.
pub fn notify(ctx: Ctx, q: &RStr, event: &CStr, happened: bool) {
    if happened {
        ctx.notify(event, q);
    }
}
