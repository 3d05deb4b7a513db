// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The threads that run the name lookups of asynchronous
//! `rdma_resolve_addrinfo` calls (see [`super::ai`]), so that the call
//! returns at once and the result comes as an event.
//!
//! A small bounded pool: at most [`MAX_WORKERS`] threads, started one at a
//! time when a job finds no idle or finishing thread, each leaving after [`IDLE`]
//! without work.  Jobs beyond that wait in a queue (never a thread per
//! call).  No lock is held while a job runs.
//!
//! fork(2): a child has none of its parent's threads.  The pool is a
//! [`PerProcess`] value: the first job a child submits makes the child its
//! own pool (new lock, new condition, new threads).  The parent's is
//! forgotten, never dropped: its queue (lookups of the parent's ids, which
//! in the child would never end anyway, as upstream's would not) and its
//! condition, on which the parent's idle threads are still recorded as
//! waiting (parking_lot keeps waiters in a process-wide table: a notify
//! would hand the lock to a thread that does not exist in the child, found
//! by the unit test `child_of_fork_runs_its_jobs`).
#![deny(unsafe_code)]

use crate::sys::process::PerProcess;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::cell::Cell;
use std::convert::Infallible;
use std::time::Duration;

/// One lookup, with what it does with its result.  It calls
/// [`Worker::finishing`] once it has its result and is about to report it.
pub type Job = Box<dyn FnOnce(&Worker) + Send + 'static>;

/// At most this many lookups run at the same time.
pub const MAX_WORKERS: usize = 4;
/// A thread without work for this long ends.
pub const IDLE: Duration = Duration::from_secs(10);

struct State {
    queue: VecDeque<Job>,
    /// Threads alive, how many of them wait for work, and how many are
    /// finishing a job (see [`Worker::finishing`]).
    workers: usize,
    idle: usize,
    finishing: usize,
}

struct Pool {
    st: Mutex<State>,
    cond: Condvar,
}

/// What a job is told about the thread running it.
pub struct Worker<'a> {
    /// None: the job runs on the thread that submitted it (no thread
    /// could be started).
    pool: Option<&'a Pool>,
    marked: Cell<bool>,
}

impl Worker<'_> {
    /// The job that runs on the calling thread itself (`submit` gave it
    /// back).
    pub fn caller() -> Worker<'static> {
        Worker { pool: None, marked: Cell::new(false) }
    }

    /// The job has its result and is about to report it: what is left is
    /// short.  A job submitted from now on counts this thread as available
    /// instead of starting another one.  Without it, a caller that submits
    /// its next lookup as soon as the event of the last one arrives could
    /// do so before this thread is back waiting for work, and the pool
    /// would grow a thread for a strictly sequential caller (seen under
    /// load: cancel_dl's dl_resolve case, threads +1).
    pub fn finishing(&self) {
        if let Some(pool) = self.pool {
            if !self.marked.replace(true) {
                pool.st.lock().finishing += 1;
            }
        }
    }
}

impl Pool {
    fn new() -> Pool {
        Pool { st: Mutex::new(State { queue: VecDeque::new(), workers: 0, idle: 0, finishing: 0 }), cond: Condvar::new() }
    }

    fn submit(&'static self, job: Job) -> Result<(), Job> {
        let mut st = self.st.lock();
        st.queue.push_back(job);
        if st.queue.len() > st.idle + st.finishing && st.workers < MAX_WORKERS {
            match crate::sys::process::spawn("rdmacm-ai", move || self.run()) {
                Ok(_) => st.workers += 1,
                Err(e) => {
                    log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: cannot start a lookup thread: {e}");
                    if st.workers == 0 {
                        return Err(st.queue.pop_back().expect("the job just queued"));
                    }
                }
            }
        }
        self.cond.notify_one();
        Ok(())
    }

