// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection code against a scripted ucma and the fake libibverbs
//! (paths without a QP: QPs need a real device, which the VM test bed
//! covers).
#![allow(unsafe_code)]

use super::mcast;
use super::*;
use crate::abi::sockaddr::SockAddr;
use crate::cma as cm;
use crate::cma::objects::Vouched;
use crate::sys::verbs::QpInitAttr;
use parking_lot::Mutex;
use std::collections::HashMap;
use crate::cma::device::fake::FakeVerbs;
use crate::cma::device::DevEntry;
use crate::sys::ucma::{AddrInfo, RouteInfo, Ucma};
use std::collections::VecDeque;
use std::os::fd::RawFd;

const GUID: u64 = 0x0102_0304_0506_0708;

#[derive(Default)]
struct St {
    next_fd: i32,
    next_id: u32,
    /// handle -> (uid, fd, events reported)
    ids: HashMap<u32, (u64, i32, u32)>,
    queues: HashMap<i32, VecDeque<(u32, kabi::EventResp)>>,
    log: Vec<String>,
    connects: Vec<(kabi::ConnParam, kabi::Ece)>,
    accepts: Vec<(u32, u64, kabi::ConnParam, kabi::Ece)>,
    rejects: Vec<(u8, Vec<u8>)>,
    /// membership handle -> (uid, id's fd, events reported)
    mcs: HashMap<u32, (u64, i32, u32)>,
}

#[derive(Default)]
struct Fake {
    st: Mutex<St>,
    af_ib: bool,
}

impl Fake {
    fn log(&self, s: &str) {
        self.st.lock().log.push(s.to_string());
    }
    fn logged(&self) -> Vec<String> {
        self.st.lock().log.clone()
    }
    /// Queues an event for kernel id `h` (its uid, or `uid` when given).
    fn push(&self, h: u32, uid: Option<u64>, f: impl FnOnce(&mut kabi::EventResp)) {
        let mut st = self.st.lock();
        let (id_uid, fd, _) = st.ids[&h];
        let mut r = kabi::EventResp { uid: uid.unwrap_or(id_uid), id: h, ..Default::default() };
        f(&mut r);
        st.queues.entry(fd).or_default().push_back((h, r));
    }
}

