// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! "Is this state still this process's?": the fork generation and values
//! that belong to the process that made them.
//!
//! A child of fork(2) starts with a copy of its parent's memory but with
//! one thread, its own descriptor table and (for RDMA) no right to use the
//! parent's device contexts.  State the library keeps in statics (service
//! threads, worker pools, wake-up descriptors, opened devices) must notice
//! that it was inherited and be made anew.  [`generation`] tells processes
//! apart without a system call; [`PerProcess`] is a static value made once
//! per process on top of it.
//!
//! Policy for what the parent's copy becomes in a child, the same for
//! every user of this module: it is **forgotten, never dropped**.  The
//! threads it may refer to and the threads that may have held its locks
//! do not exist in the child, so running its destructor there could block
//! forever or tear down what belongs to the parent (a device context's
//! objects, for one).  Its memory stays, so a reference taken before the
//! fork stays valid in the child; the descriptors it holds stay open in
//! the child (they are the parent's open files, shared with it: the child
//! must not use them to signal or wait) until the child execs: every
//! descriptor the library makes is close-on-exec, so an exec'd program
//! does not inherit them.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// This process's generation (see [`generation`]).
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The generation of the process that is forking, written by the prepare
/// handler: the child handler makes its own one more.  (A pair of
/// idempotent handlers rather than one increment: a handler registered
/// twice, by two threads racing the first use, still counts a fork once.)
static FORKING: AtomicU64 = AtomicU64::new(0);
/// Whether the fork handlers are registered.
static HANDLERS: AtomicU8 = AtomicU8::new(UNREGISTERED);
const UNREGISTERED: u8 = 0;
const REGISTERED: u8 = 1;
/// `pthread_atfork` failed (ENOMEM, its only error): [`generation`] falls
/// back to the process id.
const FAILED: u8 = 2;

extern "C" fn prepare() {
    FORKING.store(GENERATION.load(Ordering::Relaxed), Ordering::Relaxed);
}

extern "C" fn child() {
    GENERATION.store(FORKING.load(Ordering::Relaxed) + 1, Ordering::Release);
}

/// The fork generation of this process: 0 in the process that loaded the
/// library, and one more in each fork child than in its parent.  Kept by
/// a pthread_atfork child handler registered on first use; reading it is
/// one atomic load (no system call).
///
/// Equal generations in one address space mean one process: a value
/// tagged with the generation of the process that made it is this
/// process's exactly when its tag is `generation()`.  Forks before the
/// first use are not counted (nothing made before it carries a tag).  A
/// child that runs no fork handlers (a raw clone(2), vfork, `_Fork`) is not
/// noticed; such a child may only exec or exit.  Should registration fail
/// (out of memory), the generation is derived from the process id
/// (one getpid per call), which still tells a child from its parent.
#[inline(always)]
pub fn generation() -> u64 {
    match HANDLERS.load(Ordering::Acquire) {
        REGISTERED => GENERATION.load(Ordering::Acquire),
        UNREGISTERED => register(),
        _ => by_pid(),
    }
}

#[cold]
fn register() -> u64 {
    // Threads racing here may each register: the handlers are idempotent.
    // No thread waits for another (a wait could be inherited by a fork
    // child whose registering thread does not exist).
    // SAFETY: registers two functions that only touch atomics, which is
    // all a child of a multi-threaded process may do in a fork handler.
    let r = unsafe { libc::pthread_atfork(Some(prepare), None, Some(child)) };
    if r != 0 {
        log::debug!(target: "rdmacm", "pthread_atfork: errno {r}; telling processes apart by their id");
        HANDLERS.store(FAILED, Ordering::Release);
        return by_pid();
    }
    HANDLERS.store(REGISTERED, Ordering::Release);
    GENERATION.load(Ordering::Acquire)
}

#[cold]
fn by_pid() -> u64 {
    (1 << 63) | u64::from(std::process::id())
}

/// A value and the generation of the process that made it.
struct Slot<T> {
    generation: u64,
    value: T,
}

/// A value that belongs to the process that made it.
///
/// Made on first use in each process by [`PerProcess::get_or_try_init`]
/// and never dropped: it lives as long as its process, like a static's
/// value (so the references handed out are `'static`; a `PerProcess` that
/// is itself dropped leaks its values).  In a fork child the parent's
/// value is forgotten, never dropped (see the module's policy): the first
/// use in the child makes the child's own.
///
/// Cost: [`PerProcess::get`] and a made `get_or_try_init` are two atomic
/// loads and a compare, no system call and no lock.  Two threads racing
/// the first make: one makes, the others wait for it and take its value;
/// theirs are never made (a make that fails or panics lets the next
/// waiter try its own).  A thread waiting for a maker of its parent
/// process (forked while that thread made) does not wait: the maker does
/// not exist in the child.  `make` must not use the same `PerProcess`.
pub struct PerProcess<T: Send + Sync + 'static> {
    /// The latest value made in this address space (leaked `Box`), NULL
    /// until the first.
    slot: AtomicPtr<Slot<T>>,
    /// 0, or one more than the generation of the process one of whose
    /// threads is making a value.
    making: AtomicU64,
    _own: PhantomData<Slot<T>>,
}

