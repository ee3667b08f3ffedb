//! RMQ: a message queue inside Redis. See README.md and SPEC.md.
//!
//! Pure logic: `kind`, `queue` (over the `store` trait), `args`, `route`, `settings`, `meta`.
//! Redis glue: `rstr`, `redis_store`, `replication`, `reply`, `commands`, `module`.

mod args;
mod commands;
mod error;
mod kind;
mod meta;
mod module;
mod queue;
mod redis_store;
mod replication;
mod reply;
mod route;
mod rstr;
mod settings;
mod stats;
mod store;

#[cfg(test)]
mod memstore;
#[cfg(test)]
mod queue_tests;
