//! RMQ.QUEUES [MATCH pattern] [COUNT n] [CURSOR c]: the queues this node holds, a page at a
//! time from the registry (`runtime::registry`), so a call costs O(COUNT) whatever the
//! number of queues or keys. Keyless, so it checks the caller's ACL itself: a queue whose
//! key `Q` the caller may not read is left out (as RMQ.INFO Q would be refused).

use crate::cmd::args;
use crate::cmd::handlers::Call;
use crate::core::error::Result;
use crate::ffi::acl::User;
use crate::ffi::{reply, RStr};
use crate::runtime::{cluster, registry};

pub fn queues(c: &Call) -> Result<()> {
    let a = args::queues(c.args)?;
    // No user (or no API): nothing to filter by.
    let user = User::current_name(c.ctx).and_then(|name| User::named(&name));
    let allowed = |q: &[u8]| user.as_ref().is_none_or(|u| u.may_read(&RStr::from_bytes(q)));
    let serves = |q: &[u8]| cluster::serves(c.ctx, q);
    let (names, next) = registry::page(c.ctx, a.pattern, a.count, a.after.as_deref(), &serves, &allowed);
    reply::array(c.ctx, 2);
    reply::bytes(c.ctx, &next.map_or_else(|| b"0".to_vec(), |n| args::queues_cursor(&n)));
    reply::array(c.ctx, names.len());
    for q in &names {
        reply::bytes(c.ctx, q);
    }
    Ok(())
}
