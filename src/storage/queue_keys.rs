//! Every key of a queue by name (`core::names::queue_keys`, the one list of them), for
//! RMQ.DROP: each that exists is unlinked (a large one freed in the background), sent on
//! as UNLINK and signalled for WATCH. Module deletions send no keyspace event: the caller
//! acts on the names returned.

use crate::core::names;
use crate::ffi::key::Key;
use crate::ffi::{Ctx, RStr};
use crate::storage::effects;

/// Unlinks every key of queue `q` in the selected database; returns the names it deleted.
pub fn unlink_all(ctx: Ctx, q: &[u8]) -> Vec<RStr> {
    let mut gone = Vec::new();
    for name in names::queue_keys(q) {
        let name = RStr::from_bytes(&name);
        if Key::open(ctx, &name, true).unlink() {
            effects::send_now(ctx, c"UNLINK", &name, &[]);
            ctx.signal_modified(&name);
            gone.push(name);
        }
    }
    gone
}
