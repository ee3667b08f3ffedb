//! An in-memory `Store` for unit and model tests of the queue logic.

use std::collections::{BTreeSet, HashMap};

use crate::core::codec;
use crate::core::journal_entry::Note;
use crate::core::kind::Kind;
use crate::core::policy::Policy;
use crate::core::queue_store::{Dead, Flight, Indexed, Set, Store, Waiting};

#[derive(Default, Clone, Debug, PartialEq)]
pub struct MemStore {
    pub sets: [HashMap<Vec<u8>, f64>; 5],
    /// The group index, parked messages and heads: (group, order key, message).
    pub index: BTreeSet<(Vec<u8>, [u8; 8], Vec<u8>)>,
    pub kind: Option<Kind>,
    pub waiting: HashMap<Vec<u8>, Waiting>,
    pub flights: HashMap<Vec<u8>, Flight>,
    pub dead: HashMap<Vec<u8>, Dead>,
    pub busy: HashMap<Vec<u8>, Vec<u8>>,
    pub policy: Option<Policy>,
    /// The last delivery name given (`name_deliveries`), kept when the queue empties as the
    /// module keeps it (`storage::last_ids`) until the clock passes it; the names of the
    /// deliveries in flight are in `flights`.
    pub last_id: Option<u64>,
    /// The journal's notes, oldest first (kept only while the policy sets `journal`).
    pub journal: Vec<Note<Vec<u8>>>,
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

    /// The index entry of message `m` of group `g` with `score`.
    fn entry(&self, g: &[u8], score: f64, m: &[u8]) -> (Vec<u8>, [u8; 8], Vec<u8>) {
        (g.to_vec(), self.order(score), m.to_vec())
    }

    /// True when no metadata is kept without the message it belongs to, every busy group
    /// has its message in flight, and the group index holds every parked message and at
    /// most one message in `Store` per group (its head, only while it is not busy, and its
    /// first indexed message), each under its group and score, or as a pinned head (first
    /// key, in `Store`, `Park` or `Hold`); a group that is not busy has its first indexed
    /// message in `Store` (or, pinned, in `Hold`).
    pub fn meta_consistent(&self) -> bool {
        let waiting = |m: &Vec<u8>| [Set::Store, Set::Park, Set::Hold].iter().any(|&s| self.sets[idx(s)].contains_key(m));
        let group = |m: &Vec<u8>| self.waiting.get(m).and_then(|w| w.group.clone());
        let parked = |m: &Vec<u8>| self.sets[idx(Set::Park)].contains_key(m);
        let indexed = |g: &[u8], sc: f64, m: &Vec<u8>| {
            self.index.contains(&self.entry(g, sc, m)) || self.index.contains(&self.entry(g, codec::PINNED, m))
        };
        let parked_indexed = self.sets[idx(Set::Park)].iter().all(|(m, sc)| group(m).is_some_and(|g| indexed(&g, *sc, m)));
        let entries_true = self.index.iter().all(|(g, o, m)| {
            let score = self.score(Set::Park, m).or_else(|| self.score(Set::Store, m));
            let keyed = if *o == [0; 8] { waiting(m) } else { score.is_some_and(|sc| self.order(sc) == *o) };
            keyed && group(m).as_ref() == Some(g)
        });
        let first = |g: &Vec<u8>| self.index.range((g.clone(), [0; 8], Vec::new())..).next();
        let heads: Vec<_> = self.index.iter().filter(|(_, _, m)| self.sets[idx(Set::Store)].contains_key(m)).collect();
        let one_head_per_group = heads.windows(2).all(|w| w[0].0 != w[1].0);
        let heads_of_free_groups = heads.iter().all(|(g, _, _)| !self.busy.contains_key(g));
        let heads_first = heads.iter().all(|h| first(&h.0) == Some(*h));
        let free_groups_headed =
            self.index.iter().all(|(g, _, _)| self.busy.contains_key(g) || first(g).is_some_and(|(_, _, f)| !parked(f)));
        self.waiting.keys().all(waiting)
            && self.flights.keys().all(|m| self.sets[1].contains_key(m))
            && self.dead.keys().all(|m| self.sets[2].contains_key(m))
            && self.busy.iter().all(|(g, m)| self.flights.get(m).is_some_and(|f| f.group.as_ref() == Some(g)))
            && parked_indexed
            && entries_true
            && one_head_per_group
            && heads_of_free_groups
            && heads_first
            && free_groups_headed
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
    fn park_keyed(&mut self, m: &Vec<u8>, score: f64, key: f64, g: &[u8]) {
        self.sets[idx(Set::Park)].insert(m.clone(), score);
        self.index.insert(self.entry(g, key, m));
    }
    fn unpark_scored(&mut self, m: &Vec<u8>, score: f64) {
        self.sets[idx(Set::Park)].remove(m);
        self.index_head(m, score, None);
    }
    fn index_head(&mut self, m: &Vec<u8>, score: f64, g: Option<&[u8]>) -> bool {
        match g {
            Some(g) => self.index.insert(self.entry(g, score, m)),
            None => {
                let (order, before) = (self.order(score), self.index.len());
                self.index.retain(|(_, o, im)| !(im == m && *o == order));
                self.index.len() != before
            }
        }
    }
    fn best_indexed(&self, g: &[u8]) -> Option<Indexed<Vec<u8>>> {
        let (_, o, m) = self.index.range((g.to_vec(), [0; 8], Vec::new())..).next().filter(|(ig, _, _)| ig == g)?;
        let (set, score) = [Set::Park, Set::Store, Set::Hold].into_iter().find_map(|set| Some((set, self.score(set, m)?)))?;
        Some(Indexed { m: m.clone(), score, set, pinned: *o == [0; 8] })
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
    }
    fn purge_all(&mut self, dead: bool) {
        for set in [Set::Store, Set::Prepare, Set::Park, Set::Hold] {
            self.sets[idx(set)].clear();
        }
        self.index.clear();
        self.waiting.clear();
        self.flights.clear();
        self.busy.clear();
        if dead {
            self.sets[idx(Set::Dead)].clear();
            self.dead.clear();
        }
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
    fn name_deliveries(&mut self, now: i64, n: u64) -> u64 {
        let first = codec::next_delivery_id(self.last_id, now);
        self.last_id = Some(first + n.saturating_sub(1));
        first
    }
    fn named(&self, id: u64) -> Option<Vec<u8>> {
        self.flights.iter().find(|(_, f)| f.id == Some(id)).map(|(m, _)| m.clone())
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
    fn set_busy(&mut self, g: Vec<u8>, m: &Vec<u8>) {
        self.busy.insert(g, m.clone());
    }
    fn set_free(&mut self, g: &[u8]) {
        self.busy.remove(g);
    }
    fn policy(&self) -> Policy {
        self.policy.clone().unwrap_or_default()
    }
    fn set_policy(&mut self, p: Option<&Policy>) -> bool {
        std::mem::replace(&mut self.policy, p.cloned()).is_some()
    }
    fn note(&mut self, n: Note<Vec<u8>>) {
        self.journal.push(n);
    }
}
