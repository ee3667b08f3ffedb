//! RMQ.TRACE Q message [COUNT n]: the journal's events of one message, newest first
//! (`storage::journal_stream::trace`). Read-only, so it also answers on a replica.

use crate::cmd::args::{arity, int, queue};
use crate::cmd::Call;
use crate::core::error::{Bound, Result, RmqError, Unit};
use crate::ffi::reply;
use crate::storage::journal_stream;

const COUNT: Bound = Bound::new("COUNT", 1, 1_000_000, Unit::Count);
/// Entries answered when no COUNT is given.
pub const DEFAULT_COUNT: usize = 100;

/// The arguments after the command name: the message and how many entries at most.
pub fn parse<'a>(args: &[&'a [u8]]) -> Result<(&'a [u8], usize)> {
    const CMD: &str = "rmq.trace";
    queue(args, CMD)?;
    arity(args, 2, CMD)?;
    // `COUNT n` pairs after the message (repeated: the last counts).
    let mut count = DEFAULT_COUNT;
    for pair in args[2..].chunks(2) {
        if !pair[0].eq_ignore_ascii_case(b"COUNT") {
            return Err(RmqError::Syntax(format!("unexpected argument '{}'", String::from_utf8_lossy(pair[0]))));
        }
        let Some(v) = pair.get(1) else { return Err(RmqError::Syntax("COUNT needs a value".into())) };
        count = int(&COUNT, v)? as usize;
    }
    Ok((args[1], count))
}

pub fn trace(c: &Call) -> Result<()> {
    let (message, count) = parse(c.args)?;
    let entries = journal_stream::trace(c.ctx, c.args[0], message, count)?;
    reply::array(c.ctx, entries.len());
    for ((ms, seq), fields) in &entries {
        reply::array(c.ctx, 2);
        reply::bytes(c.ctx, format!("{ms}-{seq}").as_bytes());
        reply::array(c.ctx, fields.len() * 2);
        for (f, v) in fields {
            reply::bytes(c.ctx, f);
            reply::bytes(c.ctx, v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a<'a>(v: &[&'a str]) -> Vec<&'a [u8]> {
        v.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn arguments() {
        assert_eq!(parse(&a(&["q", "m"])), Ok((&b"m"[..], DEFAULT_COUNT)));
        assert_eq!(parse(&a(&["q", "m", "count", "7"])), Ok((&b"m"[..], 7)));
        assert_eq!(parse(&a(&["q", "m", "COUNT", "7", "COUNT", "2"])), Ok((&b"m"[..], 2)));
        for (args, want) in [
            (vec!["q"], "ERR wrong number of arguments for 'rmq.trace' command"),
            (vec!["q", "m", "COUNT"], "ERR syntax error: COUNT needs a value"),
            (vec!["q", "m", "COUNT", "1", "x"], "ERR syntax error: unexpected argument 'x'"),
            (vec!["q", "m", "COUNT", "1", "x", "2"], "ERR syntax error: unexpected argument 'x'"),
            (vec!["q", "m", "LIMIT", "1"], "ERR syntax error: unexpected argument 'LIMIT'"),
            (vec!["q", "m", "COUNT", "0"], "ERR invalid COUNT: must be an integer from 1 to 1000000"),
            (vec!["q", "m", "COUNT", "x"], "ERR invalid COUNT: must be an integer from 1 to 1000000"),
            (vec!["a{b", "m"], "ERR invalid queue name"),
        ] {
            let e = parse(&a(&args)).unwrap_err().message();
            assert!(e.starts_with(want), "{args:?}: {e}");
        }
    }
}
