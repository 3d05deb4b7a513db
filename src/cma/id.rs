// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! An id's accessors and the hold a call of the C API takes on it
//! ([`Held`]); [`IdPriv`] is declared in [`super::base`].
#![deny(unsafe_code)]

use super::base::{ChanRef, IdPriv, IdRef, DEV_LIMITS_SET};
use super::device::DevRef;
use crate::abi::cma::rdma_cm_id;
use nix::errno::Errno;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An id held by one call of the C API.  The policy for a panic (always a
/// bug) while a call holds an id: the C API reports EIO, and the id is
/// marked broken when the unwinding drops this guard, so that no later
/// call runs on state the panic may have left half-updated (parking_lot
/// locks have no poisoning to do it for us).  Destroying the id still
/// works and frees it.
pub struct Held(IdRef);

impl std::ops::Deref for Held {
    type Target = IdRef;
    fn deref(&self) -> &IdRef {
        &self.0
    }
}

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.break_id();
        }
    }
}

impl Held {
    /// Marks the id broken (a panic unwinds through this hold).
    #[cold]
    #[inline(never)]
    fn break_id(&self) {
        log::error!(target: "rdmacm", "a call panicked while holding an id: the id is unusable from now on (EIO) but for destroy");
        self.0.broken.store(true, Ordering::Release);
    }
}

impl std::fmt::Debug for IdPriv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdPriv({:p}, handle {})", self.raw(), self.handle())
    }
}

impl IdPriv {
    /// The public id's address (what C holds).
    pub fn raw(&self) -> *mut rdma_cm_id {
        self.id.as_ptr()
    }

    /// The address the kernel knows the id by (its uid).
    pub fn uid(&self) -> u64 {
        self as *const IdPriv as usize as u64
    }

    /// The kernel's handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.handle.load(Ordering::Acquire)
    }

    /// The fd of the id's current channel.
    #[inline]
    pub fn fd(&self) -> i32 {
        self.fd.load(Ordering::Acquire)
    }

    /// The id's current channel.
    pub fn channel(&self) -> ChanRef {
        self.links.lock().channel.clone()
    }

    /// The device the id is bound to, if any.
    pub fn device(&self) -> Option<Arc<DevRef>> {
        self.links.lock().dev.clone()
    }

    /// The bound device's limits, if the id has a device: its largest
    /// initiator depth and responder resources (one load: no lock, no
    /// count).
    #[inline]
    pub fn device_limits(&self) -> Option<(u8, u8)> {
        let v = self.dev_limits.load(Ordering::Acquire);
        (v & DEV_LIMITS_SET != 0).then_some(((v >> 8) as u8, v as u8))
    }

    /// The link layer of port `port` (from 1) of the bound device, if the
    /// id has a device with that port (read under the links' lock, no
    /// count taken).
    pub fn port_link_layer(&self, port: u8) -> Option<u8> {
        let i = (port as usize).checked_sub(1)?;
        self.links.lock().dev.as_ref()?.link_layers.get(i).copied()
    }

    #[inline]
    pub(crate) fn complete_event(&self) {
        self.acks.add();
    }
}

impl IdRef {
    /// Holds the id for one call: EIO if an earlier call panicked while
    /// holding it (see [`Held`]).
    #[inline]
    pub fn hold(self) -> Result<Held, Errno> {
        if self.broken.load(Ordering::Acquire) {
            return Err(Errno::EIO);
        }
        Ok(Held(self))
    }

    /// Holds the id to destroy it: a broken id may still be destroyed.
    #[inline]
    pub fn hold_to_destroy(self) -> Held {
        Held(self)
    }
}
