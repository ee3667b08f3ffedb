//! Every name of a key the gateway keeps itself (the module names its own: RMQ.DROP and
//! RMQ.PURGE delete them), all under `rmqgw:`. Every key of queue `N` is tagged `{N}`, so a
//! queue's keys share its cluster slot:
//! - `rmqgw:q{N}`: the queue's attributes (hash, crate::queue);
//! - `rmqgw:t{N}`: its tags (hash);
//! - `rmqgw:gone{N}`: DeleteQueue's tombstone (a string that expires,
//!   crate::queue::TOMBSTONE_MS);
//! - `rmqgw:task{N}`: its message move task (hash, crate::movetask);
//! - `rmqgw:first{N}`: its messages' first receives (hash, crate::first_receive);
//! - `rmqgw:body{N}`, `rmqgw:bodyage{N}`: priority and range queues' index of bodies (hash
//!   and sorted set, crate::rmq_client's merging send);
//! - `rmqgw:redrive`: every redrive source → its target (one hash, crate::redrive).

pub fn meta(q: &str) -> String {
    format!("rmqgw:q{{{q}}}")
}

pub fn tags(q: &str) -> String {
    format!("rmqgw:t{{{q}}}")
}

pub fn gone(q: &str) -> String {
    format!("rmqgw:gone{{{q}}}")
}

pub fn move_task(q: &str) -> String {
    format!("rmqgw:task{{{q}}}")
}

pub fn first_receives(q: &str) -> String {
    format!("rmqgw:first{{{q}}}")
}

pub fn body_index(q: &str) -> String {
    format!("rmqgw:body{{{q}}}")
}

pub fn body_ages(q: &str) -> String {
    format!("rmqgw:bodyage{{{q}}}")
}

/// The keys of a queue's body index (which DeleteQueue and PurgeQueue remove).
pub fn body_merge(q: &str) -> [String; 2] {
    [body_index(q), body_ages(q)]
}

pub const REDRIVE_SOURCES: &str = "rmqgw:redrive";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(meta("q"), "rmqgw:q{q}");
        assert_eq!(tags("q"), "rmqgw:t{q}");
        assert_eq!(gone("q"), "rmqgw:gone{q}");
        assert_eq!(move_task("q"), "rmqgw:task{q}");
        assert_eq!(first_receives("q"), "rmqgw:first{q}");
        assert_eq!(body_merge("q"), ["rmqgw:body{q}".to_string(), "rmqgw:bodyage{q}".to_string()]);
    }
}
