// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The libibverbs calls the library makes: devices, QP, SRQ, CQ,
//! multicast attachment, the port queries of `ibv_gid_reachable`, and in
//! [`data`] the one data path of the Rust API and rsockets (post, poll,
//! registration, address handles).  The structures they take are
//! mirrored in [`crate::abi::verbs`] (re-exported here) and [`data`]; the
//! unit tests compare every size and offset with what the C shim
//! measures from the installed header.

use crate::abi::cma::{ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_pd, ibv_qp, ibv_srq};
use crate::abi::ucma::UverbsQpAttr;
use nix::errno::Errno;
use super::cancel::NoCancel;
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};

pub use crate::abi::verbs::*;

pub mod data;

/// `struct ibv_device` (opaque).
#[repr(C)]
pub struct ibv_device {
    _private: [u8; 0],
}

/// The declaration of the libibverbs functions and C shim functions the
/// connection manager calls (the data path's are in [`data`]); kept out
/// of the generated header.
/// cbindgen:ignore
mod sys {
    use super::{ibv_device, Ece, QpAttr, QpInitAttrEx, SrqInitAttrEx};
    use crate::abi::cma::{ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_pd, ibv_qp, ibv_srq};
    use crate::abi::ucma::UverbsQpAttr;
    use std::ffi::{c_int, c_void};
    extern "C" {
        pub fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
        pub fn ibv_free_device_list(list: *mut *mut ibv_device);
        pub fn ibv_get_device_guid(dev: *mut ibv_device) -> u64;
        pub fn ibv_get_device_index(dev: *mut ibv_device) -> c_int;
        pub fn ibv_get_device_name(dev: *mut ibv_device) -> *const std::ffi::c_char;
        pub fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
        pub fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
        pub fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
        pub fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
        pub fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
        pub fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut QpAttr, mask: c_int) -> c_int;
        pub fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
        pub fn ibv_create_cq(ctx: *mut ibv_context, cqe: c_int, cq_context: *mut c_void, channel: *mut ibv_comp_channel, comp_vector: c_int) -> *mut ibv_cq;
        pub fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
        pub fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel;
        pub fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int;
        pub fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
        pub fn ibv_copy_qp_attr_from_kern(dst: *mut QpAttr, src: *const UverbsQpAttr);
        pub fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut Ece) -> c_int;
        pub fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut Ece) -> c_int;
        pub fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int;
        pub fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
        pub fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
        pub fn rdmacm_shim_create_qp_ex(ctx: *mut ibv_context, attr: *mut QpInitAttrEx) -> *mut ibv_qp;
        pub fn rdmacm_shim_create_srq_ex(ctx: *mut ibv_context, attr: *mut SrqInitAttrEx) -> *mut ibv_srq;
        pub fn rdmacm_shim_open_xrcd(ctx: *mut ibv_context) -> *mut c_void;
        pub fn rdmacm_shim_close_xrcd(xrcd: *mut c_void) -> c_int;
        pub fn rdmacm_shim_cm_device_caps(ctx: *mut ibv_context, caps: *mut c_int) -> c_int;
        pub fn rdmacm_shim_cm_link_layer(ctx: *mut ibv_context, port: u8) -> c_int;
        pub fn rdmacm_shim_phys_port_cnt(ctx: *mut ibv_context) -> c_int;
        pub fn rdmacm_shim_port_ib_active(ctx: *mut ibv_context, port: u8) -> c_int;
        pub fn rdmacm_shim_port_active_mtu(ctx: *mut ibv_context, port: u8) -> c_int;
        pub fn rdmacm_shim_conn_layout(out: *mut usize, n: usize) -> usize;
        pub fn rdmacm_shim_context_device(ctx: *mut ibv_context) -> *mut ibv_device;
    }
}

pub use super::{errno_of, last_errno};

/// A libibverbs `int` result as a `Result` (0 is success; see
/// [`errno_of`] for the error).
pub fn check(ret: c_int) -> Result<(), Errno> {
    if ret == 0 {
        Ok(())
    } else {
        Err(errno_of(ret))
    }
}

