//! An in-memory `Store` for unit and model tests of the queue logic.

use std::collections::HashMap;

use crate::core::kind::Kind;
use crate::core::store::{Flight, Set, Store};

#[derive(Default, Clone, Debug)]
pub struct MemStore {
    pub sets: [HashMap<Vec<u8>, f64>; 3],
    pub kind: Option<Kind>,
    pub waiting: HashMap<Vec<u8>, u32>,
    pub flights: HashMap<Vec<u8>, Flight>,
    pub dead_prio: HashMap<Vec<u8>, f64>,
}

fn idx(set: Set) -> usize {
    match set {
        Set::Store => 0,
        Set::Prepare => 1,
        Set::Dead => 2,
    }
}

impl MemStore {
    pub fn members(&self, set: Set) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<_> = self.sets[idx(set)].iter().map(|(m, s)| (m.clone(), *s)).collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// True when no metadata is kept without the message it belongs to.
    pub fn meta_consistent(&self) -> bool {
        self.waiting.keys().all(|m| self.sets[0].contains_key(m))
            && self.flights.keys().all(|m| self.sets[1].contains_key(m))
            && self.dead_prio.keys().all(|m| self.sets[2].contains_key(m))
            && (self.kind.is_some() || self.is_empty())
    }
}

impl Store for MemStore {
    type M = Vec<u8>;

    fn len(&self, set: Set) -> u64 {
        self.sets[idx(set)].len() as u64
    }
    fn score(&self, set: Set, m: &Vec<u8>) -> Option<f64> {
        self.sets[idx(set)].get(m).copied()
    }
    fn add(&mut self, set: Set, m: &Vec<u8>, score: f64) {
        self.sets[idx(set)].insert(m.clone(), score);
    }
    fn rem(&mut self, set: Set, m: &Vec<u8>) -> bool {
        self.sets[idx(set)].remove(m).is_some()
    }
    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(Vec<u8>, f64) -> bool) {
        let mut v = self.members(set);
        if rev {
            v.reverse();
        }
        for (m, s) in v {
            if s >= min && s <= max && !f(m, s) {
                return;
            }
        }
    }
    fn count(&self, set: Set, min: f64, max: f64) -> u64 {
        self.sets[idx(set)].values().filter(|s| **s >= min && **s <= max).count() as u64
    }
    fn kind(&self) -> Option<Kind> {
        self.kind
    }
    fn set_kind(&mut self, kind: Kind) {
        self.kind = Some(kind);
    }
    fn clear_meta(&mut self) {
        self.kind = None;
        self.waiting.clear();
        self.flights.clear();
        self.dead_prio.clear();
    }
    fn waiting_deliveries(&self, m: &Vec<u8>) -> u32 {
        self.waiting.get(m).copied().unwrap_or(0)
    }
    fn set_waiting_deliveries(&mut self, m: &Vec<u8>, n: u32) {
        if n == 0 {
            self.waiting.remove(m);
        } else {
            self.waiting.insert(m.clone(), n);
        }
    }
    fn flight(&self, m: &Vec<u8>) -> Flight {
        self.flights.get(m).copied().unwrap_or_default()
    }
    fn set_flight(&mut self, m: &Vec<u8>, f: Option<Flight>) {
        match f {
            Some(f) => self.flights.insert(m.clone(), f),
            None => self.flights.remove(m),
        };
    }
    fn dead_priority(&self, m: &Vec<u8>) -> Option<f64> {
        self.dead_prio.get(m).copied()
    }
    fn set_dead_priority(&mut self, m: &Vec<u8>, p: Option<f64>) {
        match p {
            Some(p) => self.dead_prio.insert(m.clone(), p),
            None => self.dead_prio.remove(m),
        };
    }
}