impl Ucma for &'static Fake {
    fn open(&self) -> Result<RawFd, Errno> {
        let mut st = self.st.lock();
        st.next_fd += 1;
        Ok(200 + st.next_fd)
    }
    fn close(&self, fd: RawFd) {
        self.st.lock().queues.remove(&fd);
    }
    fn abi_version(&self) -> Option<i32> {
        Some(4)
    }
    fn create_id(&self, fd: RawFd, uid: u64, _ps: u16, _q: u8) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        st.next_id += 1;
        let h = st.next_id;
        st.ids.insert(h, (uid, fd, 0));
        Ok(h)
    }
    fn destroy_id(&self, _fd: RawFd, id: u32) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        let (_, fd, n) = st.ids.remove(&id).ok_or(Errno::EINVAL)?;
        if let Some(q) = st.queues.get_mut(&fd) {
            q.retain(|(h, _)| *h != id);
        }
        Ok(n)
    }
    fn bind(&self, _fd: RawFd, _id: u32, a: &[u8]) -> Result<(), Errno> {
        if SockAddr::from_prefix(a).family() == AF_IB && !self.af_ib {
            return Err(Errno::EAFNOSUPPORT);
        }
        Ok(())
    }
    fn bind_ip(&self, _fd: RawFd, _id: u32, _a: &[u8]) -> Result<(), Errno> {
        Ok(())
    }
    fn resolve_addr(&self, _fd: RawFd, id: u32, _s: &[u8], _d: &[u8], _t: u32) -> Result<(), Errno> {
        self.push(id, None, |r| r.event = RDMA_CM_EVENT_ADDR_RESOLVED);
        Ok(())
    }
    fn resolve_ip(&self, fd: RawFd, id: u32, s: &[u8], d: &[u8], t: u32) -> Result<(), Errno> {
        self.resolve_addr(fd, id, s, d, t)
    }
    fn resolve_route(&self, _fd: RawFd, id: u32, _t: u32) -> Result<(), Errno> {
        self.push(id, None, |r| r.event = RDMA_CM_EVENT_ROUTE_RESOLVED);
        Ok(())
    }
    fn query_addr(&self, _fd: RawFd, id: u32) -> Result<AddrInfo, Errno> {
        self.log(&format!("query_addr {id}"));
        Ok(AddrInfo { node_guid: GUID.to_be(), port_num: 1, pkey: 0xffffu16.to_be(), ibdev_index: Some(0), ..Default::default() })
    }
    fn query_gid(&self, _fd: RawFd, id: u32) -> Result<AddrInfo, Errno> {
        self.log(&format!("query_gid {id}"));
        Ok(AddrInfo::default())
    }
    fn query_path(&self, _fd: RawFd, id: u32) -> Result<Vec<ibv_path_data>, Errno> {
        self.log(&format!("query_path {id}"));
        Ok(Vec::new())
    }
    fn query_route(&self, _fd: RawFd, id: u32) -> Result<RouteInfo, Errno> {
        self.log(&format!("query_route {id}"));
        Ok(RouteInfo { node_guid: GUID.to_be(), port_num: 1, ibdev_index: Some(0), ..Default::default() })
    }
    fn get_event(&self, fd: RawFd) -> Result<kabi::EventResp, Errno> {
        let mut st = self.st.lock();
        let (h, r) = st.queues.get_mut(&fd).and_then(|q| q.pop_front()).ok_or(Errno::EAGAIN)?;
        if r.event == RDMA_CM_EVENT_MULTICAST_JOIN || r.event == RDMA_CM_EVENT_MULTICAST_ERROR {
            if let Some(m) = st.mcs.values_mut().find(|m| m.0 == r.uid) {
                m.2 += 1;
            }
        }
        if let Some(e) = st.ids.get_mut(&h) {
            e.2 += 1;
        }
        Ok(r)
    }
    fn set_option(&self, _fd: RawFd, _id: u32, _l: u32, _n: u32, _v: *mut c_void, _len: u32) -> Result<(), Errno> {
        Ok(())
    }
    fn migrate_id(&self, new_fd: RawFd, id: u32, _old: RawFd) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        st.log.push(format!("migrate {id}"));
        let e = st.ids.get_mut(&id).ok_or(Errno::EINVAL)?;
        e.1 = new_fd;
        Ok(0)
    }
    fn write_cm_event(&self, _fd: RawFd, _id: u32, _e: u32, _s: i32, _a: u64) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    fn connect(&self, _fd: RawFd, id: u32, conn: &kabi::ConnParam, ece: kabi::Ece) -> Result<(), Errno> {
        self.st.lock().connects.push((*conn, ece));
        // The peer answers at once.
        self.push(id, None, |r| r.event = RDMA_CM_EVENT_CONNECT_RESPONSE);
        Ok(())
    }
    fn listen(&self, _fd: RawFd, id: u32, backlog: u32) -> Result<(), Errno> {
        self.log(&format!("listen {id} {backlog}"));
        Ok(())
    }
    fn accept(&self, _fd: RawFd, id: u32, uid: u64, conn: &kabi::ConnParam, ece: kabi::Ece) -> Result<(), Errno> {
        self.st.lock().accepts.push((id, uid, *conn, ece));
        Ok(())
    }
    fn reject(&self, _fd: RawFd, _id: u32, reason: u8, pd: &[u8]) -> Result<(), Errno> {
        self.st.lock().rejects.push((reason, pd.to_vec()));
        Ok(())
    }
    fn disconnect(&self, _fd: RawFd, id: u32) -> Result<(), Errno> {
        self.log(&format!("disconnect {id}"));
        Ok(())
    }
    fn init_qp_attr(&self, _fd: RawFd, _id: u32, qp_state: u32) -> Result<kabi::UverbsQpAttr, Errno> {
        Ok(kabi::UverbsQpAttr { qp_attr_mask: 0x31, qp_state, pkey_index: 2, port_num: 1, qkey: 0x1234, ..Default::default() })
    }
    fn notify(&self, _fd: RawFd, id: u32, event: u32) -> Result<(), Errno> {
        self.log(&format!("notify {id} {event}"));
        Ok(())
    }
    fn join_mcast(&self, fd: RawFd, id: u32, uid: u64, addr: &SockAddr, flags: u16, legacy: bool) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        st.log.push(format!("join {id} {} {flags} {legacy}", addr.len()));
        st.next_id += 1;
        let h = st.next_id;
        st.mcs.insert(h, (uid, fd, 0));
        Ok(h)
    }
    fn leave_mcast(&self, _fd: RawFd, mc: u32) -> Result<u32, Errno> {
        let mut st = self.st.lock();
        st.log.push(format!("leave {mc}"));
        Ok(st.mcs.remove(&mc).ok_or(Errno::EINVAL)?.2)
    }
}