impl<T: Send + Sync + 'static> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Gives up a claim to make (on return or unwind).
struct Claim<'a>(&'a AtomicU64);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    pub const fn new() -> Self {
        PerProcess { slot: AtomicPtr::new(std::ptr::null_mut()), making: AtomicU64::new(0), _own: PhantomData }
    }

    fn current(&self, generation: u64) -> Option<&'static T> {
        let p = self.slot.load(Ordering::Acquire);
        // SAFETY: a non-NULL slot is a leaked Box, published with Release
        // after it was written and never freed, so it is valid for the
        // rest of the process and its fork children.
        let s: &'static Slot<T> = unsafe { p.as_ref() }?;
        (s.generation == generation).then_some(&s.value)
    }

    /// This process's value if it has been made.
    pub fn get(&self) -> Option<&'static T> {
        self.current(generation())
    }

    /// This process's value, made by `make` on first use here (in a fork
    /// child: on its first use there).
    pub fn get_or_try_init<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<&'static T, E> {
        let g = generation();
        match self.current(g) {
            Some(v) => Ok(v),
            None => self.make(g, make),
        }
    }

    #[cold]
    fn make<E>(&self, g: u64, make: impl FnOnce() -> Result<T, E>) -> Result<&'static T, E> {
        let mine = g + 1;
        let mut spins = 0u32;
        let _claim = loop {
            let m = self.making.load(Ordering::Acquire);
            if m != mine {
                // Free, or claimed by a thread of an ancestor process that
                // does not exist here.
                if self.making.compare_exchange(m, mine, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    break Claim(&self.making);
                }
                continue;
            }
            // Another thread of this process makes: wait for its value.
            if let Some(v) = self.current(g) {
                return Ok(v);
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        };
        // The previous claimant may have finished between our look and
        // our claim.
        if let Some(v) = self.current(g) {
            return Ok(v);
        }
        let s: &'static Slot<T> = Box::leak(Box::new(Slot { generation: g, value: make()? }));
        // The parent's slot, if any, is forgotten (left allocated).
        self.slot.store(s as *const Slot<T> as *mut Slot<T>, Ordering::Release);
        Ok(&s.value)
    }
}

/// The stack of each thread the library starts (std's default size).
const THREAD_STACK: usize = 2 << 20;

