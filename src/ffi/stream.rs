//! The raw Stream calls on an open key (the journal's `journal{Q}`: `storage::journal_stream`)
//! and the client's name (`CLIENT SETNAME`), which the journal's `by` field gives.

use redis_module::raw;

use super::key::{Key, KeyType};
use super::{Ctx, RStr, OK};

/// A Stream entry's id: milliseconds and sequence.
pub type StreamId = (u64, u64);

/// An entry's fields and values, as a visitor of `stream_rev_scan` sees them.
pub type Pairs<'a> = [(&'a [u8], &'a [u8])];

// SAFETY (every method below): the handle is null or open (`Key::open`), and checked to
// be a Stream (or, for an add, empty or a Stream) before any call that needs one.
impl Key {
    /// RM_StreamAdd with an id the server picks from its clock (above the last one):
    /// `fields` alternates field and value. The id, or None if the key holds another type
    /// or the entry cannot be added.
    pub fn stream_add(&self, fields: &[&RStr]) -> Option<StreamId> {
        if self.is_null() || !matches!(self.key_type(), KeyType::Empty | KeyType::Stream) || !fields.len().is_multiple_of(2) {
            return None;
        }
        // The journal's entries (at most 16 strings) need no allocation of their own.
        let (mut small, mut big) = ([std::ptr::null_mut(); 16], Vec::new());
        let argv: &mut [*mut raw::RedisModuleString] = if fields.len() <= small.len() {
            &mut small[..fields.len()]
        } else {
            big.resize(fields.len(), std::ptr::null_mut());
            &mut big
        };
        for (a, f) in argv.iter_mut().zip(fields) {
            *a = f.ptr();
        }
        let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
        let flags = raw::REDISMODULE_STREAM_ADD_AUTOID as i32;
        // SAFETY: an open key; argv holds live strings for the call; `id` is written.
        let ok = unsafe { rm!(RedisModule_StreamAdd)(self.ptr(), flags, &mut id, argv.as_mut_ptr(), (argv.len() / 2) as i64) } == OK;
        ok.then_some((id.ms, id.seq))
    }

    /// Trims the Stream to about `len` entries (whole nodes only: at least `len` stay, at
    /// most `len` + `stream-node-max-entries`); returns how many were removed.
    pub fn stream_trim_approx(&self, len: u64) -> u64 {
        if self.key_type() != KeyType::Stream {
            return 0;
        }
        let flags = raw::REDISMODULE_STREAM_TRIM_APPROX as i32;
        // SAFETY: an open Stream key.
        let removed = unsafe { rm!(RedisModule_StreamTrimByLength)(self.ptr(), flags, len.min(i64::MAX as u64) as i64) };
        removed.max(0) as u64
    }

    /// Calls `f` with each entry of the Stream, newest first, its id and its fields and
    /// values, until it returns false.
    pub fn stream_rev_scan(&self, f: &mut dyn FnMut(StreamId, &Pairs) -> bool) {
        if self.key_type() != KeyType::Stream {
            return;
        }
        let k = self.ptr();
        let flags = raw::REDISMODULE_STREAM_ITERATOR_REVERSE as i32;
        // SAFETY: an open Stream key; the iterator is stopped before returning; each field
        // and value is a new string whose reference is ours (without auto memory).
        unsafe {
            if rm!(RedisModule_StreamIteratorStart)(k, flags, std::ptr::null_mut(), std::ptr::null_mut()) != OK {
                return;
            }
            let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
            let mut n: i64 = 0;
            while rm!(RedisModule_StreamIteratorNextID)(k, &mut id, &mut n) == OK {
                let mut owned: Vec<(RStr, RStr)> = Vec::with_capacity(n.max(0) as usize);
                let (mut field, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
                while rm!(RedisModule_StreamIteratorNextField)(k, &mut field, &mut value) == OK {
                    if field.is_null() || value.is_null() {
                        break;
                    }
                    owned.push((RStr::adopt(field), RStr::adopt(value)));
                }
                let pairs: Vec<(&[u8], &[u8])> = owned.iter().map(|(a, b)| (a.as_ref(), b.as_ref())).collect();
                if !f((id.ms, id.seq), &pairs) {
                    break;
                }
            }
            rm!(RedisModule_StreamIteratorStop)(k);
        }
    }
}

/// The `CLIENT SETNAME` name of client `id`, if it has one (and the server can tell:
/// RM_GetClientNameById, Redis 7.0.3 and later).
pub fn client_name(ctx: Ctx, id: u64) -> Option<RStr> {
    // SAFETY: an optional API pointer; a valid context. The string returned is ours.
    let f = unsafe { raw::RedisModule_GetClientNameById }?;
    let p = unsafe { f(ctx.ptr(), id) };
    // SAFETY: a live string whose reference is ours.
    (!p.is_null()).then(|| unsafe { RStr::adopt(p) })
}