fn make(af_ib: bool) -> (&'static Cm, &'static Fake) {
    let f: &'static Fake = Box::leak(Box::new(Fake { af_ib, ..Default::default() }));
    let v = FakeVerbs::default();
    *v.devs.lock() = vec![DevEntry { dev: 7, guid: GUID.to_be(), index: 0 }];
    let cm: &'static Cm = Box::leak(Box::new(Cm::new(Box::new(f), Box::new(v))));
    cm.init().unwrap();
    (cm, f)
}

fn v4(last: u8) -> SockAddr {
    let mut b = [0u8; 16];
    b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    b[4..8].copy_from_slice(&[192, 0, 2, last]);
    SockAddr::from_bytes(&b).unwrap()
}

fn handle(p: &IdPriv) -> u32 {
    p.handle()
}

fn param(pd: &[u8]) -> ConnParam {
    ConnParam {
        private_data: pd.to_vec(),
        responder_resources: RDMA_MAX_RESP_RES,
        initiator_depth: RDMA_MAX_INIT_DEPTH,
        flow_control: 1,
        retry_count: 3,
        rnr_retry_count: 4,
        srq: 0,
        qp_num: 0x77,
    }
}

/// A `ConnParam` as `connect` and `accept` take it (temporaries that live
/// for the calling statement).
macro_rules! args {
    ($c:expr) => {
        &ConnArgs { private_data: &$c.private_data, param: &ConnArgs::values(&$c) }
    };
}

#[test]
fn an_ids_port_link_layer_is_its_devices() {
    let (cm, _f) = make(true);
    {
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        assert_eq!(p.port_link_layer(1), None, "no device yet");
        assert_eq!(p.device_limits(), None, "no device yet");
        cm.resolve_addr(&p, None, Some(v4(2)), 100).unwrap();
        // The fake device: one InfiniBand port, limits 4 and 8.
        assert_eq!(p.port_link_layer(1), Some(crate::sys::verbs::IBV_LINK_LAYER_INFINIBAND));
        assert_eq!((p.port_link_layer(0), p.port_link_layer(2)), (None, None), "no such port");
        assert_eq!(p.device_limits(), Some((4, 8)));
        cm.destroy_id(&p).unwrap();
    }
}

#[test]
fn connect_checks_and_encodes_parameters() {
    let (cm, f) = make(true);
    // ids are created and destroyed within the test.
    {
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        // No device yet: upstream would crash reading its limits.
        assert_eq!(connect(cm, &p, Some(args!(param(b"x")))).unwrap_err(), Errno::EINVAL);
        cm.resolve_addr(&p, None, Some(v4(2)), 100).unwrap();
        // TCP without a QP needs parameters.
        assert_eq!(connect(cm, &p, None).unwrap_err(), Errno::EINVAL);
        let mut too_deep = param(b"");
        too_deep.initiator_depth = 5;
        assert_eq!(connect(cm, &p, Some(args!(too_deep))).unwrap_err(), Errno::EINVAL, "above the device's 4");
        p.conn.lock().connect = vec![1, 2, 3].into();
        p.conn.lock().local_ece = (0x15b3, 9);
        connect(cm, &p, Some(args!(param(b"hi")))).unwrap();
        let (k, ece) = f.st.lock().connects[0];
        assert_eq!(k.qp_num, 0x77);
        assert_eq!((k.initiator_depth, k.responder_resources), (4, 8), "device limits");
        assert_eq!((k.flow_control, k.retry_count, k.rnr_retry_count, k.valid), (1, 3, 4, 1));
        assert_eq!(&k.private_data[..k.private_data_len as usize], &[1, 2, 3, b'h', b'i']);
        assert_eq!((ece.vendor_id, ece.attr_mod), (0x15b3, 9));
        assert!(p.conn.lock().connect.is_empty(), "connect data is sent once");
        cm.destroy_id(&p).unwrap();
    }
}

