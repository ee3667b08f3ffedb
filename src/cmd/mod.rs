//! The commands: one table (`table`) of name, entry, flags, key, arity and docs, walked by
//! registration and COMMAND DOCS; argument parsing (`args`, pure); the bodies
//! (`handlers`; RMQ.QUEUES in `queues`; FIFO pushes and RMQ.REDRIVE in `fifo`; RMQ.TRACE
//! in `trace`).

pub mod args;
#[cfg(test)]
mod args_walk_tests;
pub mod fifo;
pub mod handlers;
pub mod queues;
pub mod schedule;
pub mod schedule_args;
pub mod table;
pub mod trace;

use crate::ffi::rstr::Argv;
use crate::ffi::Ctx;

/// One invocation: the context and the arguments after the command name (the bodies'
/// `impl` is in `handlers`).
pub struct Call<'a, 'b> {
    pub ctx: Ctx,
    pub argv: Argv<'a>,
    pub args: &'b [&'a [u8]],
}
