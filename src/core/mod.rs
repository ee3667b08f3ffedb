//! The pure core: the queue's rules over a `Store`, with the clock passed in, and what
//! they are made of. Nothing here touches Redis (no module API: checked by
//! `purity_tests`; no unsafe code: forbidden below), so all of it is tested in memory
//! (`memstore`).

#![forbid(unsafe_code)]

pub mod acl_list;
pub mod bucket;
pub mod codec;
pub mod cron_diagnosis;
pub mod cron_schedule;
pub mod cursor;
pub mod due_index;
pub mod error;
pub mod firings;
pub mod fnv;
pub mod glob;
pub mod journal;
pub mod journal_entry;
pub mod keyed;
pub mod kind;
pub mod ledger_records;
pub mod ledger_rules;
pub mod message_kind;
pub mod names;
pub mod num;
pub mod policy;
pub mod queue_store;
pub mod route;
pub mod rules;
pub mod shrink;

// The in-memory stores and the model of the rules, for the unit tests and the fuzz targets.
#[cfg(test)]
mod journal_tests;
#[cfg(any(test, fuzzing))]
pub mod mem_ledger;
#[cfg(any(test, fuzzing))]
pub mod memstore;
#[cfg(any(test, fuzzing))]
pub mod model;
#[cfg(test)]
mod purity_tests;
#[cfg(test)]
mod rules_tests;