    fn run(&self) {
        let mut done_one: Option<bool> = None;
        loop {
            let job = {
                let mut st = self.st.lock();
                if done_one.take() == Some(true) {
                    st.finishing -= 1;
                }
                loop {
                    if let Some(j) = st.queue.pop_front() {
                        break j;
                    }
                    st.idle += 1;
                    let timed_out = self.cond.wait_for(&mut st, IDLE).timed_out();
                    st.idle -= 1;
                    if timed_out && st.queue.is_empty() {
                        st.workers -= 1;
                        return;
                    }
                }
            };
            let w = Worker { pool: Some(self), marked: Cell::new(false) };
            job(&w);
            done_one = Some(w.marked.get());
        }
    }
}

/// This process's pool.
static POOL: PerProcess<Pool> = PerProcess::new();

fn pool() -> &'static Pool {
    match POOL.get_or_try_init(|| Ok::<_, Infallible>(Pool::new())) {
        Ok(p) => p,
        Err(never) => match never {},
    }
}

/// Queues `job` for a worker thread.  Gives the job back when no thread
/// exists and none can be started (the caller then runs it itself, with
/// [`Worker::caller`]).
pub fn submit(job: Job) -> Result<(), Job> {
    pool().submit(job)
}

/// How many worker threads this process has (tests).
pub fn workers() -> usize {
    pool().st.lock().workers
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    /// Many slow jobs: all of them run, on at most MAX_WORKERS threads,
    /// and submitting never waits for a job.
    #[test]
    fn bounded_and_never_blocks() {
        let done = Arc::new(AtomicUsize::new(0));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let t0 = Instant::now();
        for _ in 0..12 {
            let (done, running, peak) = (done.clone(), running.clone(), peak.clone());
            let r = submit(Box::new(move |_| {
                let n = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
                running.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
            }));
            assert!(r.is_ok());
        }
        assert!(t0.elapsed() < Duration::from_millis(40), "submit waited: {:?}", t0.elapsed());
        assert!(workers() <= MAX_WORKERS);
        while done.load(Ordering::SeqCst) < 12 {
            assert!(t0.elapsed() < Duration::from_secs(10), "jobs did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(peak.load(Ordering::SeqCst) <= MAX_WORKERS);
        assert!(peak.load(Ordering::SeqCst) >= 2, "jobs ran one at a time");
    }

    /// A caller that submits its next lookup as soon as the last one
    /// reported (before the worker is back waiting) keeps one thread.
    #[test]
    fn a_sequential_caller_keeps_one_thread() {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new()));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        for _ in 0..8 {
            let tx = tx.clone();
            assert!(pool
                .submit(Box::new(move |w| {
                    w.finishing();
                    let _ = tx.send(());
                    // What is left after the report, made long.
                    std::thread::sleep(Duration::from_millis(30));
                }))
                .is_ok());
            rx.recv_timeout(Duration::from_secs(5)).expect("the job reported");
        }
        assert_eq!(pool.st.lock().workers, 1, "a sequential caller made the pool grow");
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod fork_tests {
    use super::*;
    use std::sync::mpsc;

    /// A child of fork(2) gets its own threads: its job runs, although the
    /// parent had threads (one busy, others idle) when it forked.
    #[test]
    fn child_of_fork_runs_its_jobs() {
        for _ in 0..3 {
            let _ = submit(Box::new(|_| std::thread::sleep(Duration::from_millis(20))));
        }
        std::thread::sleep(Duration::from_millis(50));
        let _ = submit(Box::new(|_| std::thread::sleep(Duration::from_millis(300))));
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: the child only uses the pool and exits with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let (tx, rx) = mpsc::channel();
            let ok = submit(Box::new(move |_| {
                let _ = tx.send(());
            }))
            .is_ok();
            let ran = rx.recv_timeout(Duration::from_secs(3)).is_ok();
            // SAFETY: leaving the child without running the parent's test harness.
            unsafe { libc::_exit(if ok && ran { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status:#x}");
    }
}
