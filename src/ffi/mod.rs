// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The C boundary.
//!
//! Every exported function follows one pattern:
//!
//! ```ignore
//! /// What it does (this text ends up in the generated header).
//! #[no_mangle]
//! pub unsafe extern "C" fn rdma_example(id: *mut rdma_cm_id) -> c_int {
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
//!   `ENOSYS`); the README's compatibility table lists exactly those.

use std::cell::Cell;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

pub use nix::errno::Errno;

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
pub mod types;

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

thread_local! {
    /// How many exports this thread is inside (exports may call each other).
    static IN_EXPORT: Cell<u32> = const { Cell::new(0) };
}

/// Installs, once, a panic hook that keeps panics raised inside our exports
/// off stderr (they are reported through errno and, when logging is on,
/// the log).  Panics elsewhere in the process go to the previous hook.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_EXPORT.with(|n| n.get()) > 0 {
                log::error!(target: "rdmacm", "panic inside librdmacm: {info}");
            } else {
                previous(info);
            }
        }));
    });
}

/// Leaves the export count balanced even if the body unwinds.
struct ExportGuard;

impl ExportGuard {
    fn enter() -> ExportGuard {
        IN_EXPORT.with(|n| n.set(n.get() + 1));
        ExportGuard
    }
}

impl Drop for ExportGuard {
    fn drop(&mut self) {
        IN_EXPORT.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// The panic boundary and errno convention shared by every export.
#[inline]
pub fn entry<R: FfiError>(body: impl FnOnce() -> Result<R, Errno>) -> R {
    crate::logging::init();
    install_panic_hook();
    let guard = ExportGuard::enter();
    let result = catch_unwind(AssertUnwindSafe(body));
    drop(guard);
    match result {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            R::error_value()
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            log::error!(target: "rdmacm", "internal error (panic caught at the C boundary): {msg}");
            set_errno(Errno::EIO);
            R::error_value()
        }
    }
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

/// The body of a function that is not implemented yet.
///
/// The README's compatibility table lists every function that calls this;
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
        assert_eq!(IN_EXPORT.with(|n| n.get()), 0);
        let p: *mut u8 = entry(|| panic!("{}", String::from("boom")));
        assert!(p.is_null());
    }

    #[test]
    fn null_is_einval() {
        assert_eq!(nonnull::<u8>(std::ptr::null_mut()).unwrap_err(), Errno::EINVAL);
    }
}
