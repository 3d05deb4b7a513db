// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A map from descriptor numbers to values with no process-wide lock: the
//! numbers are spread over [`SHARDS`] shards (descriptor numbers are dense
//! small integers, so consecutive ones land in different shards), each
//! behind its own reader-writer lock and indexed, not searched. A lookup
//! takes one shard's read lock for a few instructions: lookups never wait
//! for each other, and only a create or close of a number in the same
//! shard makes one wait.
#![deny(unsafe_code)]

use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ffi::c_int;

/// Shards per map.
pub const SHARDS: usize = 64;

/// One shard: the numbers `fd` with `fd % SHARDS` of the shard, at index
/// `fd / SHARDS` of a vector (descriptor numbers are dense: a lookup is an
/// index, not a search); negative numbers, which no descriptor has, in a
/// small ordered map.
struct Shard<T> {
    dense: Vec<Option<T>>,
    other: BTreeMap<c_int, T>,
}

impl<T> Shard<T> {
    const fn new() -> Self {
        Shard { dense: Vec::new(), other: BTreeMap::new() }
    }

    #[inline]
    fn get(&self, fd: c_int) -> Option<&T> {
        if fd >= 0 {
            self.dense.get(fd as usize / SHARDS).and_then(Option::as_ref)
        } else {
            self.other.get(&fd)
        }
    }

    fn insert(&mut self, fd: c_int, v: T) {
        if fd >= 0 {
            let i = fd as usize / SHARDS;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i] = Some(v);
        } else {
            self.other.insert(fd, v);
        }
    }

    fn remove(&mut self, fd: c_int) -> Option<T> {
        if fd >= 0 {
            self.dense.get_mut(fd as usize / SHARDS).and_then(Option::take)
        } else {
            self.other.remove(&fd)
        }
    }
}

/// Descriptor number -> value.
pub struct FdMap<T> {
    shards: [RwLock<Shard<T>>; SHARDS],
}

impl<T: Clone> Default for FdMap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> FdMap<T> {
    pub const fn new() -> Self {
        FdMap { shards: [const { RwLock::new(Shard::new()) }; SHARDS] }
    }

    #[inline]
    fn shard(&self, fd: c_int) -> &RwLock<Shard<T>> {
        &self.shards[fd as u32 as usize % SHARDS]
    }

    /// The value of `fd`, cloned (the shard's lock ends with the call).
    #[inline(always)]
    pub fn get(&self, fd: c_int) -> Option<T> {
        self.shard(fd).read().get(fd).cloned()
    }

    pub fn contains(&self, fd: c_int) -> bool {
        self.shard(fd).read().get(fd).is_some()
    }

    /// Sets the value of `fd` (replacing any).
    pub fn insert(&self, fd: c_int, v: T) {
        self.shard(fd).write().insert(fd, v);
    }

    /// Removes the value of `fd` when `is_it` says it is the caller's;
    /// returns it (None: absent, or another value).
    pub fn remove_if(&self, fd: c_int, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        let mut s = self.shard(fd).write();
        if s.get(fd).is_some_and(is_it) {
            s.remove(fd)
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
        m.insert(3 + SHARDS as c_int, 40);
        m.insert(-1, 5);
        assert_eq!(m.get(3), Some(30));
        assert_eq!(m.get(3 + SHARDS as c_int), Some(40));
        assert_eq!(m.get(-1), Some(5));
        assert!(m.contains(3));
        // Only the caller's own value is removed.
        assert_eq!(m.remove_if(3, |v| *v == 31), None);
        assert_eq!(m.get(3), Some(30));
        assert_eq!(m.remove_if(3, |v| *v == 30), Some(30));
        assert_eq!(m.get(3), None);
        assert_eq!(m.remove_if(3, |_| true), None);
        assert_eq!(m.get(3 + SHARDS as c_int), Some(40));
        // A number far past the others, and the ones between stay absent.
        m.insert(100_003, 9);
        assert_eq!(m.get(100_003), Some(9));
        assert_eq!(m.get(100_003 - SHARDS as c_int), None);
        assert_eq!(m.remove_if(100_003, |_| true), Some(9));
        assert!(!m.contains(100_003));
        assert!(m.contains(-1));
    }
}
