// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! RDMA devices as the CM sees them: the list from libibverbs (opened
//! lazily), one shared protection domain per device, and resynchronisation
//! when devices come and go.
//!
//! [`Verbs`] is the small slice of libibverbs the CM needs; [`SysVerbs`]
//! is the real one, tests use a double.

use crate::abi::cma::{ibv_context, ibv_pd};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::ffi::c_int;

/// `struct ibv_device` (opaque).
#[repr(C)]
pub struct ibv_device {
    _private: [u8; 0],
}

/// One entry of libibverbs' device list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevEntry {
    /// The `struct ibv_device *`, as an address (stable while listed).
    pub dev: usize,
    /// Node GUID, big-endian as libibverbs reports it.
    pub guid: u64,
    /// Kernel device index, -1 when unknown.
    pub index: i32,
}

/// What opening a device tells the CM.
#[derive(Clone, Debug, Default)]
pub struct OpenInfo {
    pub ctx: usize,
    pub link_layers: Vec<u8>,
    pub max_qp_wr: i32,
    pub max_qp_init_rd_atom: i32,
    pub max_qp_rd_atom: i32,
}

/// The libibverbs calls the CM makes.
pub trait Verbs: Send + Sync {
    /// The current device list (keeps it alive until the next call).
    fn device_list(&self) -> Result<Vec<DevEntry>, Errno>;
    fn open(&self, dev: usize) -> Result<OpenInfo, Errno>;
    fn close(&self, ctx: usize);
    /// Returns the PD address, or the error.
    fn alloc_pd(&self, ctx: usize) -> Result<usize, Errno>;
    fn dealloc_pd(&self, pd: usize);
    /// `verbs->device->transport_type == IBV_TRANSPORT_IB`.
    fn transport_is_ib(&self, ctx: usize) -> bool;
    /// Closes the XRC domain the connection code opened for a device.
    fn close_xrcd(&self, _xrcd: usize) {}
}

/// Declarations of libibverbs and of the C shim; kept out of the
/// generated header.
/// cbindgen:ignore
mod sys {
    use super::ibv_device;
    use crate::abi::cma::{ibv_context, ibv_pd};
    use std::ffi::c_int;
    extern "C" {
        pub fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
        pub fn ibv_free_device_list(list: *mut *mut ibv_device);
        pub fn ibv_get_device_guid(dev: *mut ibv_device) -> u64;
        pub fn ibv_get_device_index(dev: *mut ibv_device) -> c_int;
        pub fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
        pub fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
        pub fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
        pub fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
        pub fn rdmacm_shim_cm_device_caps(ctx: *mut ibv_context, caps: *mut c_int) -> c_int;
        pub fn rdmacm_shim_cm_link_layer(ctx: *mut ibv_context, port: u8) -> c_int;
        pub fn rdmacm_shim_cm_transport_type(ctx: *mut ibv_context) -> c_int;
        pub fn rdmacm_shim_close_xrcd(xrcd: *mut std::ffi::c_void) -> c_int;
    }
}
use sys::*;

/// The system libibverbs.
#[derive(Default)]
pub struct SysVerbs {
    /// The list returned last (holds references on its devices).
    list: Mutex<usize>,
}

