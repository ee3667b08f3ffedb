//! An in-memory `Store` for unit and model tests of the queue logic.

use std::collections::{BTreeSet, HashMap};

use crate::core::codec;
use crate::core::kind::Kind;
use crate::core::policy::Policy;
use crate::core::store::{Dead, Flight, Set, Store, Waiting};

#[derive(Default, Clone, Debug, PartialEq)]
pub struct MemStore {
    pub sets: [HashMap<Vec<u8>, f64>; 5],
    /// The park index: (group, order key, message).
    pub index: BTreeSet<(Vec<u8>, [u8; 8], Vec<u8>)>,
    pub kind: Option<Kind>,
    pub waiting: HashMap<Vec<u8>, Waiting>,
    pub flights: HashMap<Vec<u8>, Flight>,
    pub dead: HashMap<Vec<u8>, Dead>,
    pub busy: HashMap<Vec<u8>, Vec<u8>>,
    pub heads: HashMap<Vec<u8>, Vec<u8>>,
    pub policy: Option<Policy>,
}

fn idx(set: Set) -> usize {
    set as usize
}

impl MemStore {
    pub fn members(&self, set: Set) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<_> = self.sets[idx(set)].iter().map(|(m, s)| (m.clone(), *s)).collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    fn order(&self, score: f64) -> [u8; 8] {
        codec::order_key(self.kind.unwrap_or(Kind::Fixed), score)
    }

    /// True when no metadata is kept without the message it belongs to, every busy group
    /// has its message in flight, every recorded head is a deliverable message of its free
    /// group in `Store` (a busy group's is left as it was, unread, until its delivery ends), and the park index holds exactly the parked messages, under their
    /// group.
    pub fn meta_consistent(&self) -> bool {
        let waiting = |m: &Vec<u8>| [Set::Store, Set::Park, Set::Hold].iter().any(|&s| self.sets[idx(s)].contains_key(m));
        let indexed: BTreeSet<_> = self.sets[idx(Set::Park)]
            .iter()
            .map(|(m, sc)| (self.waiting.get(m).and_then(|w| w.group.clone()).unwrap_or_default(), self.order(*sc), m.clone()))
            .collect();
        self.waiting.keys().all(waiting)
            && self.flights.keys().all(|m| self.sets[1].contains_key(m))
            && self.dead.keys().all(|m| self.sets[2].contains_key(m))
            && self.busy.iter().all(|(g, m)| self.flights.get(m).is_some_and(|f| f.group.as_ref() == Some(g)))
            && self.heads.iter().all(|(g, m)| {
                self.busy.contains_key(g)
                    || self.sets[idx(Set::Store)].contains_key(m)
                        && !self.sets[idx(Set::Prepare)].contains_key(m)
                        && self.waiting.get(m).and_then(|w| w.group.as_ref()) == Some(g)
            })
            && indexed == self.index
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
    fn park(&mut self, m: &Vec<u8>, score: f64, g: &[u8]) {
        self.sets[idx(Set::Park)].insert(m.clone(), score);
        self.index.insert((g.to_vec(), self.order(score), m.clone()));
    }
    fn unpark_scored(&mut self, m: &Vec<u8>, score: f64) {
        self.sets[idx(Set::Park)].remove(m);
        let order = self.order(score);
        self.index.retain(|(_, o, im)| !(im == m && *o == order));
    }
    fn best_parked(&self, g: &[u8]) -> Option<(Vec<u8>, f64)> {
        let (_, _, m) = self.index.range((g.to_vec(), [0; 8], Vec::new())..).next().filter(|(ig, _, _)| ig == g)?;
        Some((m.clone(), self.sets[idx(Set::Park)][m]))
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
        self.dead.clear();
        self.busy.clear();
        self.heads.clear();
    }
    fn waiting(&self, m: &Vec<u8>) -> Waiting {
        self.waiting.get(m).cloned().unwrap_or_default()
    }
    fn set_waiting(&mut self, m: &Vec<u8>, w: Option<&Waiting>) {
        match w.filter(|w| **w != Waiting::default()) {
            Some(w) => self.waiting.insert(m.clone(), w.clone()),
            None => self.waiting.remove(m),
        };
    }
    fn flight(&self, m: &Vec<u8>) -> Flight {
        self.flights.get(m).cloned().unwrap_or_default()
    }
    fn set_flight(&mut self, m: &Vec<u8>, f: Option<&Flight>) {
        match f {
            Some(f) => self.flights.insert(m.clone(), f.clone()),
            None => self.flights.remove(m),
        };
    }
    fn dead(&self, m: &Vec<u8>) -> Dead {
        self.dead.get(m).cloned().unwrap_or_default()
    }
    fn set_dead(&mut self, m: &Vec<u8>, d: Option<&Dead>) {
        match d {
            Some(d) => self.dead.insert(m.clone(), d.clone()),
            None => self.dead.remove(m),
        };
    }
    fn busy(&self, g: &[u8]) -> bool {
        self.busy.contains_key(g)
    }
    fn set_busy(&mut self, g: &[u8], m: Option<&Vec<u8>>) {
        match m {
            Some(m) => self.busy.insert(g.to_vec(), m.clone()),
            None => self.busy.remove(g),
        };
    }
    fn head(&self, g: &[u8]) -> Option<Vec<u8>> {
        self.heads.get(g).cloned()
    }
    fn set_head(&mut self, g: &[u8], m: Option<&Vec<u8>>) {
        match m {
            Some(m) => self.heads.insert(g.to_vec(), m.clone()),
            None => self.heads.remove(g),
        };
    }
    fn policy(&self) -> Policy {
        self.policy.clone().unwrap_or_default()
    }
    fn set_policy(&mut self, p: Option<&Policy>) -> bool {
        std::mem::replace(&mut self.policy, p.cloned()).is_some()
    }
}
