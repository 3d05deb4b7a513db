// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's riomap registrations and the peer's table of them
//! ([`IoMaps`]): what riomap adds and riounmap removes, what the send path
//! writes into the peer's table, and how many entries our own table (the
//! one the peer writes) holds. Nothing else changes these fields.
//!
//! Invariants it keeps:
//! * Slots: a registration the peer may write into (PROT_WRITE) holds a
//!   slot of the peer's table, `0 <= index < remote.length`, no two the
//!   same; a local-only one holds -1 and counts as sent.
//! * Sent: a registration's entry is written into the peer's table once
//!   (`sent`), before any later data of the stream (the send path writes
//!   the unsent ones first).
//! * `target_size` is the entry count of our table, as the connect data
//!   announces it (fixed once the endpoint exists).
#![deny(unsafe_code)]

use nix::errno::Errno;
use super::verbs::{RegBuf, UserMr};
use super::wire::{self, RsSge, IOMAP_ENTRY_SIZE};

/// One riomap registration.
struct IoMap {
    offset: u64,
    mr: UserMr,
    /// Slot in the peer's table, or -1 for a local-only mapping.
    index: i32,
    /// Written into the peer's table already (or local-only).
    sent: bool,
}

/// A registration's entry for the peer's table: its bytes, where they go
/// (`raddr`, `rkey`) and the slot.
pub(super) struct Entry {
    pub(super) bytes: [u8; IOMAP_ENTRY_SIZE as usize],
    pub(super) raddr: u64,
    pub(super) rkey: u32,
    pub(super) index: u32,
}

/// The riomap state of one stream (see the module comment for its
/// invariants).
pub(super) struct IoMaps {
    target_size: u32,
    /// The peer's table of direct-write mappings (addr, key, entry count).
    remote: RsSge,
    maps: Vec<IoMap>,
}

impl IoMaps {
    /// No registrations; our table of `target_size` entries.
    pub(super) fn new(target_size: u32) -> IoMaps {
        IoMaps { target_size, remote: RsSge::default(), maps: Vec::new() }
    }

    /// What a stream accepted on a listener takes from the listener's:
    /// the size of its table.
    pub(super) fn inherit(&self) -> IoMaps {
        IoMaps::new(self.target_size)
    }

    #[inline]
    pub(super) fn target_size(&self) -> u32 {
        self.target_size
    }

    pub(super) fn set_target_size(&mut self, v: u32) {
        self.target_size = v;
    }

    /// The peer's table (from its connect data).
    pub(super) fn set_remote(&mut self, t: RsSge) {
        self.remote = t;
    }

    /// A free slot of the peer's table (ENOMEM when it is full).
    pub(super) fn free_slot(&self) -> Result<i32, Errno> {
        let slots = self.remote.length as i32;
        (0..slots).find(|i| !self.maps.iter().any(|m| m.index == *i)).ok_or(Errno::ENOMEM)
    }

    /// Adds a registration at `offset` in slot `index` (-1: local only).
    pub(super) fn add(&mut self, offset: u64, mr: UserMr, index: i32) {
        self.maps.push(IoMap { offset, mr, index, sent: index < 0 });
    }

    /// Drops the registration of (`addr`, `len`) (EINVAL: none).
    pub(super) fn remove(&mut self, addr: u64, len: usize) -> Result<(), Errno> {
        let pos = self.maps.iter().position(|m| m.mr.addr() == addr && m.mr.len() == len).ok_or(Errno::EINVAL)?;
        self.maps.remove(pos);
        Ok(())
    }

    /// Drops every registration (the stream closes).
    pub(super) fn clear(&mut self) {
        self.maps.clear();
    }

    /// The first registration whose entry the peer has not seen.
    #[inline]
    pub(super) fn next_unsent(&self) -> Option<usize> {
        self.maps.iter().position(|m| !m.sent)
    }

    /// Registration `pos`'s entry for the peer's table (`swap`: in the
    /// peer's byte order, OPT_SWAP_SGL).
    pub(super) fn entry(&self, pos: usize, swap: bool) -> Entry {
        let m = &self.maps[pos];
        let (offset, addr, rkey, len, index) = (m.offset, m.mr.addr(), m.mr.rkey(), m.mr.len() as u32, m.index as u32);
        let mut e = [0u8; IOMAP_ENTRY_SIZE as usize];
        if !swap {
            e[0..8].copy_from_slice(&offset.to_ne_bytes());
            e[8..16].copy_from_slice(&addr.to_ne_bytes());
            e[16..20].copy_from_slice(&rkey.to_ne_bytes());
            e[20..24].copy_from_slice(&len.to_ne_bytes());
        } else {
            e[0..8].copy_from_slice(&offset.swap_bytes().to_ne_bytes());
            e[8..16].copy_from_slice(&addr.swap_bytes().to_ne_bytes());
            e[16..20].copy_from_slice(&rkey.swap_bytes().to_ne_bytes());
            e[20..24].copy_from_slice(&len.swap_bytes().to_ne_bytes());
        }
        Entry { bytes: e, raddr: wire::table_addr(self.remote.addr, index, IOMAP_ENTRY_SIZE), rkey: self.remote.key, index }
    }

    /// Registration `pos`'s entry is on its way to the peer.
    pub(super) fn mark_sent(&mut self, pos: usize) {
        self.maps[pos].sent = true;
    }

    /// An entry of our table (`table`: the peer-written descriptors)
    /// covering `offset`.
    pub(super) fn find(&self, table: &RegBuf, offset: u64) -> Option<(u64, RsSge)> {
        wire::find_iomap(table, self.target_size, offset)
    }
}

#[cfg(test)]
impl IoMaps {
    pub(super) fn remote(&self) -> RsSge {
        self.remote
    }
}
