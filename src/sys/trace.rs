// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The trace file of the connection manager's steps (docs/trace.md): the
//! switch, the clocks, and the one write(2) per line.
//!
//! `RDMACM_RS_TRACE=PREFIX` (read with secure_getenv, like every variable
//! of the library: a setuid, setgid or file-capability program never
//! traces) turns the trace on; each process appends its lines to
//! `PREFIX.PID.jsonl` (a PREFIX naming a directory, ending in `/`, gives
//! `PREFIX/rdmacm.PID.jsonl`).  The file is opened as the diagnostics file
//! is ([`super::env::open_log_file`]: no symbolic link, mode 0600, close on
//! exec), once per process: a child of fork(2) opens its own on its first
//! line.  Each line goes to the kernel in one write(2) on an `O_APPEND`
//! descriptor, as a raw system call (not a cancellation point): lines of
//! the threads of one process never interleave.  Off, [`enabled`] is one
//! relaxed load.

use std::cell::Cell;
use std::ffi::OsString;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, Ordering};

use parking_lot::Mutex;

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The prefix, when on.
static PREFIX: Mutex<Option<OsString>> = Mutex::new(None);
/// The descriptor lines go to (-1: not open yet) and the fork generation
/// of the process that opened it.
static FD: AtomicI32 = AtomicI32::new(-1);
static FD_GEN: AtomicU64 = AtomicU64::new(0);
/// Held only while a process opens its file.
static OPENING: Mutex<()> = Mutex::new(());

/// The longest line written: longer ones are dropped, never split (a
/// write of up to PIPE_BUF bytes to a pipe is atomic too).
pub const MAX_LINE: usize = libc::PIPE_BUF;

/// Whether the trace is on (`RDMACM_RS_TRACE` set, the process not
/// privileged).  One relaxed load once decided.
#[inline]
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => decide(),
    }
}

#[cold]
fn decide() -> bool {
    let v = super::env::var(c"RDMACM_RS_TRACE").filter(|v| !v.is_empty());
    let on = v.is_some();
    *PREFIX.lock() = v;
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
    on
}

/// The file name of process `pid` for `prefix`.
pub fn file_name(prefix: &std::ffi::OsStr, pid: u32) -> OsString {
    let mut s = prefix.to_os_string();
    if s.as_encoded_bytes().ends_with(b"/") {
        s.push("rdmacm");
    }
    s.push(format!(".{pid}.jsonl"));
    s
}

/// This process's descriptor, opened on first use (-1 when it cannot be).
fn fd() -> i32 {
    let g = super::process::generation();
    let fd = FD.load(Ordering::Acquire);
    if fd >= 0 && FD_GEN.load(Ordering::Acquire) == g {
        return fd;
    }
    let _o = OPENING.lock();
    let fd = FD.load(Ordering::Acquire);
    if fd >= 0 && FD_GEN.load(Ordering::Acquire) == g {
        return fd;
    }
    let Some(prefix) = PREFIX.lock().clone() else { return -1 };
    let name = file_name(&prefix, std::process::id());
    match super::env::open_log_file(&name) {
        Ok(f) => {
            // The parent's descriptor, inherited by a child of fork, stays
            // open in the child (closing it could close a descriptor the
            // program reused); it costs one descriptor per fork.
            let nfd = f.into_raw_fd();
            FD_GEN.store(g, Ordering::Release);
            FD.store(nfd, Ordering::Release);
            nfd
        }
        Err(e) => {
            log::warn!(target: "rdmacm", "trace: cannot open {}: {e}; tracing off", name.to_string_lossy());
            STATE.store(OFF, Ordering::Relaxed);
            -1
        }
    }
}

/// Appends one line (a `\n` is added) in one write(2); a line longer than
/// [`MAX_LINE`] or a failed write is dropped.
pub fn write_line(line: &mut Vec<u8>) {
    line.push(b'\n');
    if line.len() > MAX_LINE {
        return;
    }
    let fd = fd();
    if fd < 0 {
        return;
    }
    // SAFETY: line is readable for its length; a raw write(2) (not
    // glibc's wrapper, a cancellation point) on our own descriptor.
    unsafe {
        libc::syscall(libc::SYS_write, fd, line.as_ptr(), line.len());
    }
}

/// (CLOCK_MONOTONIC, CLOCK_REALTIME) in microseconds.
pub fn now_us() -> (u64, u64) {
    (clock_us(libc::CLOCK_MONOTONIC), clock_us(libc::CLOCK_REALTIME))
}

/// CLOCK_MONOTONIC in microseconds.
pub fn mono_us() -> u64 {
    clock_us(libc::CLOCK_MONOTONIC)
}

fn clock_us(c: libc::clockid_t) -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: t is a valid timespec to write.
    unsafe { libc::clock_gettime(c, &mut t) };
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

thread_local! {
    /// The thread's id and the fork generation it was read in.
    static TID: Cell<(u32, u64)> = const { Cell::new((0, 0)) };
}

/// The calling thread's id (gettid(2), read once per thread and again in
/// a child of fork).
pub fn tid() -> u32 {
    let g = super::process::generation();
    TID.with(|t| {
        let (v, vg) = t.get();
        if v != 0 && vg == g {
            return v;
        }
        // SAFETY: gettid has no arguments and cannot fail.
        let v = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        t.set((v, g));
        v
    })
}

/// A key of the calling thread, unique among the process's live threads:
/// cheaper than [`tid`] (no thread-local lookup), for telling whether the
/// thread that holds something is this one.  On x86-64 the thread
/// pointer (the address of the thread's control block, which the ELF TLS
/// ABI keeps at `%fs:0`): one load, no call; elsewhere its pthread_self.
#[inline(always)]
pub fn thread_key() -> usize {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let tp: usize;
        // SAFETY: the x86-64 TLS ABI makes %fs:0 readable in every thread
        // (the control block's pointer to itself); a load, nothing else.
        unsafe { std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, preserves_flags, readonly, pure)) };
        tp
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    // SAFETY: pthread_self has no arguments and cannot fail.
    unsafe {
        libc::pthread_self() as usize
    }
}

/// The process id.
pub fn pid() -> u32 {
    std::process::id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name("/tmp/run".as_ref(), 42), "/tmp/run.42.jsonl");
        assert_eq!(file_name("/tmp/dir/".as_ref(), 7), "/tmp/dir/rdmacm.7.jsonl");
    }

    /// thread_key: the same in one thread, another in a thread alive at
    /// the same time (both here: the main thread outlives the other).
    #[test]
    fn thread_keys_differ() {
        let a = thread_key();
        let b = std::thread::spawn(thread_key).join().unwrap();
        assert_ne!(a, b);
        assert_eq!(a, thread_key());
        assert_ne!(a, 0);
    }

    #[test]
    fn thread_ids_differ() {
        let a = tid();
        let b = std::thread::spawn(tid).join().unwrap();
        assert_ne!(a, b);
        assert_eq!(a, tid());
    }
}
