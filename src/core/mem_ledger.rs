//! `PushLedger` and `ClaimStore` in memory, for the unit tests, the model and the fuzz
//! targets (as `MemStore` is the queue's store).

use std::collections::BTreeMap;

use crate::core::error::Result;
use crate::core::ledger_records::{Claim, Seen};
use crate::core::ledger_rules::{ClaimStore, PushLedger};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemLedger {
    /// The last sequence number given (0: none).
    pub last: u64,
    pub records: BTreeMap<Vec<u8>, Seen>,
    pub claims: BTreeMap<Vec<u8>, Claim>,
}

impl PushLedger for MemLedger {
    fn last_seq(&self) -> Result<u64> {
        Ok(self.last)
    }
    fn set_last_seq(&mut self, last: u64) {
        self.last = last;
    }
    fn record(&self, id: &[u8]) -> Option<Seen> {
        self.records.get(id).cloned()
    }
    fn ended(&self, now: i64, n: usize) -> Vec<Vec<u8>> {
        // Earliest end first, ties by id: a sorted set's order.
        let mut ended: Vec<(i64, &Vec<u8>)> =
            self.records.iter().filter(|(_, s)| s.expires <= now).map(|(id, s)| (s.expires, id)).collect();
        ended.sort();
        ended.into_iter().take(n).map(|(_, id)| id.clone()).collect()
    }
    fn forget(&mut self, id: &[u8]) {
        self.records.remove(id);
    }
    fn put(&mut self, id: &[u8], seen: &Seen) {
        self.records.insert(id.to_vec(), seen.clone());
    }
}

impl ClaimStore for MemLedger {
    fn claims(&self) -> Vec<(Vec<u8>, Claim)> {
        self.claims.iter().map(|(m, c)| (m.clone(), c.clone())).collect()
    }
    fn put_claim(&mut self, m: &[u8], c: &Claim) {
        self.claims.insert(m.to_vec(), c.clone());
    }
    fn drop_claim(&mut self, m: &[u8]) -> bool {
        self.claims.remove(m).is_some()
    }
}
