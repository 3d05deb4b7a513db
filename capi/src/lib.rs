// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdmacm-rs's C API: `librdmacm.so.1` (and `librdmacm.a`), the exports of
//! rdma-core's librdmacm and `ibv_gid_reachable` over the `rdmacm` crate.
//!
//! The C boundary.
//!
//! Every exported function follows one pattern:
//!
//! ```ignore
//! /// What it does (this text ends up in the generated header).
//! #[no_mangle]
//! pub unsafe extern "C-unwind" fn rdma_example(id: *mut rdma_cm_id) -> c_int {
//!     ffi::entry(|| {
//!         let id = ffi::nonnull(id)?;           // NULL -> EINVAL
//!         core::something(id)                   // Result<c_int, Errno>
//!     })
//! }
//! symver!(rdma_example, "RDMACM_1.0");
//! ```
//!
//! * The function is written out in full (no macro around it) so that
//!   cbindgen can read its signature.
//! * [`symver!`] binds it to its upstream version node.
//! * [`entry`] is the panic boundary and the errno convention: the body
//!   returns `Result<R, Errno>`; `Err(e)` sets `errno = e` and returns the
//!   C error value of `R` (-1, NULL, 0 or nothing); a panic never unwinds
//!   into C: it is caught, logged (when logging is on) and reported as
//!   `EIO`.
//! * Functions not implemented yet call [`not_implemented`] (errno
//!   `ENOSYS`); the compatibility table (docs/compatibility.md) lists exactly those.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)]

use std::ffi::c_int;
use rdmacm::internal::sys::cancel::{self, NoCancel};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

pub use nix::errno::Errno;

/// The C library's allocator: libc's `malloc` family, with the block
/// `rdmacm`'s fallible `Arc`/`Box` allocation parks for std's next request
/// (`rdmacm::internal::sys::alloc`), so that a failed allocation on the
/// library's paths is ENOMEM and never an abort of the host program.
/// Declared here, in the crate of librdmacm.so.1 and librdmacm.a, and not
/// in `rdmacm`: a Rust program keeps the allocator it chooses.
#[global_allocator]
static GLOBAL: rdmacm::internal::sys::alloc::Alloc = rdmacm::internal::sys::alloc::Alloc;

// The stubs of not-yet-implemented functions name their parameters without
// using them; each module drops this allow once it is complete.
pub mod addrinfo;
pub mod cm;
pub mod conn;
pub mod gid;
pub mod mcast;
pub mod qp;
#[allow(unused_variables)]
pub mod rsocket;


/// Binds an exported function to a symbol version node.
///
/// `symver!(f, "RDMACM_1.0")` makes `f@@RDMACM_1.0` the default version of
/// `f`.  Only applied when building the shared library with the `symver`
/// feature (unit tests and fuzz targets link the rlib without nodes).
#[macro_export]
macro_rules! symver {
    ($name:ident, $ver:literal) => {
        #[cfg(all(feature = "symver", not(test)))]
        ::std::arch::global_asm!(concat!(
            ".symver ",
            stringify!($name),
            ", ",
            stringify!($name),
            "@@",
            $ver
        ));
    };
}

/// The value a C function returns on failure.
pub trait FfiError {
    /// -1 for `int`/`ssize_t`/`off_t`, NULL for pointers, nothing for void.
    fn error_value() -> Self;
}

macro_rules! minus_one {
    ($($t:ty),*) => { $(impl FfiError for $t { fn error_value() -> Self { -1 } })* };
}
minus_one!(i32, i64, isize);

impl FfiError for usize {
    /// `riowrite` returns `size_t`; upstream returns `(size_t) -1` on error.
    fn error_value() -> Self {
        usize::MAX
    }
}
impl FfiError for u16 {
    /// `rdma_get_src_port`/`rdma_get_dst_port` return port 0 on error.
    fn error_value() -> Self {
        0
    }
}
impl FfiError for () {
    fn error_value() -> Self {}
}
impl<T> FfiError for *mut T {
    fn error_value() -> Self {
        std::ptr::null_mut()
    }
}
impl<T> FfiError for *const T {
    fn error_value() -> Self {
        std::ptr::null()
    }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: Errno) {
    Errno::set_raw(e as i32);
}

/// Whether `p` points into this shared object (its code or read-only data).
#[cfg_attr(test, allow(dead_code))]
fn in_this_object(p: *const u8) -> bool {
    // SAFETY: dladdr only reads the loader's tables; both pointers are
    // plain addresses and Dl_info is a plain output struct.
    unsafe {
        let mut ours: libc::Dl_info = std::mem::zeroed();
        let mut theirs: libc::Dl_info = std::mem::zeroed();
        libc::dladdr(in_this_object as *const libc::c_void, &mut ours) != 0
            && libc::dladdr(p.cast(), &mut theirs) != 0
            && ours.dli_fbase == theirs.dli_fbase
    }
}

