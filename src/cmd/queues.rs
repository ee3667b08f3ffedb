//! RMQ.QUEUES [MATCH pattern] [COUNT n] [CURSOR c]: the queues this node holds, a page at a
//! time from the registry (`runtime::registry`), so a call costs O(COUNT) whatever the
//! number of queues or keys. Keyless, so it checks the caller's ACL itself: a queue whose
//! key `Q` the caller may not read is left out (as RMQ.INFO Q would be refused) and not even
//! visited (`registry::page`: the replies are a server's without it), and the cursor is
//! sealed for this caller and database (`runtime::cursors`).

use crate::cmd::args;
use crate::cmd::Call;
use crate::core::error::Result;
use crate::ffi::user_acl::User;
use crate::ffi::{reply, RStr};
use crate::runtime::{cluster_slots, cursors, registry};

pub fn queues(c: &Call) -> Result<()> {
    let a = args::queues(c.args)?;
    // No user (or no API): nothing to filter by.
    let name = User::current_name(c.ctx);
    let bind = name.as_ref().map_or(&b""[..], |n| n.as_ref());
    let after = a.cursor.map(|cur| cursors::open(c.ctx.db(), bind, cur)).transpose()?;
    let user = name.as_ref().and_then(User::named);
    let allowed = |q: &[u8]| user.as_ref().is_none_or(|u| u.may_read(&RStr::from_bytes(q)));
    let serves = |q: &[u8]| cluster_slots::serves(c.ctx, q);
    let (names, next) = registry::page(c.ctx, a.pattern, a.count, after.as_deref(), &serves, &allowed);
    let next = next.map_or_else(|| Ok(b"0".to_vec()), |n| cursors::seal(c.ctx.db(), bind, &n))?;
    reply::array(c.ctx, 2);
    reply::bytes(c.ctx, &next);
    reply::array(c.ctx, names.len());
    for q in &names {
        reply::bytes(c.ctx, q);
    }
    Ok(())
}