#[test]
fn udp_ids_skip_parameter_checks() {
    let (cm, f) = make(false);
    // ids are created and destroyed within the test.
    {
        let p = cm.create_id(None, null_mut(), RDMA_PS_UDP).unwrap();
        cm.resolve_addr(&p, None, Some(v4(2)), 100).unwrap();
        connect(cm, &p, None).unwrap();
        let (k, _) = f.st.lock().connects[0];
        assert_eq!((k.retry_count, k.rnr_retry_count, k.private_data_len), (7, 7, 0), "defaults without parameters");
        cm.destroy_id(&p).unwrap();
    }
}

/// Listens on an asynchronous channel and delivers one connection request.
unsafe fn request(cm: &'static Cm, f: &'static Fake, sync: bool) -> (IdRef, Option<ChanRef>, u32) {
    // SAFETY: per the caller.
    unsafe {
        let ch = if sync { None } else { Some(cm.create_channel().unwrap()) };
        let l = cm.create_id(ch.as_ref(), 0x99 as *mut c_void, RDMA_PS_TCP).unwrap();
        cm.bind(&l, Some(v4(1))).unwrap();
        listen(cm, &l, 7).unwrap();
        let h = {
            let mut st = f.st.lock();
            st.next_id += 1;
            let h = st.next_id;
            let (_, fd, _) = st.ids[&handle(&l)];
            st.ids.insert(h, (0, fd, 0));
            h
        };
        let lh = handle(&l);
        f.push(lh, None, |r| {
            r.event = RDMA_CM_EVENT_CONNECT_REQUEST;
            r.id = h;
            r.param.conn.private_data[..3].copy_from_slice(b"req");
            r.param.conn.private_data_len = 3;
            r.param.conn.initiator_depth = 2;
            r.param.conn.responder_resources = 16;
            r.ece = kabi::Ece { vendor_id: 0x15b3, attr_mod: 5 };
        });
        (l, ch, h)
    }
}

#[test]
fn connection_request_creates_the_new_id() {
    for af_ib in [true, false] {
        let (cm, f) = make(af_ib);
        // SAFETY: ids and events are created and released within the test.
        unsafe {
            let (l, ch, h) = request(cm, f, false);
            let ch = ch.unwrap();
            assert!(f.logged().iter().any(|s| s.starts_with("listen") && s.ends_with(" 7")));
            let ev = cm::get_event(&ch).unwrap().ptr;
            let e = &*ev;
            assert_eq!(e.event, RDMA_CM_EVENT_CONNECT_REQUEST);
            assert_eq!(e.listen_id, l.raw());
            assert_ne!(e.id, l.raw());
            let np = cm.id(e.id).unwrap();
            assert!(cm.id(np.raw()).is_ok());
            assert_eq!(np.handle(), h);
            assert_eq!((*e.id).context as usize, 0x99, "the listener's context");
            assert_eq!((*e.id).channel, (*l.raw()).channel);
            assert!(!(*e.id).verbs.is_null(), "bound to the device by the queries");
            let pd = std::slice::from_raw_parts(e.param.conn.private_data as *const u8, e.param.conn.private_data_len as usize);
            assert_eq!(pd, b"req");
            let q = if af_ib { vec![format!("query_addr {h}"), format!("query_gid {h}"), format!("query_path {h}")] } else { vec![format!("query_route {h}")] };
            let log = f.logged();
            assert!(log.ends_with(&q), "{log:?}");
            assert_eq!(np.conn.lock().remote_ece, (0x15b3, 5));
            // Accept without a QP: the caller's QP number, depths bounded by
            // the request and the device.
            assert_eq!(accept(cm, &np, None).unwrap_err(), Errno::EINVAL);
            accept(cm, &np, Some(args!(param(b"ok")))).unwrap();
            let (ah, uid, k, ece) = f.st.lock().accepts[0];
            assert_eq!((ah, uid), (h, np.uid()));
            assert_eq!((k.qp_num, k.initiator_depth, k.responder_resources), (0x77, 2, 8));
            assert_eq!(ece.vendor_id, 0x15b3);
            reject(cm, &np, b"no", REJ_VENDOR_OPTION_NOT_SUPPORTED).unwrap();
            reject(cm, &np, &[], 0).unwrap();
            assert_eq!(f.st.lock().rejects, vec![(35, b"no".to_vec()), (0, vec![])]);
            assert!(cm::ack_event(cm, ev));
            cm.destroy_id(&np).unwrap();
            cm.destroy_id(&l).unwrap();
            cm.destroy_channel(&ch);
        }
    }
}

