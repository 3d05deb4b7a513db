// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! RDMA devices as the CM sees them: the list from libibverbs (opened
//! lazily), one shared protection domain per device, and resynchronisation
//! when devices come and go.
//!
//! [`Verbs`] is the small slice of libibverbs the CM needs; the real one
//! ([`SysVerbs`]) is in `crate::sys::verbs`, tests use a double.

#![deny(unsafe_code)]

use super::objects::Xrcd;
use super::public::CPtr;
use crate::abi::cma::{ibv_context, ibv_pd};
use crate::sys::process::generation;
pub use crate::sys::verbs::{DevEntry, OpenInfo, SysVerbs, Verbs};
use nix::errno::Errno;
#[cfg(test)]
use parking_lot::Mutex;

/// One device known to the CM (upstream's `struct cma_device`).
#[derive(Debug)]
pub struct CmDevice {
    pub dev: usize,
    /// Big-endian node GUID.
    pub guid: u64,
    pub index: i32,
    /// Open context, NULL until first needed.
    pub verbs: CPtr<ibv_context>,
    /// The fork generation of the process that opened `verbs`
    /// ([`crate::sys::process::generation`]; a child of fork(2) inherits
    /// the context but cannot use it: it opens its own, see
    /// [`Devices::open`]).
    pub opened_by: u64,
    /// Shared protection domain, allocated on first use by an id.
    pub pd: CPtr<ibv_pd>,
    /// Link layer of each port (index 0 = port 1); shared with the ids
    /// bound to the device (a reference count, not a copy per id).
    pub link_layers: std::sync::Arc<[u8]>,
    pub max_qpsize: i32,
    pub max_initiator_depth: u8,
    pub max_responder_resources: u8,
    /// Ids and device lists holding this device.
    pub refcnt: u32,
    /// Gone from libibverbs' list; freed when the last holder lets go.
    pub dead: bool,
    /// The XRC domain the connection code opened, closed with the PD.
    pub xrcd: Option<Xrcd>,
    /// What the ids bound to the device share of it (one allocation per
    /// device, not ~50 bytes in every id); dropped with the PD.
    pub shared: Option<std::sync::Arc<DevRef>>,
}

/// What an id keeps of the device it is bound to (it holds a reference,
/// [`Devices::get`]/[`Devices::put`]): the values do not change while the
/// device is referenced.
#[derive(Clone, Debug)]
pub struct DevRef {
    /// The device's key in the list (`CmDevice::dev`).
    pub key: usize,
    pub verbs: CPtr<ibv_context>,
    pub pd: CPtr<ibv_pd>,
    pub link_layers: std::sync::Arc<[u8]>,
    pub max_initiator_depth: u8,
    pub max_responder_resources: u8,
}

/// The device list (upstream's `cma_dev_list` and its mutex).
#[derive(Default)]
pub struct Devices {
    /// Boxed so that ids can keep stable pointers to their device.
    pub list: Vec<Box<CmDevice>>,
    /// Whether the list has been synchronised once.
    pub synced: bool,
}

fn sort_key(d: &CmDevice) -> (bool, u64, i32) {
    // Upstream keeps the list ordered by kernel index, or by GUID when the
    // index is not available.
    if d.index < 0 {
        (true, u64::from_be(d.guid), 0)
    } else {
        (false, 0, d.index)
    }
}

impl Devices {
    /// Brings the list in line with libibverbs: new devices are added
    /// (unopened), vanished ones are closed or, when in use, marked dead.
    pub fn sync(&mut self, verbs: &dyn Verbs) -> Result<(), Errno> {
        let now = verbs.device_list()?;
        if now.is_empty() {
            return Err(Errno::ENODEV);
        }
        for e in &now {
            if !self.list.iter().any(|d| d.dev == e.dev) {
                self.list.push(Box::new(CmDevice {
                    dev: e.dev,
                    guid: e.guid,
                    index: e.index,
                    verbs: CPtr::default(),
                    opened_by: 0,
                    pd: CPtr::default(),
                    link_layers: std::sync::Arc::from([]),
                    max_qpsize: 0,
                    max_initiator_depth: 0,
                    max_responder_resources: 0,
                    refcnt: 0,
                    dead: false,
                    xrcd: None,
                    shared: None,
                }));
            }
        }
        let gone: Vec<usize> = self.list.iter().filter(|d| !now.iter().any(|e| e.dev == d.dev)).map(|d| d.dev).collect();
        for dev in gone {
            self.remove(verbs, dev);
        }
        self.list.sort_by_key(|d| sort_key(d));
        self.synced = true;
        Ok(())
    }

