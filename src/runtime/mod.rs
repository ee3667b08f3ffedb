//! The module at run time, over storage: settings, counters, keyspace events, the timer
//! The module at run time, over storage: settings, counters, keyspace events, the timer
//! and its wake-up seam, blocked consumers, delivery, schedule firings, server-event
//! hooks, cluster migration and the eviction warning. Dependencies run one way:
//! `alarm` <- `waiters` <- `delivery` <- `topic_pop` <- `blocking`, `schedules`, `timers` <- `hooks`.

pub mod alarm;
pub mod blocking;
pub mod cluster_slots;
pub mod cursors;
pub mod delivery;
pub mod derived;
pub mod events;
pub mod eviction;
pub mod queue_stats;
pub mod ratelimit;
pub mod registry;
pub mod schedule_firing;
pub mod server_events;
pub mod settings;
pub mod stats;
pub mod timers;
pub mod topic_pop;
pub mod topics;
pub mod tpop_acl;
pub mod waiters;