#[test]
fn synchronous_listener_hands_requests_out_with_get_request() {
    let (cm, f) = make(true);
    // SAFETY: ids and events are created and released within the test.
    unsafe {
        let (l, _, h) = request(cm, f, true);
        let np = get_request(cm, &l).unwrap();
        let id = np.raw();
        assert_eq!(np.handle(), h);
        assert!(np.sync.load(Ordering::Acquire), "moved to a channel of its own");
        assert_ne!((*id).channel, (*l.raw()).channel);
        assert!(f.logged().contains(&format!("migrate {h}")));
        assert_eq!((*(*id).event).event, RDMA_CM_EVENT_CONNECT_REQUEST);
        // Nothing else queued: the fake reports EAGAIN.
        assert_eq!(get_request(cm, &l).unwrap_err(), Errno::EAGAIN);
        cm.destroy_id(&np).unwrap();
        cm.destroy_id(&l).unwrap();
        // An asynchronous listener cannot use it.
        let ch = cm.create_channel().unwrap();
        let a = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        assert_eq!(get_request(cm, &a).unwrap_err(), Errno::EINVAL);
        cm.destroy_id(&a).unwrap();
        cm.destroy_channel(&ch);
    }
}

#[test]
fn connect_response_and_errors_after_a_failed_connect() {
    let (cm, f) = make(true);
    // SAFETY: ids and events are created and released within the test.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_TCP).unwrap();
        let h = handle(&p);
        f.push(h, None, |r| {
            r.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
            r.param.conn.responder_resources = 3;
            r.ece = kabi::Ece { vendor_id: 0x15b3, attr_mod: 1 };
        });
        let ev = cm::get_event(&ch).unwrap().ptr;
        assert_eq!((*ev).event, RDMA_CM_EVENT_CONNECT_RESPONSE, "no QP: the caller completes it");
        assert_eq!((*ev).param.conn.responder_resources, 3);
        assert_eq!(get_remote_ece(&p).unwrap(), Ece { vendor_id: 0x15b3, options: 1, comp_mask: 0 });
        cm::ack_event(cm, ev);
        establish(cm, &p).unwrap();
        assert_eq!(f.st.lock().accepts.len(), 1, "ACCEPT tells the kernel to send the RTU");
        // After a failed connect, REJECTED and DISCONNECTED are dropped.
        p.conn.lock().connect_error = true;
        f.push(h, None, |r| r.event = RDMA_CM_EVENT_REJECTED);
        f.push(h, None, |r| r.event = RDMA_CM_EVENT_DISCONNECTED);
        f.push(h, None, |r| r.event = RDMA_CM_EVENT_TIMEWAIT_EXIT);
        let ev = cm::get_event(&ch).unwrap().ptr;
        assert_eq!((*ev).event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
        cm::ack_event(cm, ev);
        p.conn.lock().connect_error = false;
        f.push(h, None, |r| {
            r.event = RDMA_CM_EVENT_REJECTED;
            r.status = 28;
            r.param.conn.private_data_len = 1;
        });
        let ev = cm::get_event(&ch).unwrap().ptr;
        assert_eq!(((*ev).event, (*ev).status, (*ev).param.conn.private_data_len), (RDMA_CM_EVENT_REJECTED, 28, 1));
        cm::ack_event(cm, ev);
        // Destroy does not wait: every reported event was acked.
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
}

#[test]
fn ece_setters_and_small_commands() {
    let (cm, f) = make(true);
    // ids are created and destroyed within the test.
    {
        let p = cm.create_id(None, null_mut(), RDMA_PS_TCP).unwrap();
        assert_eq!(set_local_ece_param(&p, &Ece { vendor_id: 0, options: 1, comp_mask: 0 }).unwrap_err(), Errno::EINVAL);
        assert_eq!(set_local_ece_param(&p, &Ece { vendor_id: 1, options: 1, comp_mask: 1 }).unwrap_err(), Errno::EINVAL);
        set_local_ece_param(&p, &Ece { vendor_id: 7, options: 3, comp_mask: 0 }).unwrap();
        assert_eq!(p.conn.lock().local_ece, (7, 3));
        notify(cm, &p, 3).unwrap();
        // No device: neither InfiniBand nor iWARP, as upstream (EINVAL).
        assert_eq!(disconnect(cm, &p).unwrap_err(), Errno::EINVAL);
        let mut a = QpAttr { qp_state: IBV_QPS_RTR, ..Default::default() };
        assert_eq!(init_qp_attr(cm, &p, &mut a).unwrap(), 0x31);
        assert_eq!((a.qp_state, a.pkey_index, a.port_num, a.qkey), (IBV_QPS_RTR, 2, 1, 0x1234));
        let h = handle(&p);
        assert!(f.logged().contains(&format!("notify {h} 3")));
        cm.destroy_id(&p).unwrap();
        assert!(cm.id(p.raw()).is_err(), "unregistered with the id");
    }
}

#[test]
fn multicast_join_event_and_leave() {
    let (cm, f) = make(true);
    // SAFETY: ids, memberships and events are created and released here.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let p = cm.create_id(Some(&ch), null_mut(), RDMA_PS_UDP).unwrap();
        let g = SockAddr::v4(u32::from_ne_bytes([239, 0, 0, 1]));
        mcast::join(cm, &p, g, mcast::JOIN_FLAG_FULLMEMBER, 0x42 as *mut c_void).unwrap();
        assert!(f.logged().last().unwrap().starts_with(&format!("join {} 16 0 false", handle(&p))));
        let mc = std::sync::Arc::as_ptr(&p.links.lock().mcs[0]) as u64;
        let h = handle(&p);
        f.push(h, Some(mc), |r| {
            r.event = RDMA_CM_EVENT_MULTICAST_JOIN;
            r.param.ud.qp_num = 0xFF_FFFF;
            r.param.ud.qkey = 0x1234;
            r.param.ud.ah_attr.dlid = 0xc001;
            r.param.ud.ah_attr.grh.dgid[0] = 0xff;
        });
        let ev = cm::get_event(&ch).unwrap().ptr;
        let e = &*ev;
        assert_eq!((e.event, e.status), (RDMA_CM_EVENT_MULTICAST_JOIN, 0));
        assert_eq!(e.id, p.raw());
        assert_eq!(e.param.ud.private_data as usize, 0x42, "the join's context");
        assert_eq!((e.param.ud.qp_num, e.param.ud.qkey, e.param.ud.ah_attr.dlid), (0xFF_FFFF, 0x1234, 0xc001));
        assert_eq!((*(mc as usize as *const mcast::Mc)).group.lock().1, 0xc001);
        let other = SockAddr::v4(u32::from_ne_bytes([239, 0, 0, 2]));
        assert_eq!(mcast::leave(cm, &p, other).unwrap_err(), Errno::EADDRNOTAVAIL);
        // Leaving waits for the join event to be acked.
        let evp = ev as usize;
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            // The event is live until acked here (inside the test's unsafe block).
            let ok = cm::ack_event(cm, evp as *mut rdma_cm_event);
            assert!(ok);
        });
        mcast::leave(cm, &p, g).unwrap();
        t.join().unwrap();
        assert!(p.links.lock().mcs.is_empty());
        // An error reports the context and nothing else.
        mcast::join(cm, &p, g, mcast::JOIN_FLAG_FULLMEMBER, 0x43 as *mut c_void).unwrap();
        let mc = std::sync::Arc::as_ptr(&p.links.lock().mcs[0]) as u64;
        f.push(h, Some(mc), |r| {
            r.event = RDMA_CM_EVENT_MULTICAST_ERROR;
            r.status = (-libc::ENETUNREACH) as u32;
            r.param.ud.qp_num = 5;
        });
        let ev = cm::get_event(&ch).unwrap().ptr;
        let e = &*ev;
        assert_eq!((e.event, e.status, e.id), (RDMA_CM_EVENT_MULTICAST_ERROR, -libc::ENETUNREACH, p.raw()));
        assert_eq!((e.param.ud.private_data as usize, e.param.ud.qp_num), (0x43, 0));
        cm::ack_event(cm, ev);
        mcast::leave(cm, &p, g).unwrap();
        // A membership left in place goes with the id.
        mcast::join(cm, &p, g, mcast::JOIN_FLAG_SENDONLY_FULLMEMBER, null_mut()).unwrap();
        cm.destroy_id(&p).unwrap();
        cm.destroy_channel(&ch);
    }
}