    /// Removes a device now, or marks it dead while it is in use.
    pub fn remove(&mut self, verbs: &dyn Verbs, dev: usize) {
        let Some(pos) = self.list.iter().position(|d| d.dev == dev) else { return };
        let d = &mut self.list[pos];
        if d.refcnt > 0 {
            d.dead = true;
            return;
        }
        if let Some(x) = d.xrcd {
            verbs.close_xrcd(x.addr());
        }
        if !d.pd.0.is_null() {
            verbs.dealloc_pd(d.pd.0 as usize);
        }
        if !d.verbs.0.is_null() {
            verbs.close(d.verbs.0 as usize);
        }
        self.list.remove(pos);
    }

    /// Opens a device if it is not open yet in this process.
    #[inline]
    pub fn open(verbs: &dyn Verbs, d: &mut CmDevice) -> Result<(), Errno> {
        let me = generation();
        // (the common case inline: open by this process already)
        if !d.verbs.0.is_null() && d.opened_by == me {
            return Ok(());
        }
        Self::open_in(verbs, d, me)
    }

    /// [`Devices::open`] for the process of fork generation `me` (no
    /// system call: a new id pays none).  A context opened by another
    /// process is its parent's, inherited through fork(2) without exec: the
    /// kernel refuses write(2) commands on it from the child (its
    /// credentials differ: EACCES on the first send doorbell), and
    /// destroying objects through it would destroy the parent's.  So the
    /// child forgets it (with its PD, XRC domain and shared part, never
    /// freed from here: forgotten, never dropped, the policy of
    /// [`crate::sys::process`]) and opens the device anew; ids the child
    /// inherited keep the old values in their own references.
    #[cold]
    #[inline(never)]
    fn open_in(verbs: &dyn Verbs, d: &mut CmDevice, me: u64) -> Result<(), Errno> {
        if !d.verbs.0.is_null() {
            if d.opened_by == me {
                return Ok(());
            }
            log::debug!(target: "rdmacm", "device {:#x}: context opened by fork generation {}, opening one for {me}", u64::from_be(d.guid), d.opened_by);
            d.verbs = CPtr::default();
            d.pd = CPtr::default();
            d.xrcd = None;
            d.shared = None;
        }
        let info = verbs.open(d.dev)?;
        d.verbs = CPtr(info.ctx as *mut ibv_context);
        d.opened_by = me;
        d.link_layers = info.link_layers.into();
        d.max_qpsize = info.max_qp_wr;
        d.max_initiator_depth = info.max_qp_init_rd_atom as u8;
        d.max_responder_resources = info.max_qp_rd_atom as u8;
        Ok(())
    }

    #[inline(always)]
    fn matches(d: &CmDevice, guid: u64, index: Option<u32>) -> bool {
        match index {
            Some(i) if d.index >= 0 => d.index as u32 == i && d.guid == guid,
            _ => d.guid == guid,
        }
    }

    /// Finds a live device by GUID and kernel index, resynchronising the
    /// list once if it is unknown (a device added since).  Takes a
    /// reference on success.
    #[inline(always)]
    pub fn get(&mut self, verbs: &dyn Verbs, guid: u64, index: Option<u32>) -> Result<std::sync::Arc<DevRef>, Errno> {
        // In line, the common case (the device in use by another id of this
        // process): listed, open here, its PD and shared part made.
        let me = generation();
        // (`shared` is made only with the open context and the PD it holds,
        // and dropped whenever either goes: its presence says both are
        // there; the context's process is checked)
        // (a plain loop: always in line, where `find` may be a call)
        for d in self.list.iter_mut() {
            if d.dead || !Self::matches(d, guid, index) {
                continue;
            }
            if let Some(s) = &d.shared {
                if d.opened_by == me {
                    debug_assert!(!d.pd.0.is_null() && s.verbs == d.verbs && s.pd == d.pd);
                    d.refcnt += 1;
                    return Ok(s.clone());
                }
            }
            break;
        }
        self.get_slow(verbs, guid, index)
    }

