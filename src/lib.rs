//! RMQ: a message queue inside Redis. See README.md and SPEC.md.
//!
//! Pure logic: `kind`, `queue` (over the `store` trait), `args`, `route`, `settings`, `meta`,
//! `schedule`.
//! Redis glue: `rstr`, `redis_store`, `replication`, `reply`, `commands`, `module`,
//! `timers` (lease rollback, due wake-ups), `blocking` (RMQ.POP BLOCK), `events`
//! (keyspace notifications), `eviction` (maxmemory-policy warning), `docs` (COMMAND DOCS),
//! `cluster` (slot migration).

mod args;
mod blocking;
mod cluster;
mod commands;
mod docs;
mod error;
mod events;
mod eviction;
mod kind;
mod meta;
mod module;
mod queue;
mod redis_store;
mod replication;
mod reply;
mod route;
mod rstr;
mod schedule;
mod settings;
mod stats;
mod store;
mod timers;

#[cfg(test)]
mod memstore;
#[cfg(test)]
mod queue_tests;