/// Like [`check`], but EOPNOTSUPP counts as success (ECE calls on
/// providers without ECE).
fn check_ece(ret: c_int) -> Result<(), Errno> {
    if ret == libc::EOPNOTSUPP {
        Ok(())
    } else {
        check(ret)
    }
}

/// A NULL result of a libibverbs constructor: its errno ([`errno_of`]).
fn null_err() -> Errno {
    last_errno()
}

/// # Safety
/// `qp` must be a live QP.
pub unsafe fn modify_qp(qp: *mut ibv_qp, attr: &mut QpAttr, mask: c_int) -> Result<(), Errno> {
    // SAFETY: qp is live; attr is a full ibv_qp_attr.
    check(unsafe { sys::ibv_modify_qp(qp, attr, mask) })
}

/// Moves a QP to `state` with only the state in the mask.
///
/// # Safety
/// `qp` must be a live QP.
pub unsafe fn modify_state(qp: *mut ibv_qp, state: u32) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: state, ..Default::default() };
    // SAFETY: forwarded contract.
    unsafe { modify_qp(qp, &mut a, IBV_QP_STATE) }
}

/// # Safety
/// `qp` must be a live QP; it is destroyed.
#[inline]
pub unsafe fn destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sys::ibv_destroy_qp(qp) }
}

/// # Safety
/// `ctx` must be an open device; `attr` a valid attribute set.
pub unsafe fn create_qp_ex(ctx: *mut ibv_context, attr: &mut QpInitAttrEx) -> Result<*mut ibv_qp, Errno> {
    // SAFETY: forwarded contract.
    let qp = unsafe { sys::rdmacm_shim_create_qp_ex(ctx, attr) };
    if qp.is_null() {
        Err(null_err())
    } else {
        Ok(qp)
    }
}

/// # Safety
/// `ctx` must be an open device; `attr` a valid attribute set.
pub unsafe fn create_srq_ex(ctx: *mut ibv_context, attr: &mut SrqInitAttrEx) -> Result<*mut ibv_srq, Errno> {
    // SAFETY: forwarded contract.
    let srq = unsafe { sys::rdmacm_shim_create_srq_ex(ctx, attr) };
    if srq.is_null() {
        Err(null_err())
    } else {
        Ok(srq)
    }
}

/// # Safety
/// `srq` must be a live SRQ (or NULL, which libibverbs rejects).
pub unsafe fn destroy_srq(srq: *mut ibv_srq) {
    if !srq.is_null() {
        // SAFETY: forwarded contract.
        unsafe { sys::ibv_destroy_srq(srq) };
    }
}

/// # Safety
/// `ctx` must be an open device.
pub unsafe fn create_comp_channel(ctx: *mut ibv_context) -> Result<*mut ibv_comp_channel, Errno> {
    // SAFETY: forwarded contract.
    let ch = unsafe { sys::ibv_create_comp_channel(ctx) };
    if ch.is_null() {
        Err(null_err())
    } else {
        Ok(ch)
    }
}

/// # Safety
/// `ch` must be a live completion channel without CQs.
#[inline]
pub unsafe fn destroy_comp_channel(ch: *mut ibv_comp_channel) {
    // SAFETY: forwarded contract.
    unsafe { sys::ibv_destroy_comp_channel(ch) };
}

/// # Safety
/// `ctx` must be an open device, `ch` a completion channel of it.
pub unsafe fn create_cq(ctx: *mut ibv_context, cqe: u32, cq_context: *mut c_void, ch: *mut ibv_comp_channel) -> Result<*mut ibv_cq, Errno> {
    // SAFETY: forwarded contract.
    let cq = unsafe { sys::ibv_create_cq(ctx, cqe.min(i32::MAX as u32) as c_int, cq_context, ch, 0) };
    if cq.is_null() {
        Err(null_err())
    } else {
        Ok(cq)
    }
}