impl Verbs for SysVerbs {
    fn device_list(&self) -> Result<Vec<DevEntry>, Errno> {
        let mut n: c_int = 0;
        // SAFETY: n is writable; the result is NULL or a NULL-terminated array.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(Errno::ENODEV);
        }
        let mut out = Vec::new();
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n, within the array.
            let dev = unsafe { *list.add(i) };
            if dev.is_null() {
                break;
            }
            // SAFETY: dev is a live entry of the list.
            let (guid, index) = unsafe { (ibv_get_device_guid(dev), ibv_get_device_index(dev)) };
            out.push(DevEntry { dev: dev as usize, guid, index });
        }
        let mut held = self.list.lock();
        if *held != 0 {
            // SAFETY: *held came from ibv_get_device_list and is freed once;
            // devices still present are referenced by the new list.
            unsafe { ibv_free_device_list(*held as *mut *mut ibv_device) };
        }
        *held = list as usize;
        Ok(out)
    }

    fn open(&self, dev: usize) -> Result<OpenInfo, Errno> {
        // SAFETY: dev is an entry of the list we hold.
        let ctx = unsafe { ibv_open_device(dev as *mut ibv_device) };
        if ctx.is_null() {
            return Err(Errno::ENODEV);
        }
        let mut caps = [0 as c_int; 4];
        // SAFETY: ctx is open; caps has room for the 4 values written.
        let r = unsafe { rdmacm_shim_cm_device_caps(ctx, caps.as_mut_ptr()) };
        if r != 0 {
            // SAFETY: ctx was opened above.
            unsafe { ibv_close_device(ctx) };
            return Err(Errno::from_raw(r));
        }
        let ports = caps[0].clamp(0, 255);
        let link_layers = (1..=ports)
            .map(|p| {
                // SAFETY: ctx is open; p is a valid port number.
                let ll = unsafe { rdmacm_shim_cm_link_layer(ctx, p as u8) };
                if ll < 0 {
                    0
                } else {
                    ll as u8
                }
            })
            .collect();
        Ok(OpenInfo { ctx: ctx as usize, link_layers, max_qp_wr: caps[1], max_qp_init_rd_atom: caps[2], max_qp_rd_atom: caps[3] })
    }

    fn close(&self, ctx: usize) {
        // SAFETY: ctx was opened by open() and is closed once.
        unsafe { ibv_close_device(ctx as *mut ibv_context) };
    }

    fn alloc_pd(&self, ctx: usize) -> Result<usize, Errno> {
        // SAFETY: ctx is an open context.
        let pd = unsafe { ibv_alloc_pd(ctx as *mut ibv_context) };
        if pd.is_null() {
            Err(Errno::last())
        } else {
            Ok(pd as usize)
        }
    }

    fn dealloc_pd(&self, pd: usize) {
        // SAFETY: pd came from alloc_pd and is released once.
        unsafe { ibv_dealloc_pd(pd as *mut ibv_pd) };
    }

    fn transport_is_ib(&self, ctx: usize) -> bool {
        if ctx == 0 {
            return false;
        }
        // SAFETY: ctx is an open context.
        unsafe { rdmacm_shim_cm_transport_type(ctx as *mut ibv_context) == 0 }
    }

    fn close_xrcd(&self, xrcd: usize) {
        // SAFETY: xrcd came from ibv_open_xrcd and is closed once.
        unsafe { rdmacm_shim_close_xrcd(xrcd as *mut std::ffi::c_void) };
    }
}

/// One device known to the CM (upstream's `struct cma_device`).
#[derive(Debug)]
pub struct CmDevice {
    pub dev: usize,
    /// Big-endian node GUID.
    pub guid: u64,
    pub index: i32,
    /// Open context, NULL until first needed.
    pub verbs: *mut ibv_context,
    /// Shared protection domain, allocated on first use by an id.
    pub pd: *mut ibv_pd,
    /// Link layer of each port (index 0 = port 1).
    pub link_layers: Vec<u8>,
    pub max_qpsize: i32,
    pub max_initiator_depth: u8,
    pub max_responder_resources: u8,
    /// Ids and device lists holding this device.
    pub refcnt: u32,
    /// Gone from libibverbs' list; freed when the last holder lets go.
    pub dead: bool,
    /// The XRC domain the connection code opened (0: none), closed with the PD.
    pub xrcd: usize,
}

