// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A map from descriptor numbers to values with no process-wide lock.
//! Descriptor numbers are dense small integers: the first [`DIRECT`] of
//! them index a table directly, one slot each, in chunks of [`CHUNK`]
//! slots made when a number in them is first entered (a chunk once made
//! stays, so finding it is one load). A slot is its own small mutex, held
//! only to clone or replace its value: a lookup never waits for a lookup
//! of another number, nor for a create or close. Numbers past the table
//! (and negative ones, which no descriptor has) go to an ordered map
//! behind a reader-writer lock.
#![deny(unsafe_code)]

use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::OnceLock;

/// Slots per chunk of the table.
pub const CHUNK: usize = 1024;

/// Chunks of the table.
const CHUNKS: usize = 1024;

/// Numbers below this index the table; the others go to the ordered map behind its lock (`far`).
pub const DIRECT: usize = CHUNK * CHUNKS;

/// One chunk of the table: [`CHUNK`] slots.
type Chunk<T> = Box<[Mutex<Option<T>>]>;

/// Descriptor number -> value.
pub struct FdMap<T> {
    chunks: [OnceLock<Chunk<T>>; CHUNKS],
    far: RwLock<BTreeMap<c_int, T>>,
}

impl<T: Clone> Default for FdMap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> FdMap<T> {
    pub const fn new() -> Self {
        FdMap { chunks: [const { OnceLock::new() }; CHUNKS], far: RwLock::new(BTreeMap::new()) }
    }

    /// The slot of `fd` in the table, if its chunk exists (None also for
    /// a number past the table: see [`FdMap::direct`]).
    #[inline(always)]
    fn slot(&self, fd: c_int) -> Option<&Mutex<Option<T>>> {
        let i = fd as u32 as usize;
        let c = self.chunks.get(i / CHUNK)?.get()?;
        Some(&c[i % CHUNK])
    }

    /// Whether `fd` is one of the table's numbers.
    #[inline(always)]
    fn direct(fd: c_int) -> bool {
        (fd as u32 as usize) < DIRECT
    }

    /// The slot of `fd`, its chunk made if need be (`fd` in the table).
    fn slot_made(&self, fd: c_int) -> &Mutex<Option<T>> {
        let i = fd as u32 as usize;
        let c = self.chunks[i / CHUNK].get_or_init(|| (0..CHUNK).map(|_| Mutex::new(None)).collect());
        &c[i % CHUNK]
    }

    /// The value of `fd`, cloned (the slot's lock ends with the call).
    #[inline(always)]
    pub fn get(&self, fd: c_int) -> Option<T> {
        if Self::direct(fd) {
            return self.slot(fd).and_then(|s| s.lock().clone());
        }
        self.far.read().get(&fd).cloned()
    }

    pub fn contains(&self, fd: c_int) -> bool {
        if Self::direct(fd) {
            return self.slot(fd).is_some_and(|s| s.lock().is_some());
        }
        self.far.read().contains_key(&fd)
    }

    /// Sets the value of `fd` (replacing any; the replaced one is dropped
    /// with no lock held).
    pub fn insert(&self, fd: c_int, v: T) {
        let _old = if Self::direct(fd) { self.slot_made(fd).lock().replace(v) } else { self.far.write().insert(fd, v) };
    }

    /// Removes the value of `fd` when `is_it` says it is the caller's;
    /// returns it (None: absent, or another value).
    pub fn remove_if(&self, fd: c_int, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        if Self::direct(fd) {
            let mut s = self.slot(fd)?.lock();
            return if s.as_ref().is_some_and(is_it) { s.take() } else { None };
        }
        let mut m = self.far.write();
        if m.get(&fd).is_some_and(is_it) {
            m.remove(&fd)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove() {
        let m: FdMap<u32> = FdMap::new();
        assert_eq!(m.get(3), None);
        m.insert(3, 30);
        m.insert(3 + CHUNK as c_int, 40);
        m.insert(-1, 5);
        assert_eq!(m.get(3), Some(30));
        assert_eq!(m.get(3 + CHUNK as c_int), Some(40));
        assert_eq!(m.get(-1), Some(5));
        assert!(m.contains(3));
        // Only the caller's own value is removed.
        assert_eq!(m.remove_if(3, |v| *v == 31), None);
        assert_eq!(m.get(3), Some(30));
        assert_eq!(m.remove_if(3, |v| *v == 30), Some(30));
        assert_eq!(m.get(3), None);
        assert_eq!(m.remove_if(3, |_| true), None);
        assert_eq!(m.get(3 + CHUNK as c_int), Some(40));
        // A number far past the others, and the ones between stay absent.
        m.insert(100_003, 9);
        assert_eq!(m.get(100_003), Some(9));
        assert_eq!(m.get(100_003 - CHUNK as c_int), None);
        assert_eq!(m.remove_if(100_003, |_| true), Some(9));
        assert!(!m.contains(100_003));
        assert!(m.contains(-1));
        // Past the table: the far map, and its neighbours stay absent.
        let far = DIRECT as c_int + 5;
        assert_eq!(m.get(far), None);
        m.insert(far, 11);
        assert_eq!(m.get(far), Some(11));
        assert!(m.contains(far));
        assert_eq!(m.get(far - 1), None);
        assert_eq!(m.get(DIRECT as c_int - 1), None);
        assert_eq!(m.remove_if(far, |v| *v == 12), None);
        assert_eq!(m.remove_if(far, |v| *v == 11), Some(11));
        assert!(!m.contains(far));
        assert_eq!(m.remove_if(-1, |_| true), Some(5));
        assert_eq!(m.get(-1), None);
        // A value replaced in its slot: the new one is seen.
        m.insert(7, 1);
        m.insert(7, 2);
        assert_eq!(m.get(7), Some(2));
        assert_eq!(m.remove_if(i32::MAX, |_| true), None);
    }
}