/// # Safety
/// `cq` must be a live CQ no QP uses.
#[inline]
pub unsafe fn destroy_cq(cq: *mut ibv_cq) {
    // SAFETY: forwarded contract.
    unsafe { sys::ibv_destroy_cq(cq) };
}

/// Converts the kernel's answer to INIT_QP_ATTR into `dst` (fields the
/// kernel does not report are left as they are).  In line: a call of a
/// Rust function another crate cannot see into would keep the C API's
/// panic boundary (and its registers) on `rdma_init_qp_attr`'s path.
#[inline]
pub fn copy_qp_attr_from_kern(dst: &mut QpAttr, k: &UverbsQpAttr) {
    // SAFETY: both are valid, distinct, fully initialised structures.
    unsafe { sys::ibv_copy_qp_attr_from_kern(dst, k) };
}

/// # Safety
/// `qp` must be a live QP.
pub unsafe fn query_ece(qp: *mut ibv_qp) -> Result<(Ece, bool), Errno> {
    let mut e = Ece::default();
    // SAFETY: qp is live; e is writable.
    let r = unsafe { sys::ibv_query_ece(qp, &mut e) };
    check_ece(r)?;
    Ok((e, r == libc::EOPNOTSUPP))
}

/// # Safety
/// `qp` must be a live QP.
pub unsafe fn set_ece(qp: *mut ibv_qp, mut e: Ece) -> Result<(), Errno> {
    // SAFETY: qp is live; e is readable.
    check_ece(unsafe { sys::ibv_set_ece(qp, &mut e) })
}

/// Whether the verbs context `ctx` names a device (zeroed memory does
/// not): the one check possible on a context the caller vouches for.
///
/// # Safety
/// `ctx` must point to a readable `struct ibv_context`.
pub unsafe fn context_has_device(ctx: *mut ibv_context) -> bool {
    // SAFETY: forwarded contract; only the device pointer is read.
    !unsafe { sys::rdmacm_shim_context_device(ctx) }.is_null()
}

/// The name of the device of context `ctx` (`rxe0`), None for a context
/// without a device.
///
/// # Safety
/// `ctx` must point to a readable `struct ibv_context` (an open device).
pub unsafe fn device_name(ctx: *mut ibv_context) -> Option<String> {
    // SAFETY: forwarded contract; only the device pointer is read.
    let dev = unsafe { sys::rdmacm_shim_context_device(ctx) };
    if dev.is_null() {
        return None;
    }
    // SAFETY: dev is the context's device, which lives as long as the
    // context; its name is a NUL-terminated array inside it.
    let n = unsafe { sys::ibv_get_device_name(dev) };
    if n.is_null() {
        return None;
    }
    // SAFETY: as above.
    Some(unsafe { std::ffi::CStr::from_ptr(n) }.to_string_lossy().into_owned())
}

/// # Safety
/// `ctx` must be an open device.
pub unsafe fn pkey_index(ctx: *mut ibv_context, port: u8, pkey_be: u16) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sys::ibv_get_pkey_index(ctx, port, pkey_be) }
}

/// # Safety
/// `qp` must be a live QP.
pub unsafe fn attach_mcast(qp: *mut ibv_qp, gid: &ibv_gid, lid: u16) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    check(unsafe { sys::ibv_attach_mcast(qp, gid, lid) })
}

/// # Safety
/// `qp` must be a live QP.
pub unsafe fn detach_mcast(qp: *mut ibv_qp, gid: &ibv_gid, lid: u16) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sys::ibv_detach_mcast(qp, gid, lid) }
}

/// An XRC domain for the device (`fd` -1, `O_CREAT`), or NULL.
///
/// # Safety
/// `ctx` must be an open device.
pub unsafe fn open_xrcd(ctx: *mut ibv_context) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { sys::rdmacm_shim_open_xrcd(ctx) }
}

/// Closes an XRC domain from [`open_xrcd`].
///
/// # Safety
/// `xrcd` must come from [`open_xrcd`] and be closed once.
pub unsafe fn close_xrcd(xrcd: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { sys::rdmacm_shim_close_xrcd(xrcd) };
}