/// What the C API copies out of an rdma_addrinfo (capi/qp.rs ep_info).
fn ep(ai: &rdma_addrinfo) -> EpInfo {
    // SAFETY: the test's addrinfo points at live buffers of these lengths.
    let bytes = |p: *const u8, len: usize| if p.is_null() || len == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(p, len) }.to_vec() };
    EpInfo {
        passive: ai.ai_flags & RAI_PASSIVE != 0,
        port_space: ai.ai_port_space as u32,
        qp_type: ai.ai_qp_type as u32,
        src: Some(SockAddr::from_prefix(&bytes(ai.ai_src_addr as *const u8, ai.ai_src_len as usize))),
        dst: Some(SockAddr::from_prefix(&bytes(ai.ai_dst_addr as *const u8, ai.ai_dst_len as usize))),
        route: crate::cma::public::CPtr(ai.ai_route),
        route_len: ai.ai_route_len,
        connect: bytes(ai.ai_connect as *const u8, ai.ai_connect_len),
    }
}

fn addrinfo(flags: c_int, src: &SockAddr, dst: &SockAddr) -> rdma_addrinfo {
    // SAFETY: rdma_addrinfo is plain data; all-zero is valid.
    let mut ai: rdma_addrinfo = unsafe { std::mem::zeroed() };
    ai.ai_flags = flags;
    ai.ai_family = libc::AF_INET;
    ai.ai_qp_type = IBV_QPT_RC as c_int;
    ai.ai_port_space = RDMA_PS_TCP as c_int;
    ai.ai_src_len = src.len() as u32;
    ai.ai_src_addr = src.as_bytes().as_ptr() as *mut libc::sockaddr;
    ai.ai_dst_len = dst.len() as u32;
    ai.ai_dst_addr = dst.as_bytes().as_ptr() as *mut libc::sockaddr;
    ai
}