// SAFETY: the raw pointers are libibverbs handles, usable from any thread;
// every CmDevice is only touched under the device list lock.
unsafe impl Send for CmDevice {}

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
                    verbs: std::ptr::null_mut(),
                    pd: std::ptr::null_mut(),
                    link_layers: Vec::new(),
                    max_qpsize: 0,
                    max_initiator_depth: 0,
                    max_responder_resources: 0,
                    refcnt: 0,
                    dead: false,
                    xrcd: 0,
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
        if d.xrcd != 0 {
            verbs.close_xrcd(d.xrcd);
        }
        if !d.pd.is_null() {
            verbs.dealloc_pd(d.pd as usize);
        }
        if !d.verbs.is_null() {
            verbs.close(d.verbs as usize);
        }
        self.list.remove(pos);
    }

    /// Opens a device if it is not open yet.
    pub fn open(verbs: &dyn Verbs, d: &mut CmDevice) -> Result<(), Errno> {
        if !d.verbs.is_null() {
            return Ok(());
        }
        let info = verbs.open(d.dev)?;
        d.verbs = info.ctx as *mut ibv_context;
        d.link_layers = info.link_layers;
        d.max_qpsize = info.max_qp_wr;
        d.max_initiator_depth = info.max_qp_init_rd_atom as u8;
        d.max_responder_resources = info.max_qp_rd_atom as u8;
        Ok(())
    }

    fn matches(d: &CmDevice, guid: u64, index: Option<u32>) -> bool {
        match index {
            Some(i) if d.index >= 0 => d.index as u32 == i && d.guid == guid,
            _ => d.guid == guid,
        }
    }

    /// Finds a live device by GUID and kernel index, resynchronising the
    /// list once if it is unknown (a device added since).  Takes a
    /// reference on success.
    pub fn get(&mut self, verbs: &dyn Verbs, guid: u64, index: Option<u32>) -> Result<*mut CmDevice, Errno> {
        let find = |s: &mut Self| s.list.iter_mut().find(|d| !d.dead && Self::matches(d, guid, index)).map(|d| &mut **d as *mut CmDevice);
        let found = match find(self) {
            Some(p) => Some(p),
            None => {
                self.sync(verbs).map_err(|_| Errno::ENODEV)?;
                find(self)
            }
        };
        let p = found.ok_or(Errno::ENODEV)?;
        // SAFETY: p points into a Box owned by self.list, alive while we
        // hold &mut self.
        let d = unsafe { &mut *p };
        d.refcnt += 1;
        let r = Self::open(verbs, d).and_then(|_| {
            if d.pd.is_null() {
                d.pd = verbs.alloc_pd(d.verbs as usize)? as *mut ibv_pd;
            }
            Ok(())
        });
        if let Err(e) = r {
            d.refcnt -= 1;
            return Err(e);
        }
        Ok(p)
    }

    /// Drops a reference taken by [`Devices::get`]: the last one releases
    /// the PD and, for a dead device, the device itself.
    pub fn put(&mut self, verbs: &dyn Verbs, p: *mut CmDevice) {
        let Some(d) = self.list.iter_mut().find(|d| std::ptr::eq(&***d, p)) else { return };
        d.refcnt = d.refcnt.saturating_sub(1);
        if d.refcnt == 0 {
            if !d.pd.is_null() {
                verbs.dealloc_pd(d.pd as usize);
                d.pd = std::ptr::null_mut();
            }
            if d.xrcd != 0 {
                verbs.close_xrcd(d.xrcd);
                d.xrcd = 0;
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
            let ctx = dev + 0x1000;
            self.open.lock().push(ctx);
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
        assert_eq!(a, b);
        assert_eq!(v.pds.lock().len(), 1, "one shared PD");
        // A device that appears later is found by resync.
        v.devs.lock().push(entry(3, 2));
        assert!(d.get(&v, 3u64.to_be(), Some(2)).is_ok());
        assert_eq!(d.get(&v, 9u64.to_be(), Some(9)).unwrap_err(), Errno::ENODEV);
        // Device 1 vanishes while in use: marked dead, freed on last put.
        v.devs.lock().retain(|e| e.dev != 1);
        d.sync(&v).unwrap();
        assert!(d.list.iter().any(|x| x.dev == 1 && x.dead));
        d.put(&v, a);
        assert_eq!(v.pds.lock().len(), 2);
        d.put(&v, b);
        assert!(!d.list.iter().any(|x| x.dev == 1));
        assert!(!v.open.lock().contains(&0x1001), "closed");
        // No devices at all.
        v.devs.lock().clear();
        assert_eq!(d.sync(&v).unwrap_err(), Errno::ENODEV);
    }
}
