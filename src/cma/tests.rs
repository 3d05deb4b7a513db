// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The CM core against test doubles of the kernel and of libibverbs.
#![allow(unsafe_code)]

use std::collections::HashMap;
use super::device::fake::FakeVerbs;
use super::device::DevEntry;
use crate::sys::ucma::{AddrInfo, RouteInfo, SockAddr, Ucma};
use super::*;
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::collections::VecDeque;

/// A scripted ucma: ids, per-channel event queues and a command log.
#[derive(Default)]
struct FakeUcma {
    st: Mutex<FakeState>,
    /// GUID QUERY ADDR reports (default: the fake device's).
    guid: Mutex<Option<u64>>,
    cv: Condvar,
    af_ib: bool,
    abi: Option<i32>,
}

#[derive(Default)]
struct FakeState {
    next_fd: i32,
    next_id: u32,
    /// handle -> (uid, fd, events reported)
    ids: HashMap<u32, (u64, i32, u32)>,
    queues: HashMap<i32, VecDeque<(u32, kabi::EventResp)>>,
    log: Vec<&'static str>,
}

const GUID: u64 = 0x1122_3344_5566_7788;

impl FakeUcma {
    fn push(&self, handle: u32, event: u32, status: i32) {
        let mut st = self.st.lock();
        let (uid, fd, _) = st.ids[&handle];
        let r = kabi::EventResp { uid, id: handle, event, status: status as u32, ..Default::default() };
        st.queues.entry(fd).or_default().push_back((handle, r));
        self.cv.notify_all();
    }
    /// An event as old kernels could report it: uid 0, the id by handle only.
    /// (`on`: the id whose channel gets it; `handle`: what it names.)
    fn push_uid0(&self, on: u32, handle: u32, event: u32) {
        let mut st = self.st.lock();
        let (_, fd, _) = st.ids[&on];
        let r = kabi::EventResp { uid: 0, id: handle, event, ..Default::default() };
        st.queues.entry(fd).or_default().push_back((handle, r));
    }
    fn log(&self) -> Vec<&'static str> {
        self.st.lock().log.clone()
    }
}

fn addr_v4(last: u8) -> SockAddr {
    let mut b = [0u8; 16];
    b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    b[4..8].copy_from_slice(&[192, 0, 2, last]);
    SockAddr::from_bytes(&b).unwrap()
}

