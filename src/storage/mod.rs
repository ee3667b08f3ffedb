//! The Redis side of storage: a queue's keys (`keys`: the name cache; `core::names` makes
//! the names), the `Store` over them
//! (`redis_queue`), the busy groups, headers and last delivery names it keeps in memory (`busy`,
//! `headers`, `last_ids`), RMQ.DROP's deletion of every key of a queue (`queue_keys`) and
//! the effects every
//! change sends to replicas and the AOF (`effects`).
//! Storage only records what changed; acting on it (waking consumers, timers) is the
//! runtime's job.

pub mod busy;
pub mod claims;
pub mod effects;
pub mod headers;
pub mod journal_stream;
pub mod keys;
pub mod last_ids;
pub mod ledger_keys;
pub mod queue_keys;
pub mod redis_queue;
pub mod schedule_keys;