/// The device's transport type (`IBV_TRANSPORT_*`), -1 for NULL.
///
/// # Safety
/// `ctx` must be NULL or an open device.
pub unsafe fn transport_type(ctx: *mut ibv_context) -> c_int {
    if ctx.is_null() {
        return -1;
    }
    // SAFETY: an open context's first field is its device, whose transport
    // type follows its two operation pointers (the stable part of both
    // structures in <infiniband/verbs.h>: `ContextHead`, `DeviceHead`,
    // checked against the header by `c_layout`); read in place, as C does.
    unsafe { (*(*(ctx as *mut ContextHead)).device).transport_type }
}

/// The QP number of a live QP.
///
/// # Safety
/// `qp` must be a live QP.
pub unsafe fn qp_num(qp: *mut ibv_qp) -> u32 {
    // SAFETY: the leading fields of struct ibv_qp are stable ABI.
    unsafe { (*(qp as *mut QpHead)).qp_num }
}

/// Whether a live QP has an SRQ, and its PD.
///
/// # Safety
/// `qp` must be a live QP.
pub unsafe fn qp_srq_pd(qp: *mut ibv_qp) -> (bool, *mut ibv_pd) {
    // SAFETY: the leading fields of struct ibv_qp are stable ABI.
    unsafe { (!(*(qp as *mut QpHead)).srq.is_null(), (*(qp as *mut QpHead)).pd) }
}

/// The device context of a PD.
///
/// # Safety
/// `pd` must be a live PD.
pub unsafe fn pd_context(pd: *mut ibv_pd) -> *mut ibv_context {
    // SAFETY: the first field of struct ibv_pd is its context.
    unsafe { (*(pd as *mut PdHead)).context }
}

/// Sizes and offsets measured by the C shim from `<infiniband/verbs.h>`,
/// in the order of [`rust_layout`].
pub fn c_layout() -> Vec<usize> {
    let mut v = vec![0usize; 64];
    // SAFETY: v has room for 64 values.
    let n = unsafe { sys::rdmacm_shim_conn_layout(v.as_mut_ptr(), v.len()) };
    v.truncate(n);
    v
}

/// The same sizes and offsets from the mirrors above.
pub fn rust_layout() -> Vec<usize> {
    use std::mem::{offset_of, size_of};
    vec![
        size_of::<QpInitAttr>(),
        offset_of!(QpInitAttr, cap),
        offset_of!(QpInitAttr, qp_type),
        size_of::<QpInitAttrEx>(),
        offset_of!(QpInitAttrEx, comp_mask),
        offset_of!(QpInitAttrEx, pd),
        offset_of!(QpInitAttrEx, xrcd),
        offset_of!(QpInitAttrEx, source_qpn),
        offset_of!(QpInitAttrEx, send_ops_flags),
        size_of::<SrqInitAttr>(),
        size_of::<SrqInitAttrEx>(),
        offset_of!(SrqInitAttrEx, comp_mask),
        offset_of!(SrqInitAttrEx, srq_type),
        offset_of!(SrqInitAttrEx, pd),
        offset_of!(SrqInitAttrEx, xrcd),
        offset_of!(SrqInitAttrEx, cq),
        offset_of!(QpHead, pd),
        offset_of!(QpHead, srq),
        offset_of!(QpHead, qp_num),
        size_of::<QpAttr>(),
        offset_of!(QpAttr, cap),
        offset_of!(QpAttr, ah_attr),
        offset_of!(QpAttr, pkey_index),
        offset_of!(QpAttr, max_rd_atomic),
        offset_of!(QpAttr, max_dest_rd_atomic),
        offset_of!(QpAttr, port_num),
        offset_of!(QpAttr, rate_limit),
        size_of::<Ece>(),
        offset_of!(DeviceHead, transport_type),
        offset_of!(ContextHead, device),
        offset_of!(ContextHead, ops) + offset_of!(ContextOps, poll_cq),
        offset_of!(ContextHead, ops) + offset_of!(ContextOps, req_notify_cq),
        offset_of!(ContextHead, ops) + offset_of!(ContextOps, post_send),
        offset_of!(ContextHead, ops) + offset_of!(ContextOps, post_recv),
        offset_of!(CqHead, context),
        size_of::<IbvWc>(),
        offset_of!(IbvWc, imm_data),
        offset_of!(IbvWc, wc_flags),
        offset_of!(IbvWc, slid),
        offset_of!(IbvWc, dlid_path_bits),
        size_of::<IbvSendWr>(),
        offset_of!(IbvSendWr, imm_data),
        offset_of!(IbvSendWr, remote_addr),
        offset_of!(IbvSendWr, rkey),
        offset_of!(IbvSendWr, remote_srqn),
        size_of::<IbvRecvWr>(),
        offset_of!(IbvRecvWr, num_sge),
    ]
}