#[test]
fn endpoints_bind_or_resolve_synchronously() {
    let (cm, _f) = make(true);
    let (src, dst) = (v4(1), v4(2));
    // SAFETY: endpoints are created and destroyed within the test; the
    // QP attributes are only stored (passive side).
    unsafe {
        let mut attr: QpInitAttr = std::mem::zeroed();
        attr.cap.max_send_wr = 3;
        attr.qp_type = IBV_QPT_UD;
        let ai = addrinfo(RAI_PASSIVE, &src, &dst);
        let mut attr = Vouched::new(attr);
        let p = create_ep(cm, &ep(&ai), Vouched::new(0x40 as *mut ibv_pd), Some(&mut attr)).unwrap();
        assert!(p.sync.load(Ordering::Acquire));
        assert_eq!((*p.raw()).pd as usize, 0x40, "the caller's PD");
        let kept = *p.conn.lock().qp_init_attr.as_deref().unwrap().get();
        assert_eq!((kept.cap.max_send_wr, kept.qp_type), (3, IBV_QPT_RC), "the QP type of the addrinfo");
        destroy_ep(cm, &p);
        assert!(cm.id(p.raw()).is_err());
        // Active, without QP attributes: address and route resolved, the
        // connect data kept for rdma_connect.
        let mut ai = addrinfo(0, &src, &dst);
        let hdr = [9u8; 4];
        ai.ai_connect = hdr.as_ptr() as *mut c_void;
        ai.ai_connect_len = hdr.len();
        let p = create_ep(cm, &ep(&ai), Vouched::new(null_mut()), None).unwrap();
        let id = p.raw();
        assert_eq!((*(*id).event).event, RDMA_CM_EVENT_ROUTE_RESOLVED);
        assert!(!(*id).verbs.is_null());
        assert_eq!(&p.conn.lock().connect[..], &hdr[..]);
        destroy_ep(cm, &p);
    }
}