    /// [`Devices::get`] of a device not listed, not open in this process,
    /// or without its PD or shared part yet.
    #[cold]
    #[inline(never)]
    fn get_slow(&mut self, verbs: &dyn Verbs, guid: u64, index: Option<u32>) -> Result<std::sync::Arc<DevRef>, Errno> {
        let find = |s: &Self| s.list.iter().position(|d| !d.dead && Self::matches(d, guid, index));
        let pos = match find(self) {
            Some(p) => Some(p),
            None => {
                self.sync(verbs).map_err(|_| Errno::ENODEV)?;
                find(self)
            }
        };
        let d = &mut self.list[pos.ok_or(Errno::ENODEV)?];
        d.refcnt += 1;
        let r = Self::open(verbs, d).and_then(|_| {
            if d.pd.0.is_null() {
                d.pd = CPtr(verbs.alloc_pd(d.verbs.0 as usize)? as *mut ibv_pd);
            }
            match &d.shared {
                Some(s) if s.verbs == d.verbs && s.pd == d.pd => Ok(s.clone()),
                _ => {
                    let s = crate::sys::alloc::try_arc(DevRef {
                        key: d.dev,
                        verbs: d.verbs,
                        pd: d.pd,
                        link_layers: d.link_layers.clone(),
                        max_initiator_depth: d.max_initiator_depth,
                        max_responder_resources: d.max_responder_resources,
                    })?;
                    d.shared = Some(s.clone());
                    Ok(s)
                }
            }
        });
        if r.is_err() {
            d.refcnt -= 1;
        }
        r
    }

    /// The listed device with key `key`.
    pub fn find_mut(&mut self, key: usize) -> Option<&mut CmDevice> {
        self.list.iter_mut().find(|d| d.dev == key).map(|d| &mut **d)
    }

    /// Drops a reference taken by [`Devices::get`]: the last one releases
    /// the PD and, for a dead device, the device itself.
    pub fn put(&mut self, verbs: &dyn Verbs, key: usize) {
        let Some(d) = self.find_mut(key) else { return };
        d.refcnt = d.refcnt.saturating_sub(1);
        if d.refcnt == 0 {
            d.shared = None;
            if !d.pd.0.is_null() {
                verbs.dealloc_pd(d.pd.0 as usize);
                d.pd = CPtr::default();
            }
            if let Some(x) = d.xrcd.take() {
                verbs.close_xrcd(x.addr());
            }
            if d.dead {
                let dev = d.dev;
                self.remove(verbs, dev);
            }
        }
    }
}

#[cfg(test)]
pub mod fake {
    //! A test double of libibverbs: devices are numbers.
    use super::*;

    #[derive(Default)]
    pub struct FakeVerbs {
        pub devs: Mutex<Vec<DevEntry>>,
        pub open: Mutex<Vec<usize>>,
        pub pds: Mutex<Vec<usize>>,
        pub ib: bool,
    }