// --- devices ------------------------------------------------------------------

/// libibverbs' device list (`ibv_get_device_list`), freed on drop: the
/// one place the library enumerates devices.
pub struct DeviceList {
    list: *mut *mut ibv_device,
    n: usize,
}

// SAFETY: the list and its devices are libibverbs objects usable from any
// thread; the array is only read.
unsafe impl Send for DeviceList {}

impl DeviceList {
    /// The current list; ENODEV when libibverbs has none.
    pub fn get() -> Result<DeviceList, Errno> {
        let mut n: c_int = 0;
        // SAFETY: n is writable; the result is NULL or a NULL-terminated
        // array of n devices.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(Errno::ENODEV);
        }
        Ok(DeviceList { list, n: n.max(0) as usize })
    }

    /// The devices, in libibverbs' order (valid while the list lives).
    pub fn devices(&self) -> Vec<*mut ibv_device> {
        // SAFETY: the array holds n entries then NULL; we stop at either.
        (0..self.n).map(|i| unsafe { *self.list.add(i) }).take_while(|d| !d.is_null()).collect()
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: list came from ibv_get_device_list and is freed once;
        // devices opened meanwhile stay valid (libibverbs counts them).
        unsafe { sys::ibv_free_device_list(self.list) };
    }
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

/// The system libibverbs.
#[derive(Default)]
pub struct SysVerbs {
    /// The list returned last (holds references on its devices).
    list: Mutex<Option<DeviceList>>,
}

// Each call runs with cancellation disabled: libibverbs makes system calls
// that are cancellation points (open, read, write, close), and these run
// on paths without the exports' guard (sys::cancel).
impl Verbs for SysVerbs {
    fn device_list(&self) -> Result<Vec<DevEntry>, Errno> {
        let _nc = NoCancel::new();
        let list = DeviceList::get()?;
        let out = list
            .devices()
            .into_iter()
            .map(|dev| {
                // SAFETY: dev is a live entry of the list.
                let (guid, index) = unsafe { (sys::ibv_get_device_guid(dev), sys::ibv_get_device_index(dev)) };
                DevEntry { dev: dev as usize, guid, index }
            })
            .collect();
        // The previous list is freed; devices still present are referenced
        // by the new one.
        *self.list.lock() = Some(list);
        Ok(out)
    }