impl Ucma for FakeUcma {
    fn open(&self) -> Result<i32, Errno> {
        let mut st = self.st.lock();
        st.next_fd += 1;
        Ok(100 + st.next_fd)
    }
    fn close(&self, fd: i32) {
        self.st.lock().queues.remove(&fd);
    }
    fn abi_version(&self) -> Option<i32> {
        self.abi
    }
    fn create_id(&self, fd: i32, uid: u64, ps: u16, _qp_type: u8) -> Result<u32, Errno> {
        if ![0x2, 0x106, 0x111, 0x13f].contains(&ps) {
            return Err(Errno::EINVAL);
        }
        let mut st = self.st.lock();
        st.next_id += 1;
        let h = st.next_id;
        st.ids.insert(h, (uid, fd, 0));
        Ok(h)
    }
    fn destroy_id(&self, _fd: i32, id: u32) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        let (_, fd, reported) = st.ids.remove(&id).ok_or(Errno::EINVAL)?;
        if let Some(q) = st.queues.get_mut(&fd) {
            q.retain(|(h, _)| *h != id);
        }
        Ok(reported)
    }
    fn bind(&self, _fd: i32, _id: u32, addr: &[u8]) -> Result<(), Errno> {
        self.st.lock().log.push("bind");
        if SockAddr::from_prefix(addr).family() == AF_IB && !self.af_ib {
            return Err(Errno::EAFNOSUPPORT);
        }
        Ok(())
    }
    fn bind_ip(&self, _fd: i32, _id: u32, _addr: &[u8]) -> Result<(), Errno> {
        self.st.lock().log.push("bind_ip");
        Ok(())
    }
    fn resolve_addr(&self, _fd: i32, id: u32, _src: &[u8], dst: &[u8], _t: u32) -> Result<(), Errno> {
        self.st.lock().log.push("resolve_addr");
        if dst.get(7) == Some(&99) {
            self.push(id, RDMA_CM_EVENT_ADDR_ERROR, -(libc::ETIMEDOUT));
        } else {
            self.push(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
        }
        Ok(())
    }
    fn resolve_ip(&self, fd: i32, id: u32, src: &[u8], dst: &[u8], t: u32) -> Result<(), Errno> {
        self.resolve_addr(fd, id, src, dst, t)?;
        let mut st = self.st.lock();
        st.log.pop();
        st.log.push("resolve_ip");
        Ok(())
    }
    fn resolve_route(&self, _fd: i32, id: u32, _t: u32) -> Result<(), Errno> {
        self.st.lock().log.push("resolve_route");
        self.push(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
        Ok(())
    }
    fn query_addr(&self, _fd: i32, _id: u32) -> Result<AddrInfo, Errno> {
        self.st.lock().log.push("query_addr");
        let guid = self.guid.lock().unwrap_or(GUID);
        Ok(AddrInfo { node_guid: guid.to_be(), port_num: 1, pkey: 0xffffu16.to_be(), src: addr_v4(1), dst: addr_v4(2), ibdev_index: Some(0) })
    }
    fn query_gid(&self, _fd: i32, _id: u32) -> Result<AddrInfo, Errno> {
        self.st.lock().log.push("query_gid");
        let mut a = AddrInfo::default();
        let (mut s, mut d) = ([0u8; 48], [0u8; 48]);
        s[8] = 0xfe;
        d[8] = 0xfd;
        (a.src, a.dst) = (SockAddr::from_bytes(&s).unwrap(), SockAddr::from_bytes(&d).unwrap());
        Ok(a)
    }
    fn query_path(&self, _fd: i32, _id: u32) -> Result<Vec<ibv_path_data>, Errno> {
        self.st.lock().log.push("query_path");
        // SAFETY: plain data; all-zero is valid.
        let mut d: ibv_path_data = unsafe { std::mem::zeroed() };
        d.path.dlid = 0x1234u16.to_be();
        d.path.mtu = 0x84;
        d.flags = 1;
        Ok(vec![d, d])
    }
    fn query_route(&self, _fd: i32, _id: u32) -> Result<RouteInfo, Errno> {
        self.st.lock().log.push("query_route");
        let mut r = RouteInfo { node_guid: GUID.to_be(), port_num: 1, ibdev_index: Some(0), num_paths: 1, ..Default::default() };
        r.paths[0].sgid[0] = 0xfe;
        r.src = addr_v4(1);
        Ok(r)
    }
    fn get_event(&self, fd: i32) -> Result<kabi::EventResp, Errno> {
        let mut st = self.st.lock();
        let (h, r) = st.queues.get_mut(&fd).and_then(|q| q.pop_front()).ok_or(Errno::EAGAIN)?;
        if let Some(e) = st.ids.get_mut(&h) {
            e.2 += 1;
        }
        Ok(r)
    }
    fn readable(&self, fd: i32) -> bool {
        self.st.lock().queues.get(&fd).is_some_and(|q| !q.is_empty())
    }
    fn set_option(&self, _fd: i32, _id: u32, level: u32, _n: u32, _v: *mut c_void, _l: u32) -> Result<(), Errno> {
        if level > 1 {
            return Err(Errno::ENOSYS);
        }
        Ok(())
    }
    fn migrate_id(&self, new_fd: i32, id: u32, _old: i32) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        let e = st.ids.get_mut(&id).ok_or(Errno::EINVAL)?;
        let (old_fd, reported) = (std::mem::replace(&mut e.1, new_fd), e.2);
        // The id's queued events move with it, as the kernel moves them.
        let old_q = st.queues.remove(&old_fd).unwrap_or_default();
        let (moved, kept): (VecDeque<_>, VecDeque<_>) = old_q.into_iter().partition(|(h, _)| *h == id);
        st.queues.insert(old_fd, kept);
        st.queues.entry(new_fd).or_default().extend(moved);
        Ok(reported)
    }
    fn write_cm_event(&self, _fd: i32, id: u32, event: u32, status: i32, arg: u64) -> Result<(), Errno> {
        self.push(id, event, status);
        let mut st = self.st.lock();
        let fd = st.ids[&id].1;
        let q = st.queues.get_mut(&fd).unwrap();
        q.back_mut().unwrap().1.param.arg32 = [arg as u32, (arg >> 32) as u32];
        Ok(())
    }
}

