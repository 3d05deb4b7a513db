// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The set of multicast memberships ([`super::base::Live::mcs`]), found
//! by the address the kernel knows them by (the uid of their events).
//! (Ids, channels and events are in type-stable stores instead:
//! [`crate::sys::slab`].)
//!
//! Every object here is known by its own address (a membership's uid is
//! its address).  So a set holds only the owning
//! pointers (`Arc`/`Box`, 8 bytes a slot) and compares a slot's address
//! with the one looked up: no key is stored, nothing is followed before it
//! matched ([`Addressed`]).
//!
//! Independent ids must not wait for each other: every set is split into
//! [`SHARDS`] shards, each behind its own lock, chosen by the address's
//! hash (one multiplication); a lookup, insertion or removal takes one
//! shard's lock for a few instructions.  A shard is an open-addressing
//! table with linear probing (at most 3/4 full, removal by backward shift:
//! no tombstones), sized in powers of two.  Nothing here is keyed by data
//! an attacker chooses: the keys are the library's own allocations.

#![deny(unsafe_code)]

use nix::errno::Errno;
use parking_lot::Mutex;
use std::sync::Arc;

/// Shards per set.
pub const SHARDS: usize = 32;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// An owning pointer that knows the address its object is known by.
pub trait Addressed {
    fn addr(&self) -> usize;
}

impl<T> Addressed for Arc<T> {
    fn addr(&self) -> usize {
        Arc::as_ptr(self) as *const u8 as usize
    }
}

impl<T> Addressed for Box<T> {
    fn addr(&self) -> usize {
        &**self as *const T as *const u8 as usize
    }
}