    fn open(&self, dev: usize) -> Result<OpenInfo, Errno> {
        let _nc = NoCancel::new();
        // SAFETY: dev is an entry of the list we hold.
        let ctx = unsafe { sys::ibv_open_device(dev as *mut ibv_device) };
        if ctx.is_null() {
            return Err(Errno::ENODEV);
        }
        let mut caps = [0 as c_int; 4];
        // SAFETY: ctx is open; caps has room for the 4 values written.
        let r = unsafe { sys::rdmacm_shim_cm_device_caps(ctx, caps.as_mut_ptr()) };
        if r != 0 {
            // SAFETY: ctx was opened above.
            unsafe { sys::ibv_close_device(ctx) };
            return Err(errno_of(r));
        }
        let ports = caps[0].clamp(0, 255);
        let link_layers = (1..=ports)
            .map(|p| {
                // SAFETY: ctx is open; p is a valid port number.
                let ll = unsafe { sys::rdmacm_shim_cm_link_layer(ctx, p as u8) };
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
        let _nc = NoCancel::new();
        // SAFETY: ctx was opened by open() and is closed once.
        unsafe { sys::ibv_close_device(ctx as *mut ibv_context) };
    }

    fn alloc_pd(&self, ctx: usize) -> Result<usize, Errno> {
        let _nc = NoCancel::new();
        // SAFETY: ctx is an open context.
        let pd = unsafe { sys::ibv_alloc_pd(ctx as *mut ibv_context) };
        if pd.is_null() {
            Err(last_errno())
        } else {
            Ok(pd as usize)
        }
    }

    fn dealloc_pd(&self, pd: usize) {
        let _nc = NoCancel::new();
        // SAFETY: pd came from alloc_pd and is released once.
        unsafe { sys::ibv_dealloc_pd(pd as *mut ibv_pd) };
    }

    fn transport_is_ib(&self, ctx: usize) -> bool {
        if ctx == 0 {
            return false;
        }
        // SAFETY: ctx is an open context.
        unsafe { transport_type(ctx as *mut ibv_context) == IBV_TRANSPORT_IB }
    }

    fn close_xrcd(&self, xrcd: usize) {
        let _nc = NoCancel::new();
        // SAFETY: xrcd came from ibv_open_xrcd and is closed once.
        unsafe { sys::rdmacm_shim_close_xrcd(xrcd as *mut std::ffi::c_void) };
    }
}

/// GID index 0 of every port whose link layer is InfiniBand and whose state
/// is ACTIVE or better, in device-list then port order (each device is
/// opened for the walk and closed again).
pub fn ib_active_port_gids() -> Vec<[u8; 16]> {
    let _nc = NoCancel::new();
    let mut out = Vec::new();
    let Ok(list) = DeviceList::get() else { return out };
    for dev in list.devices() {
        // SAFETY: dev comes from the live device list.
        let ctx = unsafe { sys::ibv_open_device(dev) };
        if ctx.is_null() {
            continue;
        }
        // SAFETY: ctx is an open context.
        let ports = unsafe { sys::rdmacm_shim_phys_port_cnt(ctx) };
        for p in 1..=ports.clamp(0, 255) {
            // SAFETY: ctx is open; p is a port number.
            if unsafe { sys::rdmacm_shim_port_ib_active(ctx, p as u8) } != 1 {
                continue;
            }
            let mut gid = ibv_gid { raw: [0; 16] };
            // SAFETY: ctx is open, gid is writable.
            if unsafe { sys::ibv_query_gid(ctx, p as u8, 0, &mut gid) } == 0 {
                // SAFETY: every bit pattern of the union is valid.
                out.push(unsafe { gid.raw });
            }
        }
        // SAFETY: ctx was opened above and is not used afterwards.
        unsafe { sys::ibv_close_device(ctx) };
    }
    out
}

/// Imports of src/sys/gid_shim.c (libibverbs' port and device queries
/// that ibv_gid_reachable needs, some static inline in the header).
/// cbindgen:ignore
mod gid_shim {
    use crate::abi::cma::{ibv_context, ibv_gid};
    use std::ffi::c_int;

    extern "C" {
        pub(super) fn rdmacm_gid_port_count(ctx: *mut ibv_context, err: *mut c_int) -> c_int;
        pub(super) fn rdmacm_gid_port_info(ctx: *mut ibv_context, port: u8, state: *mut u32, ll: *mut u8) -> c_int;
        pub(super) fn rdmacm_gid_node_guid(ctx: *mut ibv_context) -> u64;
        pub(super) fn rdmacm_gid_ndev_ifindex(ctx: *mut ibv_context, port: u8, index: u32) -> u32;
        pub(super) fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
    }
}

/// The 16 bytes of a GID.
pub fn gid_bytes(g: &ibv_gid) -> [u8; 16] {
    // SAFETY: every member of the union is 16 bytes of plain data; any bit
    // pattern is a valid byte array.
    unsafe { g.raw }
}

/// The number of physical ports of a device.
///
/// # Safety
/// `ctx` must be an open device context.
pub unsafe fn port_count(ctx: *mut ibv_context) -> Result<u8, Errno> {
    let mut err = 0;
    // SAFETY: ctx is open (contract); err is a valid out-pointer.
    let n = unsafe { gid_shim::rdmacm_gid_port_count(ctx, &mut err) };
    if n < 0 {
        return Err(super::errno_from_raw(err));
    }
    Ok(n.clamp(0, 255) as u8)
}

/// A port's state and link layer.
///
/// # Safety
/// `ctx` must be an open device context.
pub unsafe fn port_state(ctx: *mut ibv_context, port: u8) -> Result<(u32, u8), Errno> {
    let (mut state, mut link_layer) = (0u32, 0u8);
    // SAFETY: ctx is open (contract); valid out-pointers.
    let r = unsafe { gid_shim::rdmacm_gid_port_info(ctx, port, &mut state, &mut link_layer) };
    if r != 0 {
        return Err(super::errno_from_raw(r));
    }
    Ok((state, link_layer))
}

/// A port's active MTU in bytes (`ibv_query_port`'s `active_mtu`).
///
/// # Safety
/// `ctx` must be an open device context.
pub unsafe fn port_active_mtu(ctx: *mut ibv_context, port: u8) -> Result<u32, Errno> {
    // SAFETY: ctx is open (contract); the shim queries one port.
    let m = unsafe { sys::rdmacm_shim_port_active_mtu(ctx, port) };
    match m {
        1..=5 => Ok(1 << (m + 7)),
        m if m < 0 => Err(super::errno_from_raw(-m)),
        _ => Err(Errno::EINVAL),
    }
}

/// A device's node GUID (as libibverbs stores it).
///
/// # Safety
/// `ctx` must be an open device context.
pub unsafe fn node_guid(ctx: *mut ibv_context) -> u64 {
    // SAFETY: ctx is open (contract).
    unsafe { gid_shim::rdmacm_gid_node_guid(ctx) }
}

/// The interface index of the network device behind a port's GID index
/// `index` (0 when unknown).
///
/// # Safety
/// `ctx` must be an open device context.
pub unsafe fn ndev_ifindex(ctx: *mut ibv_context, port: u8, index: u32) -> u32 {
    // SAFETY: ctx is open (contract); an invalid index only yields 0.
    unsafe { gid_shim::rdmacm_gid_ndev_ifindex(ctx, port, index) }
}

/// GID `index` of a port, or EIO.
///
/// # Safety
/// `ctx` must be an open device context.
pub unsafe fn query_gid(ctx: *mut ibv_context, port: u8, index: c_int) -> Result<[u8; 16], Errno> {
    let mut gid = crate::abi::cma::ibv_gid { raw: [0; 16] };
    // SAFETY: ctx is open (contract); gid is writable.
    if unsafe { gid_shim::ibv_query_gid(ctx, port, index, &mut gid) } != 0 {
        return Err(Errno::EIO);
    }
    // SAFETY: every bit pattern of the union is valid.
    Ok(unsafe { gid.raw })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_match_the_installed_header() {
        assert_eq!(rust_layout(), c_layout());
    }

    #[test]
    fn verbs_error_convention() {
        assert!(check(0).is_ok());
        assert_eq!(check(libc::EINVAL).unwrap_err(), Errno::EINVAL);
        // A negative result means "see errno"; unset errno reads as EIO.
        Errno::set_raw(libc::ENOMEM);
        assert_eq!(check(-1).unwrap_err(), Errno::ENOMEM);
        Errno::set_raw(0);
        assert_eq!(check(-1).unwrap_err(), Errno::EIO);
        assert_eq!(null_err(), Errno::EIO);
        assert!(check_ece(libc::EOPNOTSUPP).is_ok());
    }
}