/// One-time set-up shared by every export: the logger (if RDMACM_RS_LOG
/// asks for one) and a panic hook that keeps panics raised by our code off
/// stderr (they are reported through errno and, when logging is on, the
/// log).  A panic's location string lives in the object whose code
/// panicked (std included, as it is linked into this library), which tells
/// ours from the host program's: those go to the previous hook.  Nothing of
/// this runs on the normal path but one atomic load.
fn init_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // (the log file's open is a cancellation point)
        let _nc = NoCancel::new();
        rdmacm::internal::logging::init(rdmacm::internal::sys::env::var, rdmacm::internal::sys::env::open_log_file, cancel::shield);
        // Unit tests link everything into one object: keep their panic
        // messages (test failures) visible.
        #[cfg(not(test))]
        install_panic_hook();
    });
}

#[cfg(not(test))]
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.location().is_some_and(|l| in_this_object(l.file().as_ptr())) {
            log::error!(target: "rdmacm", "panic inside librdmacm: {info}");
        } else {
            previous(info);
        }
    }));
}

/// The boundary every export runs its body through: panic boundary,
/// errno convention and C's thread model.
///
/// * The body runs with cancellation disabled ([`NoCancel`]): no
///   cancellation point inside it acts, but for the library's blocking
///   waits, which act on a cancellation in the state the caller had and
///   return ECANCELED instead of unwinding ([`rdmacm::internal::sys::cancel`]).
/// * It runs under `catch_unwind`: a panic (a bug) never crosses into C;
///   it becomes EIO and the C error value.
/// * Once the body has returned (every lock, guard and registration of
///   ours released), a cancellation or thread exit a wait caught is
///   handed on from the export's own frame, which then holds nothing with
///   a destructor: the only Rust frame the forced unwind crosses, and one
///   of an `extern "C-unwind"` function (RFC 2945: forced unwinding may
///   not cross frames with destructors or `catch_unwind`).
///
/// Inlined into each export so that the hand-on happens in its frame.
#[inline(always)]
pub fn entry<R: FfiError>(body: impl FnOnce() -> Result<R, Errno>) -> R {
    init_once();
    let (r, _) = guarded(true, body);
    if cancel::caught() {
        // SAFETY: `r` is a C value without destructor and `guarded` has
        // returned: this frame is a plain one of an "C-unwind" export.
        unsafe { cancel::resume() }
    }
    r
}

/// [`entry`] without the [`NoCancel`] guard, for the few hot exports
/// (rdma_create_id, rdma_destroy_id, rdma_ack_cm_event,
/// rdma_write_cm_event, rdma_getaddrinfo, rdma_freeaddrinfo, rdma_bind_addr,
/// rdma_init_qp_attr, rdma_resolve_addr, rdma_resolve_route,
/// rdma_connect, rdma_accept, rdma_disconnect) whose paths
/// make no cancellation point of libc: their system calls are
/// [`cancel::raw`] ones, the cold parts (first use, devices, name lookups,
/// the log) take the guard themselves, and their waits are the library's.
/// Two fewer calls into libc per call (the cancellation protocol's instruction budget).
/// Their bodies never ignore a wait's ECANCELED, so only a failed call
/// can carry a caught cancellation: a successful one skips the check.
/// (`rdma_get_cm_event` runs its two parts through [`guarded`] itself,
/// with its wait between them in its own frame: capi/src/cm.rs.)
#[inline(always)]
pub fn entry_hot<R: FfiError>(body: impl FnOnce() -> Result<R, Errno>) -> R {
    init_once();
    entry_hot_on_id(body)
}

/// [`entry_hot`] without `init_once`, for hot exports whose body does
/// nothing but fail with EINVAL unless its argument is a live id: an id
/// exists only once `rdma_create_id` (or another export that makes one)
/// has run `init_once`, so that a body that goes further, and might
/// panic, runs after it.  (One load and branch less per call.)
#[inline(always)]
pub fn entry_hot_on_id<R: FfiError>(body: impl FnOnce() -> Result<R, Errno>) -> R {
    let (r, failed) = guarded(false, body);
    if failed && cancel::caught() {
        // SAFETY: as in `entry`.
        unsafe { cancel::resume() }
    }
    r
}

/// The panic boundary and errno convention (see [`entry`]), with the
/// [`NoCancel`] guard when `nocancel`; the C value and whether the call
/// failed.  (The caller runs [`init_once`] first where it is needed.)
#[inline(always)]
fn guarded<R: FfiError>(nocancel: bool, body: impl FnOnce() -> Result<R, Errno>) -> (R, bool) {
    let _nc = if nocancel { Some(NoCancel::new()) } else { None };
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => (v, false),
        Ok(Err(e)) => {
            failed(e);
            (R::error_value(), true)
        }
        Err(p) => {
            panicked(p);
            (R::error_value(), true)
        }
    }
}