    impl Verbs for FakeVerbs {
        fn device_list(&self) -> Result<Vec<DevEntry>, Errno> {
            Ok(self.devs.lock().clone())
        }
        fn open(&self, dev: usize) -> Result<OpenInfo, Errno> {
            // Another context each time a device is opened again.
            let mut open = self.open.lock();
            let ctx = dev + 0x1000 + 0x10000 * open.iter().filter(|&&c| c & 0xffff == dev + 0x1000).count();
            open.push(ctx);
            Ok(OpenInfo { ctx, link_layers: vec![1], max_qp_wr: 100, max_qp_init_rd_atom: 4, max_qp_rd_atom: 8 })
        }
        fn close(&self, ctx: usize) {
            self.open.lock().retain(|c| *c != ctx);
        }
        fn alloc_pd(&self, ctx: usize) -> Result<usize, Errno> {
            let pd = ctx + 0x10;
            self.pds.lock().push(pd);
            Ok(pd)
        }
        fn dealloc_pd(&self, pd: usize) {
            self.pds.lock().retain(|p| *p != pd);
        }
        fn transport_is_ib(&self, _ctx: usize) -> bool {
            self.ib
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeVerbs;
    use super::*;

    fn entry(dev: usize, index: i32) -> DevEntry {
        DevEntry { dev, guid: (dev as u64).to_be(), index }
    }

    #[test]
    fn lazy_open_shared_pd_and_hotplug() {
        let v = FakeVerbs::default();
        *v.devs.lock() = vec![entry(2, 1), entry(1, 0)];
        let mut d = Devices::default();
        d.sync(&v).unwrap();
        assert_eq!(d.list.iter().map(|d| d.index).collect::<Vec<_>>(), vec![0, 1], "ordered by index");
        assert!(v.open.lock().is_empty(), "not opened before use");
        let a = d.get(&v, 1u64.to_be(), Some(0)).unwrap();
        let b = d.get(&v, 1u64.to_be(), Some(0)).unwrap();
        assert_eq!((a.key, a.pd), (b.key, b.pd));
        assert!(std::sync::Arc::ptr_eq(&a, &b), "one DevRef per device, shared by its ids");
        assert_eq!(v.pds.lock().len(), 1, "one shared PD");
        // A device that appears later is found by resync.
        v.devs.lock().push(entry(3, 2));
        assert!(d.get(&v, 3u64.to_be(), Some(2)).is_ok());
        assert_eq!(d.get(&v, 9u64.to_be(), Some(9)).unwrap_err(), Errno::ENODEV);
        // Device 1 vanishes while in use: marked dead, freed on last put.
        v.devs.lock().retain(|e| e.dev != 1);
        d.sync(&v).unwrap();
        assert!(d.list.iter().any(|x| x.dev == 1 && x.dead));
        d.put(&v, a.key);
        assert_eq!(v.pds.lock().len(), 2);
        d.put(&v, b.key);
        assert!(!d.list.iter().any(|x| x.dev == 1));
        // The last put of a live device drops its PD and the shared part; the
        // next get builds a new one with the new PD.
        let c = d.get(&v, 3u64.to_be(), Some(2)).unwrap();
        d.put(&v, c.key);
        d.put(&v, c.key);
        assert!(d.find_mut(c.key).unwrap().shared.is_none());
        let e = d.get(&v, 3u64.to_be(), Some(2)).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&c, &e));
        d.put(&v, e.key);
        assert!(!v.open.lock().contains(&0x1001), "closed");
        // No devices at all.
        v.devs.lock().clear();
        assert_eq!(d.sync(&v).unwrap_err(), Errno::ENODEV);
    }

    /// A child of fork(2) opens its own context and PD; the parent's are
    /// neither closed nor freed from the child.
    #[test]
    fn child_of_fork_opens_its_own_context() {
        let v = FakeVerbs::default();
        *v.devs.lock() = vec![entry(1, 0)];
        let mut d = Devices::default();
        let parent = d.get(&v, 1u64.to_be(), Some(0)).unwrap();
        assert_eq!((v.open.lock().len(), v.pds.lock().len()), (1, 1));
        // Pretend the list was inherited from another process.
        let me = generation();
        d.list[0].opened_by = me.wrapping_add(1);
        let child = d.get(&v, 1u64.to_be(), Some(0)).unwrap();
        assert_eq!(v.open.lock().len(), 2, "a new context for the child");
        assert_eq!(v.pds.lock().len(), 2, "a new PD; the parent's is not freed");
        assert!(!std::sync::Arc::ptr_eq(&parent, &child));
        assert_eq!(d.list[0].opened_by, me);
        // The same process again: no reopening.
        let again = d.get(&v, 1u64.to_be(), Some(0)).unwrap();
        assert!(std::sync::Arc::ptr_eq(&child, &again));
        assert_eq!(v.open.lock().len(), 2);
        for r in [parent, child, again] {
            d.put(&v, r.key);
        }
        assert_eq!(v.pds.lock().len(), 1, "the last put frees the child's PD only");
    }
}