fn make(af_ib: bool, ib: bool) -> (&'static Cm, &'static FakeUcma) {
    let u: &'static FakeUcma = Box::leak(Box::new(FakeUcma { af_ib, ..Default::default() }));
    struct Fwd(&'static FakeUcma);
    macro_rules! fwd {
        ($($f:ident ( $($a:ident : $t:ty),* ) -> $r:ty;)*) => {
            impl Ucma for Fwd { $( fn $f(&self, $($a: $t),*) -> $r { self.0.$f($($a),*) } )* }
        };
    }
    fwd! {
        open() -> Result<i32, Errno>;
        close(fd: i32) -> ();
        abi_version() -> Option<i32>;
        create_id(fd: i32, uid: u64, ps: u16, q: u8) -> Result<u32, Errno>;
        destroy_id(fd: i32, id: u32) -> Result<u32, Errno>;
        bind(fd: i32, id: u32, a: &[u8]) -> Result<(), Errno>;
        bind_ip(fd: i32, id: u32, a: &[u8]) -> Result<(), Errno>;
        resolve_addr(fd: i32, id: u32, s: &[u8], d: &[u8], t: u32) -> Result<(), Errno>;
        resolve_ip(fd: i32, id: u32, s: &[u8], d: &[u8], t: u32) -> Result<(), Errno>;
        resolve_route(fd: i32, id: u32, t: u32) -> Result<(), Errno>;
        query_addr(fd: i32, id: u32) -> Result<AddrInfo, Errno>;
        query_gid(fd: i32, id: u32) -> Result<AddrInfo, Errno>;
        query_path(fd: i32, id: u32) -> Result<Vec<ibv_path_data>, Errno>;
        query_route(fd: i32, id: u32) -> Result<RouteInfo, Errno>;
        get_event(fd: i32) -> Result<kabi::EventResp, Errno>;
        readable(fd: i32) -> bool;
        set_option(fd: i32, id: u32, l: u32, n: u32, v: *mut c_void, len: u32) -> Result<(), Errno>;
        migrate_id(n: i32, id: u32, o: i32) -> Result<u32, Errno>;
        write_cm_event(fd: i32, id: u32, e: u32, s: i32, a: u64) -> Result<(), Errno>;
    }
    let v = FakeVerbs { ib, ..Default::default() };
    *v.devs.lock() = vec![DevEntry { dev: 7, guid: GUID.to_be(), index: 0 }];
    let cm: &'static Cm = Box::leak(Box::new(Cm::new(Box::new(Fwd(u)), Box::new(v))));
    (cm, u)
}

#[test]
fn init_probes_af_ib_and_picks_the_command_family() {
    let (cm, u) = make(true, false);
    cm.init().unwrap();
    assert!(cm.af_ib());
    assert_eq!(u.log(), ["bind", "query_addr", "query_gid"]);
    let (cm, u) = make(false, false);
    cm.init().unwrap();
    assert!(!cm.af_ib());
    // ids are created and destroyed within the test.
    {
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        cm.bind(&p, Some(addr_v4(1))).unwrap();
        cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
        cm.destroy_id(&p).unwrap();
    }
    assert_eq!(u.log()[1..], ["bind_ip", "query_route", "resolve_ip", "query_route"]);
}

#[test]
fn abi_version_outside_range_is_eperm() {
    let (cm, u) = make(true, false);
    // SAFETY: the fake is only shared with cm, which has not used it yet.
    unsafe { (*(u as *const FakeUcma as *mut FakeUcma)).abi = Some(5) };
    assert_eq!(cm.init().unwrap_err(), Errno::EPERM);
    assert_eq!(cm.create_channel().unwrap_err(), Errno::EPERM);
}

#[test]
fn sync_resolution_fills_the_id() {
    let (cm, _u) = make(true, true);
    // SAFETY: ids are created and destroyed within the test.
    unsafe {
        let p = cm.create_id(None, 0x55 as *mut c_void, RDMA_PS_UDP).unwrap();
        let id = p.raw();
        assert_eq!((*id).qp_type, IBV_QPT_UD);
        assert_eq!((*id).ps, RDMA_PS_UDP);
        assert_eq!((*id).context as usize, 0x55);
        assert!(!(*id).channel.is_null());
        cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
        assert!(!(*id).verbs.is_null());
        assert!(!(*id).pd.is_null());
        assert_eq!((*id).port_num, 1);
        assert_eq!((*id).route.addr.addr.ibaddr.pkey, 0xffffu16.to_be());
        assert_eq!((*id).route.addr.addr.ibaddr.sgid.raw[0], 0xfe, "IB transport queries the GIDs");
        let ev = (*id).event;
        assert_eq!((*ev).event, RDMA_CM_EVENT_ADDR_RESOLVED);
        cm.resolve_route(&p, 100).unwrap();
        assert_eq!((*id).route.num_paths, 2);
        assert_eq!((*(*id).route.path_rec).dlid, 0x1234u16.to_be());
        assert_eq!((*(*id).route.path_rec).mtu, 4);
        assert_eq!((*(*id).event).event, RDMA_CM_EVENT_ROUTE_RESOLVED);
        cm.destroy_id(&p).unwrap();
    }
    assert!(cm.devices.lock().list.iter().all(|d| d.refcnt == 0 && d.pd.0.is_null()), "device released");
}

/// An id takes one reference on its device, however often its address is
/// queried (bind, then each resolution), and gives it back when destroyed.
#[test]
fn one_device_reference_per_id() {
    let (cm, _u) = make(true, true);
    let refs = || cm.devices.lock().list.iter().map(|d| d.refcnt).sum::<u32>();
    let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
    cm.bind(&p, Some(addr_v4(1))).unwrap();
    assert_eq!(refs(), 1, "bind takes the device");
    cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
    cm.query_addr(&p).unwrap();
    assert_eq!(refs(), 1, "queried again: the same reference");
    cm.destroy_id(&p).unwrap();
    assert_eq!(refs(), 0, "device released");
}

#[test]
fn sync_errors_map_status_to_errno() {
    let (cm, _u) = make(true, false);
    // SAFETY: ids are created and destroyed within the test.
    unsafe {
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        assert_eq!(cm.resolve_addr(&p, None, Some(addr_v4(99)), 100).unwrap_err(), Errno::ETIMEDOUT);
        assert_eq!((*(*p.raw()).event).event, RDMA_CM_EVENT_ADDR_ERROR);
        assert_eq!(cm.resolve_addr(&p, None, None, 100).unwrap_err(), Errno::EINVAL);
        assert_eq!(cm.resolve_addr(&p, Some(SockAddr::default()), Some(addr_v4(2)), 100).unwrap_err(), Errno::EINVAL);
        assert_eq!(cm.bind(&p, Some(SockAddr::default())).unwrap_err(), Errno::EINVAL);
        assert_eq!(cm.set_option(&p, 7, 0, null_mut(), 0).unwrap_err(), Errno::ENOSYS);
        assert_eq!(cm.write_cm_event(&p, RDMA_CM_EVENT_ADDR_ERROR, 0, 0).unwrap_err(), Errno::EINVAL);
        cm.destroy_id(&p).unwrap();
    }
    assert_eq!(cm.create_id(None, null_mut(), 0x9999).unwrap_err(), Errno::EINVAL);
}

#[test]
fn device_found_again_by_resync() {
    let (cm, _u) = make(true, false);
    cm.init().unwrap();
    // The device disappears before the address resolves.
    cm.devices.lock().list.clear();
    // SAFETY: ids are created and destroyed within the test.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        // The fake verbs still list the device with another index.
        cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
        let ev = get_event(&ch).unwrap().ptr;
        assert_eq!((*ev).event, RDMA_CM_EVENT_ADDR_RESOLVED, "resync finds the device again");
        assert!(ack_event(cm, ev));
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
}

#[test]
fn destroy_waits_for_acks() {
    let (cm, _u) = make(true, false);
    // SAFETY: ids and events are used within the test; the id outlives the
    // event it waits for.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        cm.write_cm_event(&p, RDMA_CM_EVENT_USER, 3, 0x1_0000_0002).unwrap();
        let ev = get_event(&ch).unwrap().ptr;
        assert_eq!((*ev).event, RDMA_CM_EVENT_USER);
        assert_eq!((*ev).status, 3);
        assert_eq!((*ev).param.arg, 0x1_0000_0002);
        assert_eq!((*ev).id, p.raw());
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let p2 = p.clone();
        let t = std::thread::spawn(move || {
            cm.destroy_id(&p2).unwrap();
            d2.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!done.load(Ordering::SeqCst), "destroy must wait for the ack");
        assert!(ack_event(cm, ev));
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert!(!ack_event(cm, ev), "a second ack is refused");
        // Unretrieved events are dropped by the kernel: no wait.
        let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
}

/// An id on `ch` with an event (status 7) queued while another thread,
/// the channel's reader (it took and acked the id's first event), is on
/// its way to take it: that thread calls `rdma_get_cm_event` 5 ms after
/// this returns, as a thread that saw the channel readable and was
/// descheduled before its call.  The thread gives what it got, as the
/// event's status (or the error).
fn late_reader(cm: &'static Cm, ch: &ChanRef) -> (IdRef, std::thread::JoinHandle<Result<i32, Errno>>) {
    use std::sync::mpsc::channel;
    let p = cm.create_id(Some(ch), null_mut(), RDMA_PS_TCP).unwrap();
    cm.write_cm_event(&p, RDMA_CM_EVENT_USER, 0, 1).unwrap();
    let ((ready, is_ready), (go, gone)) = (channel(), channel());
    let ch = ch.clone();
    let reader = std::thread::spawn(move || {
        let first = get_event(&ch).unwrap();
        assert!(ack_event(cm, first.ptr));
        ready.send(()).unwrap();
        gone.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        get_event(&ch).map(|g| {
            assert!(ack_event(cm, g.ptr));
            g.status
        })
    });
    is_ready.recv().unwrap();
    cm.write_cm_event(&p, RDMA_CM_EVENT_USER, 7, 0).unwrap();
    go.send(()).unwrap();
    (p, reader)
}

#[test]
fn destroy_lets_the_channels_reader_take_a_queued_event() {
    use std::time::{Duration, Instant};
    let (cm, u) = make(true, false);
    let ch = cm.create_channel().unwrap();
    let (p, reader) = late_reader(cm, &ch);
    cm.destroy_id(&p).unwrap();
    assert_eq!(reader.join().unwrap(), Ok(7), "the destroy let the reader take its event");

    // The reader has gone: a destroy waits for it once (READER_TAKE_MS
    // pauses of at least 1 ms), and the queued event is dropped; the next
    // destroy does not wait.
    let stale = ch.reader.load(Ordering::Relaxed);
    assert_ne!(stale, 0);
    for round in 0..2 {
        let q = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        cm.write_cm_event(&q, RDMA_CM_EVENT_USER, 0, 3).unwrap();
        let t = Instant::now();
        cm.destroy_id(&q).unwrap();
        let waited = t.elapsed();
        if round == 0 {
            assert!(waited >= Duration::from_millis(Cm::READER_TAKE_MS as u64), "waited {waited:?} for the reader");
            assert_eq!(ch.reader.load(Ordering::Relaxed), 0, "the reader counts as away");
        } else {
            assert!(waited < Duration::from_millis(Cm::READER_TAKE_MS as u64), "waited {waited:?} with no reader");
        }
        assert!(!u.readable(ch.fd()), "the destroy dropped the queued event");
    }

    // The destroying thread is the reader: no wait, the event is dropped.
    let q = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
    cm.write_cm_event(&q, RDMA_CM_EVENT_USER, 0, 4).unwrap();
    let g = get_event(&ch).unwrap();
    assert!(ack_event(cm, g.ptr));
    cm.write_cm_event(&q, RDMA_CM_EVENT_USER, 0, 5).unwrap();
    let t = Instant::now();
    cm.destroy_id(&q).unwrap();
    assert!(t.elapsed() < Duration::from_millis(Cm::READER_TAKE_MS as u64));
    assert_eq!(get_event(&ch).unwrap_err(), Errno::EAGAIN);
    cm.destroy_channel(&ch);
}

#[test]
fn migrate_lets_the_old_channels_reader_take_a_queued_event() {
    let (cm, _u) = make(true, false);
    let (ch, other) = (cm.create_channel().unwrap(), cm.create_channel().unwrap());
    let (p, reader) = late_reader(cm, &ch);
    cm.migrate_id(&p, Some(&other)).unwrap();
    assert_eq!(reader.join().unwrap(), Ok(7), "the migrate let the old channel's reader take its event");
    cm.destroy_id(&p).unwrap();
    cm.destroy_channel(&ch);
    cm.destroy_channel(&other);
}

#[test]
fn migrate_between_sync_and_async() {
    let (cm, _u) = make(true, false);
    // SAFETY: ids and channels are used within the test.
    unsafe {
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        assert_eq!(cm.migrate_id(&p, None).unwrap_err(), Errno::EINVAL);
        cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
        let ch = cm.create_channel().unwrap();
        cm.migrate_id(&p, Some(&ch)).unwrap();
        assert!(!p.sync.load(Ordering::SeqCst));
        assert_eq!((*p.raw()).channel, ch.raw());
        assert_eq!(p.fd(), ch.fd(), "commands go to the new channel's fd");
        assert!((*p.raw()).event.is_null(), "parked event acked");
        cm.migrate_id(&p, None).unwrap();
        assert!(p.sync.load(Ordering::SeqCst));
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
}

#[test]
fn device_list_for_c() {
    let (cm, _u) = make(true, false);
    let list = get_devices(cm).unwrap();
    assert_eq!(list.len(), 1);
    assert!(!list[0].is_null());
    assert_eq!(cm.devices.lock().list[0].refcnt, 1);
    free_devices(cm, &list);
    assert_eq!(cm.devices.lock().list[0].refcnt, 0);
}

#[test]
fn unknown_device_is_addr_error_with_status_minus_one() {
    let (cm, u) = make(true, false);
    cm.init().unwrap();
    assert!(cm.af_ib());
    *u.guid.lock() = Some(0xdead);
    // SAFETY: ids, channels and events are used within the test.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap();
        let ev = get_event(&ch).unwrap().ptr;
        assert_eq!((*ev).event, RDMA_CM_EVENT_ADDR_ERROR);
        assert_eq!((*ev).status, -1, "upstream reports its helpers' -1");
        assert!((*p.raw()).verbs.is_null());
        assert!(ack_event(cm, ev));
        cm.destroy_id(&p).unwrap();
        // A synchronous caller sees status -1 as EPERM, as upstream.
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        assert_eq!(cm.resolve_addr(&p, None, Some(addr_v4(2)), 100).unwrap_err(), Errno::EPERM);
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
}

#[test]
fn device_removal_event_reaches_the_id() {
    let (cm, u) = make(true, false);
    // SAFETY: ids, channels and events are used within the test.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let p = cm.create_id(Some(&ch), 0x42 as *mut c_void, RDMA_PS_UDP).unwrap();
        cm.bind(&p, Some(addr_v4(1))).unwrap();
        u.push(p.handle(), RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
        let ev = get_event(&ch).unwrap().ptr;
        assert_eq!((*ev).event, RDMA_CM_EVENT_DEVICE_REMOVAL);
        assert_eq!((*ev).id, p.raw());
        assert_eq!((*(*ev).id).context as usize, 0x42);
        assert!((*ev).param.ud.private_data.is_null());
        assert!(ack_event(cm, ev));
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
    assert!(cm.devices.lock().list.iter().all(|d| d.refcnt == 0), "device reference dropped");
}

#[test]
fn c_pointers_become_checked_references() {
    let (cm, _u) = make(true, false);
    let ch = cm.create_channel().unwrap();
    let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
    let held = cm.id(p.raw()).unwrap();
    assert!(IdRef::ptr_eq(&held, &p));
    assert_eq!(cm.channel(ch.raw()).unwrap().fd(), ch.fd());
    assert_eq!(cm.id(0x1000 as *const rdma_cm_id).unwrap_err(), Errno::EINVAL, "not an id of ours");
    // inside the store, but not at an id's start: EINVAL
    assert_eq!(cm.id((p.raw() as usize + 8) as *const rdma_cm_id).unwrap_err(), Errno::EINVAL, "inside an id");
    assert_eq!(cm.id((p.raw() as usize - 8) as *const rdma_cm_id).unwrap_err(), Errno::EINVAL, "between ids");
    cm.destroy_id(&p).unwrap();
    assert_eq!(cm.id(p.raw()).unwrap_err(), Errno::EINVAL, "destroyed: unknown to the C API");
    assert_eq!(cm.id(p.raw()).unwrap_err(), Errno::EINVAL, "destroyed twice: still EINVAL");
    // A reference taken before the destroy stays valid: the slot goes
    // with the last one (here `p` and `held`).
    assert_eq!(held.handle(), p.handle());
    assert_eq!(IdRef::count(&p), 2);
    let w = IdRef::downgrade(&p);
    drop(held);
    drop(p);
    assert!(w.upgrade().is_none(), "the last reference freed the slot");
    cm.destroy_channel(&ch);
    assert_eq!(cm.channel(ch.raw()).unwrap_err(), Errno::EINVAL);
}

/// The panic policy: a call that panics while holding an id leaves it
/// broken (EIO from then on), and destroy still frees it.
#[test]
fn a_panic_while_holding_an_id_breaks_it() {
    let (cm, _u) = make(true, false);
    let ch = cm.create_channel().unwrap();
    let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
    let raw = p.raw();
    assert!(cm.id(raw).unwrap().hold().is_ok(), "a healthy id is held");
    assert_eq!(super::alloc::peek_id(raw), Ok((p.fd(), p.handle())), "a healthy id is read");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _held = cm.id(raw).unwrap().hold().unwrap();
        panic!("a bug inside a call");
    }));
    assert!(r.is_err());
    assert_eq!(cm.id(raw).unwrap().hold().err(), Some(Errno::EIO), "broken: refused");
    assert_eq!(super::alloc::peek_id(raw), Err(Errno::EIO), "broken: refused without a hold too");
    drop(p);
    let held = cm.id(raw).unwrap().hold_to_destroy();
    cm.destroy_id(&held).unwrap();
    assert_eq!(cm.id(raw).unwrap_err(), Errno::EINVAL, "destroyed");
    assert_eq!(super::alloc::peek_id(raw), Err(Errno::EINVAL), "destroyed: refused without a hold too");
    assert_eq!(super::alloc::peek_id(null_mut()), Err(Errno::EINVAL), "NULL");
    assert_eq!(super::alloc::peek_id(raw.cast::<u8>().wrapping_add(8).cast()), Err(Errno::EINVAL), "misaligned");
    cm.destroy_channel(&ch);
}

#[test]
fn uid0_events_find_the_id_by_handle() {
    let (cm, u) = make(true, false);
    let ch = cm.create_channel().unwrap();
    let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
    let q = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
    // Without a uid only ESTABLISHED is delivered (found by handle); other
    // events are counted as completed and dropped, as upstream.
    let h = q.handle();
    u.push_uid0(h, h, RDMA_CM_EVENT_DISCONNECTED);
    u.push_uid0(h, h, RDMA_CM_EVENT_ESTABLISHED);
    u.push_uid0(h, 9999, RDMA_CM_EVENT_ESTABLISHED);
    let got = get_event(&ch).unwrap();
    assert_eq!((got.id, got.event), (q.raw(), RDMA_CM_EVENT_ESTABLISHED));
    // SAFETY: an unacked event of this CM.
    let (listen_id, pd) = unsafe { ((*got.ptr).listen_id, (*got.ptr).param.conn.private_data) };
    assert!(listen_id.is_null() && pd.is_null(), "an event starts all zero");
    assert!(ack_event(cm, got.ptr));
    // the one for an unknown handle is discarded: nothing left
    assert_eq!(get_event(&ch).unwrap_err(), Errno::EAGAIN);
    // An event delivered on the first read (no discarded one before it)
    // starts all zero too.
    u.push(q.handle(), RDMA_CM_EVENT_ESTABLISHED, 0);
    let got = get_event(&ch).unwrap();
    // SAFETY: as above.
    let (listen_id, pd) = unsafe { ((*got.ptr).listen_id, (*got.ptr).param.conn.private_data) };
    assert!(listen_id.is_null() && pd.is_null(), "a new event starts all zero");
    assert!(ack_event(cm, got.ptr));
    cm.destroy_id(&q).unwrap();
    cm.destroy_id(&p).unwrap();
    cm.destroy_channel(&ch);
}

/// Memory per id: the id's `Arc` block (two counts and the
/// `IdPriv`) fits glibc's 608-byte chunk, one size below upstream's
/// `cma_id_private` (624).
#[test]
fn id_fits_its_slot() {
    // upstream's id is a 624-byte malloc chunk
    let slot = crate::sys::slab::Slab::<IdPriv>::slot_size();
    assert!(slot <= 600, "IdPriv {} bytes: its slot takes {slot}", std::mem::size_of::<IdPriv>());
    assert!(crate::sys::slab::Slab::<Channel>::slot_size() <= 32);
}

/// Acks counted without a lock wake a waiter (no lost wake-up), and a
/// wait for what is already counted returns at once.
#[test]
fn acks_wake_their_waiter() {
    for round in 0..200u32 {
        let a = Arc::new(Acks::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let w = {
            let a = a.clone();
            std::thread::spawn(move || {
                a.wait(2).unwrap();
                tx.send(()).unwrap();
            })
        };
        if round % 2 == 0 {
            std::thread::yield_now();
        }
        a.add();
        a.add();
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap_or_else(|_| panic!("round {round}: the waiter was not woken"));
        w.join().unwrap();
        a.wait(2).unwrap();
        a.wait_with(1, || ()).unwrap();
    }
}

/// Ids created, looked up and destroyed from several threads at once,
/// asynchronous on one shared channel and synchronous with their own,
/// while every thread also looks up ids other threads have destroyed:
/// a lookup gives a live id or EINVAL, and every destroy frees its id
/// (the kernel double sees every id gone).
#[test]
fn concurrent_create_lookup_destroy() {
    let (cm, u) = make(true, false);
    let ch = cm.create_channel().unwrap();
    let stale: Vec<usize> = (0..16)
        .map(|_| {
            let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
            let a = p.raw() as usize;
            cm.destroy_id(&p).unwrap();
            a
        })
        .collect();
    let stale = std::sync::Arc::new(stale);
    let ts: Vec<_> = (0..4usize)
        .map(|t| {
            let (ch, stale) = (ch.clone(), stale.clone());
            std::thread::spawn(move || {
                for i in 0..500usize {
                    let sync = (i + t) % 3 == 0;
                    let ctx = (t << 20 | i) as *mut c_void;
                    let p = cm.create_id(if sync { None } else { Some(&ch) }, ctx, RDMA_PS_TCP).unwrap();
                    let held = cm.id(p.raw()).unwrap().hold().unwrap();
                    assert_eq!(held.id.context(), ctx, "the id created, not another");
                    for s in stale.iter().skip(i % 4).step_by(4) {
                        if let Ok(q) = cm.id(*s as *const rdma_cm_id) {
                            // an id of another thread in a reused slot
                            let _ = q.handle();
                        }
                    }
                    drop(held);
                    cm.destroy_id(&p).unwrap();
                    assert_eq!(cm.id(p.raw()).unwrap_err(), Errno::EINVAL);
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    cm.destroy_channel(&ch);
    assert!(u.st.lock().ids.is_empty(), "every kernel id destroyed");
}