/// Fibonacci hashing: the high bits depend on every bit of the address
/// (malloc's addresses are 16-byte aligned: their low bits say nothing).
/// The top [`SHARD_BITS`] choose the shard, the next ones the slot.
#[inline]
fn hash(addr: usize) -> u64 {
    (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[inline]
fn shard_of(addr: usize) -> usize {
    (hash(addr) >> (64 - SHARD_BITS)) as usize
}

/// One shard: `slots.len()` is 0 or a power of two.
struct Table<P> {
    slots: Vec<Option<P>>,
    len: usize,
}

impl<P: Addressed> Table<P> {
    const fn new() -> Self {
        Table { slots: Vec::new(), len: 0 }
    }

    /// The slot `addr` hashes to (the table is not empty).
    #[inline]
    fn home(&self, addr: usize) -> usize {
        let bits = self.slots.len().trailing_zeros();
        ((hash(addr) << SHARD_BITS) >> (64 - bits)) as usize
    }

    /// The slot holding `addr`, if any.
    #[inline]
    fn position(&self, addr: usize) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        loop {
            match &self.slots[i] {
                None => return None,
                Some(p) if p.addr() == addr => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    fn get(&self, addr: usize) -> Option<&P> {
        self.position(addr).and_then(|i| self.slots[i].as_ref())
    }

    /// Puts `p` in the first free slot from its home (the table has one).
    fn place(&mut self, p: P) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(p.addr());
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some(p);
    }

    /// Inserts `p`, replacing an entry with the same address; ENOMEM (and
    /// `p` dropped, the table unchanged) when the table must grow and
    /// memory is short.
    fn insert(&mut self, p: P) -> Result<(), Errno> {
        if let Some(i) = self.position(p.addr()) {
            self.slots[i] = Some(p);
            return Ok(());
        }
        self.make_room()?;
        self.place(p);
        self.len += 1;
        Ok(())
    }

    /// Grows the table if one more entry would make it more than 3/4 full.
    fn make_room(&mut self) -> Result<(), Errno> {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.resize((self.slots.len() * 2).max(8))?;
        }
        Ok(())
    }

    fn remove(&mut self, addr: usize) -> Option<P> {
        let mut hole = self.position(addr)?;
        let p = self.slots[hole].take();
        self.len -= 1;
        // Backward shift: move up every later entry of the run whose home
        // is not between the hole and its slot (cyclically), so that every
        // entry stays reachable from its home without tombstones.
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some(q) = &self.slots[j] else { break };
            let home = self.home(q.addr());
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        if self.slots.len() > 8 && self.len * 8 < self.slots.len() {
            // Mostly empty: half the size (a quarter full), so that memory
            // goes back after a burst of ids (never below 8 slots, so that
            // one id created and destroyed over and over costs no
            // allocation).
            // (Out of memory, it simply stays as large as it is.)
            let _ = self.resize(self.slots.len() / 2);
        }
        p
    }

    /// Rebuilds the table with `n` slots (a power of two, > len); ENOMEM,
    /// the table unchanged, when the new slots cannot be allocated.
    fn resize(&mut self, n: usize) -> Result<(), Errno> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        slots.resize_with(n, || None);
        let old = std::mem::replace(&mut self.slots, slots);
        for q in old.into_iter().flatten() {
            self.place(q);
        }
        Ok(())
    }
}

/// A set split into shards, each behind its own lock.
pub struct Sharded<P> {
    shards: [Mutex<Table<P>>; SHARDS],
}

impl<P: Addressed> Default for Sharded<P> {
    fn default() -> Self {
        Sharded { shards: std::array::from_fn(|_| Mutex::new(Table::new())) }
    }
}

impl<P: Addressed> Sharded<P> {
    /// Calls `f` on every object, one shard's lock at a time: for rare
    /// reports, not for lookups.
    pub fn for_each(&self, mut f: impl FnMut(&P)) {
        self.shards.iter().for_each(|s| s.lock().slots.iter().flatten().for_each(&mut f));
    }

    #[inline]
    fn shard(&self, addr: usize) -> &Mutex<Table<P>> {
        &self.shards[shard_of(addr)]
    }
    /// Runs `f` on `addr`'s table under its lock.
    #[inline]
    fn change<R>(&self, addr: usize, f: impl FnOnce(&mut Table<P>) -> R) -> R {
        f(&mut self.shard(addr).lock())
    }
    /// Adds `p` (known by `p.addr()`); ENOMEM, `p` dropped, when the
    /// shard must grow and memory is short.
    pub fn insert(&self, p: P) -> Result<(), Errno> {
        self.change(p.addr(), |t| t.insert(p))
    }
    pub fn remove(&self, addr: usize) -> Option<P> {
        self.change(addr, |t| t.remove(addr))
    }
    pub fn contains(&self, addr: usize) -> bool {
        self.shard(addr).lock().position(addr).is_some()
    }
    /// Runs `f` on the object known by `addr` under its shard's lock.
    pub fn with<R>(&self, addr: usize, f: impl FnOnce(&P) -> R) -> Option<R> {
        self.shard(addr).lock().get(addr).map(f)
    }
}

impl<P: Addressed + Clone> Sharded<P> {
    #[inline]
    pub fn get(&self, addr: usize) -> Option<P> {
        self.shard(addr).lock().get(addr).cloned()
    }

    /// An object `pred` accepts, searching every shard (one lock at a
    /// time): for the rare lookups by something other than the address.
    pub fn find(&self, mut pred: impl FnMut(&P) -> bool) -> Option<P> {
        self.shards.iter().find_map(|s| s.lock().slots.iter().flatten().find(|p| pred(p)).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_spread_aligned_addresses() {
        let mut count = [0usize; SHARDS];
        for i in 0..4096usize {
            count[shard_of(0x5555_0000_0000 + i * 0x240)] += 1;
        }
        let (min, max) = (count.iter().min().unwrap(), count.iter().max().unwrap());
        assert!(*min > 4096 / SHARDS / 2 && *max < 4096 / SHARDS * 2, "{count:?}");
    }

    #[test]
    fn set_operations() {
        let m: Sharded<Arc<u32>> = Sharded::default();
        let a = Arc::new(1u32);
        let k = a.addr();
        m.insert(a.clone()).unwrap();
        assert_eq!(m.get(k).as_deref(), Some(&1));
        assert!(m.contains(k));
        assert!(!m.contains(k + 16));
        assert_eq!(m.with(k, |v| **v + 1), Some(2));
        assert_eq!(m.find(|v| **v == 1).map(|v| v.addr()), Some(k));
        assert!(m.find(|v| **v == 3).is_none());
        assert_eq!(m.remove(k).map(|v| *v), Some(1));
        assert!(m.remove(k).is_none());
        assert_eq!(Arc::strong_count(&a), 1);
    }

    /// Many entries in one table, removed in an order unlike the insertion
    /// order: every one stays findable until removed (backward shift), and
    /// the table grows and empties.
    #[test]
    fn table_insert_remove_many() {
        let objs: Vec<Box<u64>> = (0..3000u64).map(Box::new).collect();
        let mut t: Table<&Box<u64>> = Table::new();
        for o in &objs {
            t.insert(o).unwrap();
        }
        assert_eq!(t.len, 3000);
        assert!(t.slots.len().is_power_of_two() && t.len * 4 <= t.slots.len() * 3);
        for (n, i) in (0..3000).map(|i| (i * 7919) % 3000).enumerate() {
            let a = objs[i].addr();
            assert_eq!(t.remove(a).map(|b| **b), Some(i as u64));
            assert!(t.get(a).is_none());
            if n % 97 == 0 {
                for j in (0..3000).map(|j| (j * 7919) % 3000).skip(n + 1).step_by(13) {
                    assert_eq!(t.get(objs[j].addr()).map(|b| ***b), Some(j as u64), "after {n} removals");
                }
            }
        }
        assert_eq!(t.len, 0);
        assert_eq!(t.slots.len(), 8, "shrunk back to the smallest table");
    }

    impl Addressed for &Box<u64> {
        fn addr(&self) -> usize {
            (**self).addr()
        }
    }
}
