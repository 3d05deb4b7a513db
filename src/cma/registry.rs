// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The registry of live objects ([`Live`]): channels, ids, kernel handles,
//! unacked events and multicast memberships, each a map from the address
//! (or handle) C or the kernel knows the object by.
//!
//! Independent ids must not wait for each other: every map is split into
//! [`SHARDS`] shards, each behind its own lock, chosen by the key; a
//! lookup, insertion or removal takes one shard's lock for a few
//! instructions.  The keys are addresses and small integers, hashed with
//! one multiplication ([`KeyHasher`]) instead of SipHash (nothing here is
//! keyed by data an attacker chooses: the keys are the library's own
//! allocations and the kernel's handles).

#![deny(unsafe_code)]

use super::conn::mcast::Mc;
use super::{Channel, EventPriv, IdPriv};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

/// Shards per map.
pub const SHARDS: usize = 32;

/// A multiplicative hash of one integer key (Fibonacci hashing: the high
/// bits, which the map uses first, depend on every bit of the key).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// A map split into shards, each behind its own lock.
pub struct Sharded<K, V> {
    shards: [Mutex<Map<K, V>>; SHARDS],
}

impl<K, V> Default for Sharded<K, V> {
    fn default() -> Self {
        Sharded { shards: std::array::from_fn(|_| Mutex::new(Map::default())) }
    }
}

/// A key's shard: addresses from malloc are 16-byte aligned, so their low
/// bits say nothing; the hash's high bits do.
fn shard_of<K: Hash>(k: &K) -> usize {
    let mut h = KeyHasher::default();
    k.hash(&mut h);
    (h.finish() >> 59) as usize % SHARDS
}

impl<K: Hash + Eq, V> Sharded<K, V> {
    fn shard(&self, k: &K) -> &Mutex<Map<K, V>> {
        &self.shards[shard_of(k)]
    }
    pub fn insert(&self, k: K, v: V) {
        self.shard(&k).lock().insert(k, v);
    }
    /// [`insert`](Self::insert), with ENOMEM (and nothing inserted) when
    /// the shard must grow and memory is short.
    pub fn try_insert(&self, k: K, v: V) -> Result<(), Errno> {
        let mut s = self.shard(&k).lock();
        s.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        s.insert(k, v);
        Ok(())
    }
    /// Makes room for one more entry in `k`'s shard, so that inserting
    /// `k` later is unlikely to need memory (another thread may take the
    /// room meanwhile; [`try_insert`](Self::try_insert) still checks).
    pub fn try_reserve_for(&self, k: &K) -> Result<(), Errno> {
        self.shard(k).lock().try_reserve(1).map_err(|_| Errno::ENOMEM)
    }
    pub fn remove(&self, k: &K) -> Option<V> {
        self.shard(k).lock().remove(k)
    }
    pub fn contains(&self, k: &K) -> bool {
        self.shard(k).lock().contains_key(k)
    }
    /// Removes `k` only while it maps to `v`.
    pub fn remove_if_eq(&self, k: &K, v: &V)
    where
        V: PartialEq,
    {
        let mut s = self.shard(k).lock();
        if s.get(k) == Some(v) {
            s.remove(k);
        }
    }
    /// Runs `f` on the value of `k` under its shard's lock.
    pub fn with<R>(&self, k: &K, f: impl FnOnce(&V) -> R) -> Option<R> {
        self.shard(k).lock().get(k).map(f)
    }
}

impl<K: Hash + Eq, V: Clone> Sharded<K, V> {
    pub fn get(&self, k: &K) -> Option<V> {
        self.shard(k).lock().get(k).cloned()
    }
}

/// Every live channel, id, unacked event and multicast membership of a
/// CM instance, by the address C (or the kernel) knows it by.  Each map
/// changes by single insertions and removals; an id is inserted in `ids`
/// before its handle in `handles`, and removed from `handles` first, so a
/// handle found always leads to a live id or to none.
#[derive(Default)]
pub struct Live {
    pub channels: Sharded<usize, Arc<Channel>>,
    pub ids: Sharded<usize, Arc<IdPriv>>,
    /// Kernel id handle -> id address, for events without a uid.
    pub handles: Sharded<u32, usize>,
    pub events: Sharded<usize, Box<EventPriv>>,
    /// Membership address (the uid of its kernel events) -> membership.
    pub mcs: Sharded<usize, Arc<Mc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_spread_aligned_addresses() {
        let mut count = [0usize; SHARDS];
        for i in 0..4096usize {
            count[shard_of(&(0x5555_0000_0000 + i * 0x240))] += 1;
        }
        let (min, max) = (count.iter().min().unwrap(), count.iter().max().unwrap());
        assert!(*min > 4096 / SHARDS / 2 && *max < 4096 / SHARDS * 2, "{count:?}");
        let m: Sharded<usize, u32> = Sharded::default();
        m.insert(16, 1);
        assert_eq!(m.get(&16), Some(1));
        assert!(m.contains(&16));
        m.remove_if_eq(&16, &2);
        assert_eq!(m.with(&16, |v| *v + 1), Some(2));
        m.remove_if_eq(&16, &1);
        assert_eq!(m.remove(&16), None);
    }
}
#[cfg(test)]
mod size {
    /// What one id costs in memory (IdPriv, inside an Arc): a ratchet.
    /// Upstream's struct cma_id_private is 608 bytes (x86_64); ours holds
    /// the same rdma_cm_id (416) and keeps rare state boxed.
    #[test]
    fn id_size() {
        assert_eq!(std::mem::size_of::<crate::abi::cma::rdma_cm_id>(), 416);
        assert!(std::mem::size_of::<super::super::IdPriv>() <= 656, "{}", std::mem::size_of::<super::super::IdPriv>());
    }
}
