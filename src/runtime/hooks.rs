//! Server events the module follows, and what each sets going: after a load, a promotion
//! or a SWAPDB the leases are found again; keys arriving by RESTORE bring leases; SYNC and
//! PSYNC (seen by a command filter) and role changes switch effects on.

use crate::ffi::hooks::{self, ServerEvent, LOADING_ENDED, NOW_PRIMARY};
use crate::ffi::{Ctx, RStr};
use crate::runtime::{alarm, timers};
use crate::storage::effects;

fn on_loading(ctx: Ctx, sub: u64) {
    if sub == LOADING_ENDED {
        effects::reconsider();
        timers::rescan(ctx);
    }
}

/// SWAPDB moves queues between databases: find their leases again. Consumers blocked on
/// the swapped keys are signalled by Redis itself and note their due times anew.
fn on_swapdb(ctx: Ctx, _sub: u64) {
    alarm::clear_dues();
    timers::rescan(ctx);
}

fn on_role_changed(ctx: Ctx, sub: u64) {
    effects::replicas_from_now();
    if sub == NOW_PRIMARY {
        timers::rescan(ctx);
    }
}

/// A `prepare{Q}` key arriving by RESTORE (a cluster slot migrated here, or a restore by
/// hand) brings leases this node's timer does not know yet.
fn on_key_event(ctx: Ctx, event: &[u8], key: &RStr) {
    if event == b"restore" && ctx.is_primary() {
        timers::note_arrived(ctx, key.as_ref());
    }
}

/// Sees SYNC and PSYNC before they run, so propagation is on before a replica's initial
/// snapshot is taken and its backlog begins.
fn on_command(name: &[u8]) {
    if name.eq_ignore_ascii_case(b"sync") || name.eq_ignore_ascii_case(b"psync") {
        effects::replicas_from_now();
    }
}

/// Subscribes to everything above; false if Redis refused a subscription.
pub fn subscribe(ctx: Ctx) -> bool {
    let servers = [
        (ServerEvent::Loading, on_loading as hooks::EventFn),
        (ServerEvent::RoleChanged, on_role_changed),
        (ServerEvent::SwapDb, on_swapdb),
    ]
    .into_iter()
    .all(|(e, f)| hooks::subscribe(ctx, e, f));
    let keys = hooks::subscribe_key_events(ctx, on_key_event);
    if !hooks::register_filter(ctx, on_command) {
        // Without seeing replicas attach, always send effects.
        effects::replicas_from_now();
    }
    servers && keys
}