#[test]
fn udp_listener_requests_carry_ud_parameters() {
    let (cm, f) = make(true);
    // SAFETY: ids and events are created and released within the test.
    unsafe {
        let ch = cm.create_channel().unwrap();
        let l = cm.create_id(Some(&ch), null_mut(), RDMA_PS_UDP).unwrap();
        cm.bind(&l, Some(v4(1))).unwrap();
        listen(cm, &l, 0).unwrap();
        // A backlog of 0 goes to the kernel as it is (the kernel reads it
        // as its own limit; the Rust API's CmId::listen says so).
        assert!(f.logged().iter().any(|s| s.starts_with("listen") && s.ends_with(" 0")));
        let h = {
            let mut st = f.st.lock();
            st.next_id += 1;
            let h = st.next_id;
            st.ids.insert(h, (0, 201, 0));
            h
        };
        f.push(handle(&l), None, |r| {
            r.event = RDMA_CM_EVENT_CONNECT_REQUEST;
            r.id = h;
            r.param.ud.private_data[0] = b'u';
            r.param.ud.private_data_len = 1;
            r.param.ud.qp_num = 0x42;
            r.param.ud.qkey = 0x0123_4567;
        });
        let ev = cm::get_event(&ch).unwrap().ptr;
        let e = &*ev;
        assert_eq!((e.event, e.listen_id), (RDMA_CM_EVENT_CONNECT_REQUEST, l.raw()));
        assert_eq!((e.param.ud.private_data_len, e.param.ud.qp_num, e.param.ud.qkey), (1, 0x42, 0x0123_4567));
        assert_eq!((*e.id).qp_type, IBV_QPT_UD);
        let np = cm.id(e.id).unwrap();
        // A UD accept does not wait for an event.
        accept(cm, &np, Some(args!(param(b"")))).unwrap();
        cm::ack_event(cm, ev);
        cm.destroy_id(&np).unwrap();
        cm.destroy_id(&l).unwrap();
        cm.destroy_channel(&ch);
    }
}

/// The private data joined into a command: the connect data, then the
/// caller's, at most the 255 bytes the length field holds, and the length
/// is the number of bytes written (a kept command's scrub clears that
/// many): nothing past it is touched.
#[test]
fn join_private_data_writes_what_its_length_says() {
    for (connect, user, want) in [(0usize, None, 0usize), (0, Some(0), 0), (36, None, 36), (36, Some(20), 56), (0, Some(255), 255), (36, Some(220), 255), (200, Some(200), 255)] {
        let mut out = [0xeeu8; kabi::RDMA_MAX_PRIVATE_DATA];
        let c: Vec<u8> = (0..connect).map(|i| i as u8).collect();
        let u: Option<Vec<u8>> = user.map(|n| vec![0x5a; n]);
        let len = join_private_data(&mut out, &c, u.as_deref());
        assert_eq!(usize::from(len), want, "{connect} + {user:?}");
        let k = connect.min(want);
        assert_eq!(out[..k], c[..k]);
        assert!(out[k..want].iter().all(|&b| b == 0x5a));
        assert!(out[want..].iter().all(|&b| b == 0xee), "{connect} + {user:?}: written past the length");
    }
}