/// Starts a thread of the library's own, named `name`, running `f`:
/// * with its stack size given: std reads `RUST_MIN_STACK` from the
///   environment with `getenv` for a thread without one, and the library
///   reads the environment only through `secure_getenv`;
/// * with every signal blocked, so that a signal sent to the process is
///   never handled on a thread the program does not know of (a program
///   that blocks a signal in its threads to take it later, or that counts
///   on it interrupting one of its calls, finds it still its own).  A
///   thread starts with the mask of the thread that creates it, so the
///   mask is set around the creation and the caller's given back after.
pub fn spawn<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: sigset_t is plain data, filled by sigfillset before use.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sets; pthread_sigmask changes the calling thread's
    // mask only (glibc keeps its own cancellation and set-id signals out).
    let blocked = unsafe { libc::sigfillset(&mut all) == 0 && libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) == 0 };
    let r = std::thread::Builder::new().name(name.into()).stack_size(THREAD_STACK).spawn(f);
    if blocked {
        // SAFETY: `old` is the mask pthread_sigmask reported above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Barrier};

    /// A thread of the library's blocks every signal a program may send,
    /// and its creator's mask is as it was.
    #[test]
    fn spawned_threads_block_every_signal() {
        fn blocked(sig: libc::c_int) -> bool {
            // SAFETY: plain data, filled by pthread_sigmask.
            let mut cur: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: a query of the calling thread's mask.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur) };
            // SAFETY: a valid set.
            unsafe { libc::sigismember(&cur, sig) == 1 }
        }
        let before: Vec<bool> = [libc::SIGUSR1, libc::SIGINT, libc::SIGALRM].iter().map(|&s| blocked(s)).collect();
        let inside = spawn("mask-test", || [libc::SIGUSR1, libc::SIGINT, libc::SIGTERM, libc::SIGALRM, libc::SIGCHLD, libc::SIGRTMIN() + 2].iter().all(|&s| blocked(s)))
            .unwrap()
            .join()
            .unwrap();
        assert!(inside, "a signal is left unblocked in a thread of the library's");
        let after: Vec<bool> = [libc::SIGUSR1, libc::SIGINT, libc::SIGALRM].iter().map(|&s| blocked(s)).collect();
        assert_eq!(before, after, "the creator's mask changed");
    }

    #[test]
    fn made_once_per_process() {
        static V: PerProcess<String> = PerProcess::new();
        assert!(V.get().is_none());
        assert_eq!(V.get_or_try_init(|| Err::<String, _>(7)), Err(7), "an error leaves it unmade");
        assert!(V.get().is_none());
        let a = V.get_or_try_init(|| Ok::<_, ()>("one".to_string())).unwrap();
        let b = V.get_or_try_init(|| -> Result<String, ()> { panic!("made twice") }).unwrap();
        assert!(std::ptr::eq(a, b));
        assert!(std::ptr::eq(V.get().unwrap(), a));
        assert_eq!(a, "one");
        assert_eq!(generation(), generation());
    }

    /// A make that panics gives its claim up: the next call makes.
    #[test]
    fn panicking_make_releases_the_claim() {
        static V: PerProcess<u32> = PerProcess::new();
        let r = std::panic::catch_unwind(|| V.get_or_try_init(|| -> Result<u32, ()> { panic!("boom") }));
        assert!(r.is_err());
        assert_eq!(*V.get_or_try_init(|| Ok::<_, ()>(5)).unwrap(), 5);
    }

    /// Threads racing the first use: one make runs, everyone gets its value.
    #[test]
    fn racing_threads_share_one_value() {
        static V: PerProcess<usize> = PerProcess::new();
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let n = 8;
        let bar = Arc::new(Barrier::new(n));
        let ts: Vec<_> = (0..n)
            .map(|i| {
                let bar = bar.clone();
                std::thread::spawn(move || {
                    bar.wait();
                    let v = V
                        .get_or_try_init(|| {
                            MADE.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok::<_, ()>(i)
                        })
                        .unwrap();
                    v as *const usize as usize
                })
            })
            .collect();
        let ptrs: Vec<usize> = ts.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(MADE.load(Ordering::SeqCst), 1, "exactly one make ran");
        assert!(ptrs.iter().all(|&p| p == ptrs[0]), "one value for all");
    }

    /// Waits for child `pid`: its exit status, -1 if it did not exit
    /// (no panic: the forked child calls this too).
    fn reap(pid: libc::pid_t) -> i32 {
        let mut st = 0;
        // SAFETY: waits for our own child; `st` is a local.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid && libc::WIFEXITED(st) {
            libc::WEXITSTATUS(st)
        } else {
            -1
        }
    }

    /// Across a real fork(2): the child's generation is one more, the
    /// parent's value is not the child's, the child makes its own, and a
    /// reference taken before the fork is still readable; a grandchild
    /// counts one more again.  The child reports through its exit status
    /// (a bit per failed check) and leaves by _exit.
    #[test]
    fn fork_child_makes_its_own() {
        static V: PerProcess<(u64, u32)> = PerProcess::new();
        let g = generation();
        let before = V.get_or_try_init(|| Ok::<_, ()>((g, 1))).unwrap();
        // SAFETY: the child only touches atomics, the allocator (fork-safe
        // in glibc), fork/waitpid and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut bad = 0;
            if generation() != g + 1 {
                bad |= 1;
            }
            if V.get().is_some() {
                bad |= 2;
            }
            match V.get_or_try_init(|| Ok::<_, ()>((g + 1, 2))) {
                Ok(v) if *v == (g + 1, 2) && !std::ptr::eq(v, before) && V.get().is_some_and(|w| std::ptr::eq(v, w)) => {}
                _ => bad |= 4,
            }
            if *before != (g, 1) {
                bad |= 8;
            }
            // SAFETY: as above, in the child.
            let grand = unsafe { libc::fork() };
            if grand == 0 {
                let ok = generation() == g + 2 && V.get().is_none();
                // SAFETY: ends the grandchild without running the harness.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            if grand < 0 || reap(grand) != 0 {
                bad |= 16;
            }
            // SAFETY: ends the child without running the harness.
            unsafe { libc::_exit(bad) };
        }
        assert_eq!(reap(pid), 0, "child's failed checks (bits: 1 generation, 2 inherited value, 4 own value, 8 old reference, 16 grandchild)");
        // The parent's value is untouched.
        assert_eq!(generation(), g);
        assert!(std::ptr::eq(V.get().unwrap(), before));
        assert_eq!(*before, (g, 1));
    }
}