/// errno for a body's error (out of line: the exports' frames keep only
/// what their success path needs).
#[cold]
#[inline(never)]
fn failed(e: Errno) {
    if e == Errno::UnknownErrno {
        // A number Errno has no name for: the kernel's own.
        Errno::set_raw(rdmacm::internal::sys::take_unlisted());
    } else {
        set_errno(e);
    }
}

/// A panic caught at the boundary: logged, EIO (out of line, as [`failed`]).
#[cold]
#[inline(never)]
fn panicked(p: Box<dyn std::any::Any + Send>) {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    log::error!(target: "rdmacm", "internal error (panic caught at the C boundary): {msg}");
    set_errno(Errno::EIO);
}

/// The live id C knows by `id`, held for the call (as `cm::id_of`, in
/// line: no frame of its own, and the id store reached directly, without
/// the CM instance): EINVAL for anything that is not a live id of the
/// library, EIO for one a panic left broken.
#[inline(always)]
pub(crate) fn held_id(id: *mut rdmacm::internal::abi::cma::rdma_cm_id) -> Result<rdmacm::internal::cma::Held, Errno> {
    rdmacm::internal::cma::base::IDS.get(id as usize).ok_or(Errno::EINVAL)?.hold()
}

/// Checks a pointer argument: NULL becomes `EINVAL`.
#[inline]
pub fn nonnull<T>(p: *mut T) -> Result<NonNull<T>, Errno> {
    NonNull::new(p).ok_or(Errno::EINVAL)
}

/// Checks a const pointer argument: NULL becomes `EINVAL`.
#[inline]
pub fn nonnull_const<T>(p: *const T) -> Result<NonNull<T>, Errno> {
    NonNull::new(p as *mut T).ok_or(Errno::EINVAL)
}

/// EMFILE/ENFILE (no descriptor left) as ENOMEM: upstream's errno where
/// one of its allocations that opens a descriptor (a synchronous id's
/// channel, an rsocket's id) fails (fault_fd in the VM test bed).
pub fn fd_exhaustion_as_enomem(e: Errno) -> Errno {
    match e {
        Errno::EMFILE | Errno::ENFILE => Errno::ENOMEM,
        e => e,
    }
}

/// The body of a function that is not implemented yet.
///
/// The compatibility table (docs/compatibility.md) lists every function that calls this;
/// `ctest/check-compat-table.sh` keeps the two in agreement.
#[cold]
pub fn not_implemented<R>(name: &'static str) -> Result<R, Errno> {
    log::debug!(target: "rdmacm", "{name}: not implemented yet (ENOSYS)");
    Err(Errno::ENOSYS)
}

#[allow(dead_code)]
pub(crate) type CInt = c_int;

#[cfg(test)]
mod tests {
    use super::*;

    /// An errno `Errno` cannot name (the kernel's ENOTSUPP, 524) reaches
    /// C as itself (rdmacm's sys::tests::unlisted_errno_values_survive
    /// covers the way there).
    #[test]
    fn unlisted_errno_values_reach_c() {
        let r: i32 = entry(|| Err(rdmacm::internal::sys::errno_of(524)));
        assert_eq!((r, Errno::last_raw()), (-1, 524));
        let r: i32 = entry(|| Err(Errno::ENOENT));
        assert_eq!((r, Errno::last_raw()), (-1, libc::ENOENT));
    }

    #[test]
    fn errors_map_to_c_values() {
        let r: c_int = entry(|| Err(Errno::EINVAL));
        assert_eq!(r, -1);
        assert_eq!(Errno::last(), Errno::EINVAL);
        let p: *mut u8 = entry(|| Err(Errno::ENOMEM));
        assert!(p.is_null());
        assert_eq!(Errno::last(), Errno::ENOMEM);
        let port: u16 = entry(|| Err(Errno::EINVAL));
        assert_eq!(port, 0);
    }

    #[test]
    fn panics_do_not_escape() {
        let r: c_int = entry(|| panic!("boom"));
        assert_eq!(r, -1);
        assert_eq!(Errno::last(), Errno::EIO);
        let p: *mut u8 = entry(|| panic!("{}", String::from("boom")));
        assert!(p.is_null());
    }

    #[test]
    fn panic_locations_are_told_apart_by_object() {
        let ours: &str = file!();
        assert!(in_this_object(ours.as_ptr()), "our own strings are ours");
        assert!(!in_this_object(libc::strlen as *const u8), "libc's code is not");
    }

    #[test]
    fn null_is_einval() {
        assert_eq!(nonnull::<u8>(std::ptr::null_mut()).unwrap_err(), Errno::EINVAL);
    }
}
