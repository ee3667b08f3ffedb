//! Scratch buffers lent to a queue handle for its records' field names and values and its
//! journal notes.

use std::cell::{RefCell, RefMut};

use crate::core::journal::Note;
use crate::core::queue_store::Flight;
use crate::ffi::RStr;

use super::RedisQueue;

/// Scratch buffers for records' field names and values (`tagged_field`, `encoded`), lent to
/// a handle for its command and given back when it drops: fresh buffers were allocated and
/// grown by every command that wrote or deleted a record. (Reaching a thread-local per
/// record cost more than the buffers' upkeep in a POP of many.) Boxed: lent, given back
/// and moved with the handle (open, into TPOP's list) as a pointer, not ~110 bytes.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) field: Vec<u8>,
    pub(super) value: Vec<u8>,
    /// The last in-flight record written and its value's string (`flight_value`): the
    /// records of a POP, and of POP after POP, mostly share one (a first delivery at one
    /// priority), and encoding it and making and freeing a string per record cost ~450
    /// instructions. Redis copies what it stores and nobody edits a string, so one may be
    /// shared (replication keeps it too).
    pub(super) flight: Option<(Flight, RStr)>,
    /// The journal's notes of the command (`Store::note`), written and emptied when the
    /// handle closes (`journal_stream`). Here, not in the handle: a handle's own vector
    /// cost every command ~20 instructions to drop, journal or not, and a journaled one
    /// an allocation.
    pub(super) notes: Vec<Note<RStr>>,
}

/// Boxes, as lent: a spare goes to a handle and back without being boxed again.
#[allow(clippy::vec_box)]
type Spares = Vec<Box<Scratch>>;

thread_local!(static SPARE: RefCell<Spares> = const { RefCell::new(Vec::new()) });

/// Buffers grown past this (a large message's field) are let go, not kept for the
/// process's life.
const SCRATCH_KEPT: usize = 4096;
/// Likewise the notes' vector (a big PURGE's), past a batch's worth.
const NOTES_KEPT: usize = 256;
/// Spares kept (handles open at once that hold buffers; more borrow new ones).
const SPARES: usize = 4;

impl Scratch {
    pub(super) fn lend() -> Box<Scratch> {
        SPARE.with_borrow_mut(Vec::pop).unwrap_or_default()
    }

    pub(super) fn give_back(self: Box<Self>) {
        if self.field.capacity() <= SCRATCH_KEPT && self.value.capacity() <= SCRATCH_KEPT && self.notes.capacity() <= NOTES_KEPT {
            // (The kept flight's value is no longer than the value buffer.)
            SPARE.with_borrow_mut(|s| {
                if s.len() < SPARES {
                    s.push(self);
                }
            });
        }
    }
}

impl RedisQueue {
    /// Gives the scratch buffers back before the handle closes (lent again at the next
    /// record written): a TPOP keeps every queue it visits open to its end, and past
    /// `SPARES` each visit allocated and freed buffers of its own (~500 instructions).
    /// A handle holding journal notes keeps its buffers till it closes and writes them.
    pub fn release_scratch(&mut self) {
        if self.scratch.get_mut().as_ref().is_some_and(|s| s.notes.is_empty()) {
            if let Some(s) = self.scratch.get_mut().take() {
                s.give_back();
            }
        }
    }

    pub(super) fn scratch(&self) -> RefMut<'_, Scratch> {
        RefMut::map(self.scratch.borrow_mut(), |s| &mut **s.get_or_insert_with(Scratch::lend))
    }
}
