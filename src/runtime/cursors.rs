//! The key RMQ.QUEUES seals its cursors with (`core::cursor`): random, made on first use
//! and never written anywhere, so a cursor outlives neither a restart nor a move to another
//! server (a replica, say): there it is refused, and the listing starts again from `0`.

use std::sync::LazyLock;

use crate::core::cursor::CursorKey;
use crate::core::error::{Result, RmqError};

static KEY: LazyLock<Option<CursorKey>> = LazyLock::new(|| random().ok().map(CursorKey::new));

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut out = [0; N];
    getrandom::fill(&mut out).map_err(|e| RmqError::Internal(format!("no randomness for a cursor: {e}")))?;
    Ok(out)
}

fn key() -> Result<&'static CursorKey> {
    KEY.as_ref().ok_or_else(|| RmqError::Internal("no randomness for a cursor".into()))
}

/// What a cursor is bound to: the database and the user it was handed out to.
fn binding(db: i32, user: &[u8]) -> Vec<u8> {
    [&db.to_le_bytes()[..], user].concat()
}

/// The cursor for position `pos` of a listing of database `db` by `user`.
pub fn seal(db: i32, user: &[u8], pos: &[u8]) -> Result<Vec<u8>> {
    Ok(key()?.seal(random()?, &binding(db, user), pos))
}

/// The position in `cursor`, if this process handed it out for database `db` and `user`.
pub fn open(db: i32, user: &[u8], cursor: &[u8]) -> Result<Vec<u8>> {
    key()?.open(&binding(db, user), cursor).ok_or(RmqError::BadValue("CURSOR", "0 or a cursor RMQ.QUEUES returned"))
}
