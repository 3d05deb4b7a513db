// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Running the programs of a case: each in its own process group (so that everything it
//! starts can be stopped at once), output to files, a deadline on every process, and a
//! stop request (Ctrl-C) honoured within a poll interval.  Nothing it starts outlives the
//! case: a process still running when its case ends is killed with its group.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Set by the signal thread: stop the case in progress and report what ran.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that asked for the stop (SIGINT: exit 130).
pub static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

const POLL: Duration = Duration::from_millis(20);

fn kill_group(pid: u32, sig: Signal) {
    if pid != 0 {
        // ESRCH (the group is gone) is what we want
        let _ = killpg(Pid::from_raw(pid as i32), sig);
    }
}

/// How a process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// exit status
    Exit(i32),
    /// killed by this signal (not by us)
    Signal(i32),
    /// still running at its deadline, then killed
    Timeout,
    /// killed by us: its peer had ended, or a stop was requested
    Killed,
    /// could not be started
    NoStart(String),
}

impl End {
    pub fn ok(&self) -> bool {
        *self == End::Exit(0)
    }
    pub fn text(&self) -> String {
        match self {
            End::Exit(c) => format!("exit {c}"),
            End::Signal(n) => format!("killed by signal {n}"),
            End::Timeout => "timeout".into(),
            End::Killed => "stopped".into(),
            End::NoStart(e) => format!("not started: {e}"),
        }
    }
}

fn end_of(st: ExitStatus) -> End {
    use std::os::unix::process::ExitStatusExt;
    match st.code() {
        Some(c) => End::Exit(c),
        None => End::Signal(st.signal().unwrap_or(0)),
    }
}

/// A started process: its group is its pid.
pub struct Proc {
    child: Option<Child>,
    pub pid: u32,
    pub out: PathBuf,
    pub err: PathBuf,
    deadline: Instant,
    end: Option<End>,
}

impl Proc {
    /// Start `cmd` with stdout/stderr to `dir/name.out`/`dir/name.err`, stdin from
    /// /dev/null, in a process group of its own.
    pub fn start(mut cmd: Command, dir: &Path, name: &str, timeout: Duration) -> Proc {
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.err"));
        let files = File::create(&out).and_then(|o| Ok((o, File::create(&err)?)));
        let started = files.map_err(|e| e.to_string()).and_then(|(o, e)| {
            cmd.stdin(Stdio::null())
                .stdout(o)
                .stderr(e)
                .process_group(0)
                .spawn()
                .map_err(|e| e.to_string())
        });
        let deadline = Instant::now() + timeout;
        match started {
            Ok(c) => Proc {
                pid: c.id(),
                child: Some(c),
                out,
                err,
                deadline,
                end: None,
            },
            Err(e) => Proc {
                child: None,
                pid: 0,
                out,
                err,
                deadline,
                end: Some(End::NoStart(e)),
            },
        }
    }

    /// Polls once; Some when it has ended (or was ended for its deadline).
    pub fn poll(&mut self) -> Option<End> {
        if let Some(e) = &self.end {
            return Some(e.clone());
        }
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(st)) => {
                // the program is gone; anything it left in its group goes too
                self.kill_group(Signal::SIGKILL);
                self.end = Some(end_of(st));
            }
            Ok(None) if Instant::now() >= self.deadline => {
                self.stop();
                self.end = Some(End::Timeout);
            }
            Ok(None) => {}
            Err(e) => {
                self.stop();
                self.end = Some(End::NoStart(e.to_string()));
            }
        }
        self.end.clone()
    }

    fn kill_group(&self, sig: Signal) {
        kill_group(self.pid, sig);
    }

    /// Ends the process and its group: SIGTERM, a second for it to go, then SIGKILL;
    /// reaps it.
    pub fn stop(&mut self) {
        let pid = self.pid;
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(Some(st)) = child.try_wait() {
            kill_group(pid, Signal::SIGKILL);
            self.end.get_or_insert(end_of(st));
            return;
        }
        kill_group(pid, Signal::SIGTERM);
        let t = Instant::now() + Duration::from_secs(1);
        while Instant::now() < t {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(POLL);
        }
        kill_group(pid, Signal::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
        self.end.get_or_insert(End::Killed);
    }

    /// Waits until it ends, its deadline passes or a stop is requested.
    pub fn wait(&mut self) -> End {
        loop {
            if let Some(e) = self.poll() {
                return e;
            }
            if stopping() {
                self.stop();
                return End::Killed;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits at most `grace` for it to end by itself, then stops it.
    pub fn wait_or_stop(&mut self, grace: Duration) -> End {
        let t = Instant::now() + grace;
        while Instant::now() < t && !stopping() {
            if let Some(e) = self.poll() {
                return e;
            }
            std::thread::sleep(POLL);
        }
        if let Some(e) = self.poll() {
            return e;
        }
        self.stop();
        End::Killed
    }

    pub fn alive(&mut self) -> bool {
        self.poll().is_none()
    }

    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.end.is_none() {
            self.stop();
        }
    }
}

/// Sleeps `d`, or less when a stop is requested.
pub fn nap(d: Duration) {
    let t = Instant::now() + d;
    while Instant::now() < t && !stopping() {
        std::thread::sleep(POLL.min(t.saturating_duration_since(Instant::now())));
    }
}
