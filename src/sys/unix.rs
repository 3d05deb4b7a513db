// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Small POSIX calls std has no safe form for: a socket send that never
//! raises SIGPIPE (std's `UnixStream` writes with write(2), and a library
//! must not kill a C program whose peer went away), a socket receive, a
//! file's existence in one system call, and `secure_getenv(3)`.

use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

/// `send(fd, buf, MSG_NOSIGNAL)`: the number of bytes sent.
pub fn send_nosignal(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: fd is an open descriptor for the borrow; buf is readable for
    // its length.
    let n = unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `recv(fd, buf, 0)`: the number of bytes received (0 at end of stream).
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: fd is an open descriptor for the borrow; buf is writable for
    // its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Whether `path` names an existing file, following symbolic links (as
/// `Path::exists`): one stat(2) and no allocation, where std's first `statx`
/// that fails in a process makes a second call to probe whether `statx`
/// exists at all.
pub fn path_exists(path: &CStr) -> bool {
    // SAFETY: an all-zero stat is a valid output buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is a valid output buffer.
    unsafe { libc::stat(path.as_ptr(), &mut st) == 0 }
}

/// The first bytes of the file `path` names, read into `buf` by one
/// read(2) (open, read, close; no allocation): how many, or None when the
/// file cannot be opened or read.
pub fn read_head(path: &CStr, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is open; buf is writable for its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    usize::try_from(n).ok()
}

/// `secure_getenv(name)`: the variable's value, or None when it is unset or
/// the process runs setuid/setgid (glibc then hides the environment).
pub fn secure_getenv(name: &CStr) -> Option<OsString> {
    // Under Miri (unit tests only) the environment reads as empty.
    #[cfg(miri)]
    if !name.is_empty() {
        return None;
    }
    extern "C" {
        fn secure_getenv(name: *const std::ffi::c_char) -> *mut std::ffi::c_char;
    }
    // SAFETY: name is NUL-terminated; the result is NULL or a NUL-terminated
    // environment string, copied at once (before anything could change the
    // environment from this thread).
    unsafe {
        let v = secure_getenv(name.as_ptr());
        (!v.is_null()).then(|| std::ffi::OsStr::from_bytes(CStr::from_ptr(v).to_bytes()).to_os_string())
    }
}

/// Whether a blocking call interrupted by a signal handler should be
/// restarted, as the kernel restarts a read(2) when the handler was
/// installed with `SA_RESTART` (poll(2) is never restarted, so a wait built
/// on it must decide itself). Which signal interrupted is not known here:
/// true when every signal that has a handler has `SA_RESTART` (the usual
/// program installs one handler, or all alike), false when any lacks it.
pub fn handlers_restart() -> bool {
    let mut any = false;
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: a query only (act NULL); old is a writable sigaction.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above; sig is in range (an invalid one fails with EINVAL).
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            continue;
        }
        if old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN {
            continue;
        }
        if old.sa_flags & libc::SA_RESTART == 0 {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn path_exists_as_std() {
        let dir = std::env::temp_dir().join(format!("rdmacm-exists-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        std::fs::write(&f, b"x").unwrap();
        std::os::unix::fs::symlink(dir.join("none"), dir.join("dangling")).unwrap();
        std::os::unix::fs::symlink(&f, dir.join("link")).unwrap();
        for (p, want) in [(dir.clone(), true), (f.clone(), true), (dir.join("link"), true), (dir.join("none"), false), (dir.join("dangling"), false), (dir.join("f/under"), false)] {
            let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
            assert_eq!(path_exists(&c), want, "{}", p.display());
            assert_eq!(path_exists(&c), p.exists(), "as Path::exists: {}", p.display());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn send_recv_and_closed_peer() {
        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(send_nosignal(a.as_fd(), b"hello").unwrap(), 5);
        let mut buf = [0u8; 16];
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        // (shut down rather than closed: a child another test forks may
        // hold a copy of b's descriptor until it execs, keeping the socket
        // open)
        b.shutdown(std::net::Shutdown::Read).unwrap();
        // EPIPE, not a signal.
        let e = send_nosignal(a.as_fd(), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn getenv() {
        assert!(secure_getenv(c"PATH").is_some());
        assert!(secure_getenv(c"RDMACM_RS_SURELY_UNSET_VARIABLE").is_none());
    }
}
