//! RMQ: a message queue inside Redis. See README.md; the command contract is the
//! project's the contract (its text is summarised in docs/COMMANDS.md).
//!
//! Layers, each depending only on those before it:
//! - `core`: the queue's rules over a `Store` trait, pure (no Redis, no `unsafe`);
//! - `ffi`: the Redis module API wrapped, the only `unsafe`;
//! - `storage`: a queue's keys, the `Store` over them, replication of effects;
//! - `runtime`: settings, counters, events, timers, blocking, delivery, hooks, cluster;
//! - `cmd`: the command table, argument parsing and the command bodies;
//! - `module`: loading.

mod cmd;
// Public for the fuzz targets (fuzz/), with the argument parsers: both are pure.
pub mod core;
mod ffi;
#[cfg(test)]
mod layout_paths;
#[cfg(test)]
mod layout_tests;
mod module;
mod runtime;
mod storage;

pub use cmd::{args, schedule_args};
