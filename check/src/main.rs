// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdmacm-rs-check: runs rdma-core's programs over this machine's RDMA ports, once with
//! upstream's librdmacm and once with ours (loaded by path, never installed), and
//! compares what they did.  See rdmacm-rs-check(1).

mod cases;
mod discover;
mod libs;
mod peer;
mod run;
mod verdict;

use cases::{Ctx, Row, Verdict, CASES};
use libs::Lib;
use nix::sys::signal::{SigSet, Signal};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

const USAGE: &str = "usage: rdmacm-rs-check [options]
  --ours DIR          our librdmacm.so.1 is in DIR (default: the installed one when the
                      system library is ours, else this build's build/lib)
  --upstream DIR      upstream's librdmacm.so.1 is in DIR (default: the one the loader
                      finds without LD_LIBRARY_PATH)
  --env-ours VAR=VAL  an environment variable for ours' programs only (e.g.
                      RDMACM_RS_LOG=debug); may be repeated
  --device DEV[/N]    only this device (and port)
  --case NAME[,NAME]  only these cases (--list shows them)
  --peer HOST         two hosts: the server side of every case runs on HOST, where
                      `rdmacm-rs-check --serve` waits (default: both on this host)
  --serve             answer one --peer run from another host, then exit
  --control-port N    TCP port of --serve's control connection (default 7474)
  --quick             the short set with small counts
  --timeout SECS      per program (default 30)
  --json              one JSON document on stdout instead of the table
  --keep              keep the programs' output (the directory is printed)
  --list              list the cases and exit
  -h, --help          this text
  -V, --version       the version
exit status: 0 ours agreed wherever upstream worked, 1 it did not, 2 usage or setup
error, 3 no RDMA device, 4 nothing could be compared, 130 interrupted";

/// Exit statuses (rdmacm-rs-check(1)).
const EXIT_DIFFER: u8 = 1;
const EXIT_SETUP: u8 = 2;
const EXIT_NO_DEVICE: u8 = 3;
const EXIT_NOTHING: u8 = 4;
const EXIT_INTERRUPTED: u8 = 130;

struct Opts {
    ours: Option<PathBuf>,
    upstream: Option<PathBuf>,
    device: Option<String>,
    cases: Option<Vec<String>>,
    quick: bool,
    timeout: u64,
    json: bool,
    keep: bool,
    sysfs: PathBuf,
    env_ours: Vec<(String, String)>,
    peer: Option<String>,
    serve: bool,
    control_port: u16,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        ours: None,
        upstream: None,
        device: None,
        cases: None,
        quick: false,
        timeout: 30,
        json: false,
        keep: false,
        sysfs: PathBuf::from("/sys"),
        env_ours: Vec::new(),
        peer: None,
        serve: false,
        control_port: peer::CONTROL_PORT,
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if a.starts_with("--") => (k, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match key {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("rdmacm-rs-check {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "--list" => {
                for c in CASES {
                    println!(
                        "{:<14} {}{}",
                        c.name,
                        c.what,
                        if c.quick { "" } else { " (not in --quick)" }
                    );
                }
                return Ok(None);
            }
            "--ours" => o.ours = Some(value("--ours")?.into()),
            "--upstream" => o.upstream = Some(value("--upstream")?.into()),
            "--device" => o.device = Some(value("--device")?),
            "--env-ours" => {
                let kv = value("--env-ours")?;
                let (k, v) = kv
                    .split_once('=')
                    .filter(|(k, _)| !k.is_empty())
                    .ok_or("--env-ours needs VAR=VALUE")?;
                o.env_ours.push((k.to_string(), v.to_string()));
            }
            "--case" => {
                let list: Vec<String> = value("--case")?.split(',').map(str::to_string).collect();
                for n in &list {
                    if cases::find(n).is_none() {
                        return Err(format!("--case: no case {n} (--list shows them)"));
                    }
                }
                o.cases = Some(list);
            }
            "--quick" => o.quick = true,
            "--peer" => o.peer = Some(value("--peer")?),
            "--serve" => o.serve = true,
            "--control-port" => {
                o.control_port = value("--control-port")?
                    .parse()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or("--control-port needs a TCP port")?
            }
            "--timeout" => {
                o.timeout = value("--timeout")?
                    .parse()
                    .ok()
                    .filter(|&t| t > 0)
                    .ok_or("--timeout needs seconds > 0")?
            }
            "--json" => o.json = true,
            "--keep" => o.keep = true,
            // a test tree in place of /sys (the tests of the checker)
            "--sysfs" => o.sysfs = value("--sysfs")?.into(),
            _ => return Err(format!("unknown argument {a}")),
        }
        i += 1;
    }
    if o.serve && o.peer.is_some() {
        return Err("--serve and --peer: one or the other".into());
    }
    Ok(Some(o))
}

/// SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken by one thread with
/// sigwait: it sets run::STOP, and the case in progress stops its programs.  (The
/// programs do not inherit the mask: std resets it in the child before exec.)
fn watch_signals() -> Result<(), String> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set.thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    std::thread::spawn(move || loop {
        if let Ok(sig) = set.wait() {
            run::STOP_SIGNAL.store(sig as i32, Ordering::SeqCst);
            run::STOP.store(true, Ordering::SeqCst);
        }
    });
    Ok(())
}

/// Upstream's and our library, each checked to be what it is said to be.
fn libraries(o: &Opts) -> Result<[Lib; 2], String> {
    let probe = libs::which("rping")
        .ok_or("rping is not installed (rdma-core's rdmacm-utils): nothing to run")?;
    let system = libs::resolve(&probe, None)?;
    let system_is_ours = libs::is_ours(&system);
    let up_dir = match &o.upstream {
        Some(d) => Some(libs::check_dir("--upstream", d)?),
        None if system_is_ours => {
            return Err(format!(
                "the system's librdmacm ({}) is ours: give upstream's with --upstream DIR \
                 (e.g. a directory where rdma-core's librdmacm package is unpacked)",
                system.display()
            ))
        }
        None => None,
    };
    let ours_dir = match &o.ours {
        Some(d) => Some(libs::check_dir("--ours", d)?),
        None if system_is_ours => None,
        None => Some(libs::build_tree_dir().ok_or(
            "where is our library? give --ours DIR (the directory holding our librdmacm.so.1: build/lib \
             of a build, or usr/lib/<arch> of an unpacked librdmacm-rs1 package)",
        )?),
    };
    let up = libs::resolve(&probe, up_dir.as_deref())?;
    let ours = libs::resolve(&probe, ours_dir.as_deref())?;
    if libs::is_ours(&up) {
        return Err(format!(
            "upstream's side loads {}, which is ours",
            up.display()
        ));
    }
    if !libs::is_ours(&ours) {
        return Err(format!(
            "our side loads {}, which is not ours (no RDMACM_RS_1.0 version)",
            ours.display()
        ));
    }
    let mk = |name, dir: Option<PathBuf>, resolved: PathBuf| {
        let preload = libs::preload_of(&resolved, dir.as_deref());
        Lib {
            name,
            dir,
            resolved,
            preload,
            env: Vec::new(),
        }
    };
    let mut ours = mk("ours", ours_dir, ours);
    ours.env = o.env_ours.clone();
    Ok([mk("upstream", up_dir, up), ours])
}

fn json_esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn outcome_json(o: &Option<cases::Outcome>) -> String {
    match o {
        None => "null".into(),
        Some(o) => format!(
            "{{\"result\":{},\"client\":{},\"server\":{},\"ms\":{},\"why\":{},\"note\":{}}}",
            json_esc(&o.cell()),
            json_esc(&o.client.text()),
            o.server
                .as_ref()
                .map(|s| json_esc(&s.text()))
                .unwrap_or_else(|| "null".into()),
            o.ms,
            json_esc(&o.why),
            json_esc(&o.note)
        ),
    }
}

fn row_line(r: &Row) -> String {
    let cell =
        |o: &Option<cases::Outcome>| o.as_ref().map(|o| o.cell()).unwrap_or_else(|| "-".into());
    let mut note = r.verdict.note();
    for (side, o) in [("upstream", &r.upstream), ("ours", &r.ours)] {
        if let Some(o) = o.as_ref().filter(|o| !o.note.is_empty()) {
            note.push_str(&format!(
                "{}{side}: {}",
                if note.is_empty() { "" } else { "; " },
                o.note
            ));
        }
    }
    format!(
        "{:<14} {:<10} {:<8} {:<8} {:<9} {}",
        r.case,
        r.port,
        cell(&r.upstream),
        cell(&r.ours),
        r.verdict.word(),
        note
    )
    .trim_end()
    .to_string()
}

struct Progress {
    tty: bool,
    width: usize,
}

impl Progress {
    fn show(&mut self, s: &str) {
        if self.tty {
            let line: String = s.chars().take(100).collect();
            eprint!("\r{line:<w$}", w = self.width);
            self.width = line.len();
            let _ = std::io::stderr().flush();
        }
    }
    fn clear(&mut self) {
        if self.tty && self.width > 0 {
            eprint!("\r{:w$}\r", "", w = self.width);
            self.width = 0;
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdmacm-rs-check: {e}\n{USAGE}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    if let Err(e) = watch_signals() {
        eprintln!("rdmacm-rs-check: {e}");
        return ExitCode::from(EXIT_SETUP);
    }
    let ports = match discover::ports(&o.sysfs) {
        Ok(p) => p,
        Err(e) => {
            if o.json {
                println!("{{\"error\":\"no-device\",\"message\":{}}}", json_esc(&e));
            }
            eprintln!("rdmacm-rs-check: {e}: nothing to compare");
            return ExitCode::from(EXIT_NO_DEVICE);
        }
    };
    let libs = match libraries(&o) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rdmacm-rs-check: {e}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    let ports: Vec<_> = ports
        .into_iter()
        .filter(|p| match &o.device {
            None => true,
            Some(d) => *d == p.dev || *d == p.label(),
        })
        .collect();
    if ports.is_empty() {
        eprintln!(
            "rdmacm-rs-check: --device {}: no such RDMA device or port",
            o.device.as_deref().unwrap_or("")
        );
        return ExitCode::from(EXIT_SETUP);
    }
    let work = std::env::temp_dir().join(format!("rdmacm-rs-check.{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("rdmacm-rs-check: {}: {e}", work.display());
        return ExitCode::from(EXIT_SETUP);
    }
    let cmtime_new = cases::cmtime_is_new();
    let rr = cases::rdma_resolve_path();
    if o.serve {
        let so = peer::ServeOpts {
            port: o.control_port,
            quick_default: o.quick,
            timeout: Duration::from_secs(o.timeout),
            work: &work,
            cmtime_new,
            rdma_resolve: rr.as_deref(),
        };
        let r = peer::serve(&so, &ports, &libs);
        finish_work_dir(&work, o.keep, true);
        return match r {
            Ok(n) => {
                eprintln!("rdmacm-rs-check: served {n} case runs");
                ExitCode::SUCCESS
            }
            Err(_) if run::stopping() => ExitCode::from(EXIT_INTERRUPTED),
            Err(e) => {
                eprintln!("rdmacm-rs-check: --serve: {e}");
                ExitCode::from(EXIT_SETUP)
            }
        };
    }
    // --peer: the one local port that reaches the peer, and the control connection
    let mut remote = None;
    if let Some(h) = &o.peer {
        let r = peer::resolve_host(h).and_then(|host| {
            let (label, src) = peer::route_to(host, &ports)?;
            let conn = peer::Peer::connect(host, o.control_port, Duration::from_secs(o.timeout))?;
            Ok((host, label, src, conn))
        });
        match r {
            Ok((host, label, src, conn)) => {
                remote = Some((host, label, src, std::cell::RefCell::new(conn)))
            }
            Err(e) => {
                eprintln!("rdmacm-rs-check: {e}");
                return ExitCode::from(EXIT_SETUP);
            }
        }
    }
    let ports: Vec<_> = match &remote {
        Some((_, label, _, _)) => ports.into_iter().filter(|p| p.label() == *label).collect(),
        None => ports,
    };
    let selected: Vec<&'static str> = CASES
        .iter()
        .filter(|c| match &o.cases {
            Some(l) => l.iter().any(|n| n == c.name),
            None => !o.quick || c.quick,
        })
        .map(|c| c.name)
        .collect();
    let say = |s: String| {
        if !o.json {
            println!("{s}");
        }
    };
    for l in &libs {
        say(format!(
            "{:<9} {}{}",
            format!("{}:", l.name),
            l.resolved.display(),
            l.preload
                .as_ref()
                .map(|p| format!(" (preload {})", p.display()))
                .unwrap_or_default()
        ));
    }
    for p in &ports {
        say(format!(
            "port {:<10} {:<10} {:<7} {:<10} netdev {:<8} {}{}",
            p.label(),
            p.transport.name(),
            p.state,
            p.link_layer,
            p.netdev.as_deref().unwrap_or("-"),
            p.addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
            p.unusable
                .as_ref()
                .map(|u| format!(" (not used: {u})"))
                .unwrap_or_default()
        ));
    }
    if let Some((host, label, src, _)) = &remote {
        say(format!(
            "peer: {host} (server side there), this host {src} on {label}"
        ));
    }
    say(String::new());
    say(format!(
        "{:<14} {:<10} {:<8} {:<8} {:<9} {}",
        "case", "port", "upstream", "ours", "verdict", "note"
    ));
    let mut progress = Progress {
        tty: std::io::stderr().is_terminal(),
        width: 0,
    };
    let total = selected.len() * ports.iter().filter(|p| p.unusable.is_none()).count();
    let mut rows: Vec<Row> = Vec::new();
    let mut tcp_port: u16 = 20000 + (std::process::id() % 1000) as u16 * 12;
    'outer: for p in &ports {
        if let Some(why) = &p.unusable {
            // one row for the port, not one per case
            let row = Row {
                case: "(all)",
                port: p.label(),
                upstream: None,
                ours: None,
                verdict: Verdict::Skip(why.clone()),
            };
            say(row_line(&row));
            rows.push(row);
            continue;
        }
        for &name in &selected {
            if run::stopping() {
                break 'outer;
            }
            let row = match p.addr {
                None => continue,
                Some(addr) => {
                    let c = Ctx {
                        port: p,
                        addr: remote.as_ref().map(|r| r.0).unwrap_or(addr),
                        local: remote.as_ref().map(|r| r.2).unwrap_or(addr),
                        peer: remote.as_ref().map(|r| &r.3 as &std::cell::RefCell<dyn cases::RemoteServer>),
                        tcp_port,
                        quick: o.quick,
                        work: &work,
                        timeout: Duration::from_secs(o.timeout),
                        cmtime_new,
                        rdma_resolve: rr.as_deref(),
                    };
                    // three ports a case: upstream's, ours, upstream's second try
                    tcp_port = tcp_port.wrapping_add(3).max(20000);
                    let n = rows.len() + 1;
                    cases::run_case(name, &c, &libs, &mut |lib| {
                        progress.show(&format!(
                            "[{n}/{total}] {name} on {} with {lib} ...",
                            p.label()
                        ))
                    })
                }
            };
            progress.clear();
            say(row_line(&row));
            rows.push(row);
        }
    }
    progress.clear();
    if let Some((_, _, _, conn)) = &remote {
        conn.borrow_mut().bye();
    }
    let interrupted = run::stopping();
    let differ = rows.iter().filter(|r| r.verdict.counted()).count();
    let agree = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Agree))
        .count();
    let count = |w: &str| rows.iter().filter(|r| r.verdict.word() == w).count();
    let summary = format!(
        "{} agree, {} differ, {} both fail, {} ours only, {} skipped{}",
        agree,
        differ,
        count("BOTH-FAIL"),
        count("OURS-ONLY"),
        count("SKIP"),
        if interrupted { ", interrupted" } else { "" }
    );
    if o.json {
        let mut j = String::from("{\"libraries\":[");
        for (i, l) in libs.iter().enumerate() {
            j.push_str(&format!(
                "{}{{\"name\":{},\"path\":{},\"preload\":{}}}",
                if i > 0 { "," } else { "" },
                json_esc(l.name),
                json_esc(&l.resolved.display().to_string()),
                l.preload
                    .as_ref()
                    .map(|p| json_esc(&p.display().to_string()))
                    .unwrap_or_else(|| "null".into())
            ));
        }
        j.push_str("],\"ports\":[");
        for (i, p) in ports.iter().enumerate() {
            j.push_str(&format!(
                "{}{{\"port\":{},\"transport\":{},\"state\":{},\"link_layer\":{},\"gid0\":{},\"netdev\":{},\"address\":{},\"unusable\":{}}}",
                if i > 0 { "," } else { "" },
                json_esc(&p.label()),
                json_esc(p.transport.name()),
                json_esc(&p.state),
                json_esc(&p.link_layer),
                json_esc(&p.gid0),
                p.netdev.as_deref().map(json_esc).unwrap_or_else(|| "null".into()),
                p.addr.map(|a| json_esc(&a.to_string())).unwrap_or_else(|| "null".into()),
                p.unusable.as_deref().map(json_esc).unwrap_or_else(|| "null".into())
            ));
        }
        j.push_str("],\"cases\":[");
        for (i, r) in rows.iter().enumerate() {
            j.push_str(&format!(
                "{}{{\"case\":{},\"port\":{},\"verdict\":{},\"counted\":{},\"note\":{},\"upstream\":{},\"ours\":{}}}",
                if i > 0 { "," } else { "" },
                json_esc(r.case),
                json_esc(&r.port),
                json_esc(r.verdict.word()),
                r.verdict.counted(),
                json_esc(&r.verdict.note()),
                outcome_json(&r.upstream),
                outcome_json(&r.ours)
            ));
        }
        j.push_str(&format!(
            "],\"interrupted\":{},\"summary\":{}}}",
            interrupted,
            json_esc(&summary)
        ));
        println!("{j}");
    } else {
        println!("\n{summary}");
    }
    finish_work_dir(&work, o.keep, o.json);
    if interrupted {
        let sig = run::STOP_SIGNAL.load(Ordering::SeqCst);
        eprintln!(
            "rdmacm-rs-check: interrupted (signal {sig}): every program it started is stopped"
        );
        return ExitCode::from(if sig == Signal::SIGINT as i32 {
            EXIT_INTERRUPTED
        } else {
            128 + sig as u8
        });
    }
    if differ > 0 {
        ExitCode::from(EXIT_DIFFER)
    } else if agree == 0 {
        eprintln!("rdmacm-rs-check: no case ran with both libraries on this machine: nothing was compared");
        ExitCode::from(EXIT_NOTHING)
    } else {
        ExitCode::SUCCESS
    }
}

fn finish_work_dir(work: &Path, keep: bool, json: bool) {
    if keep {
        if !json {
            println!("programs' output: {}", work.display());
        }
    } else {
        let _ = std::fs::remove_dir_all(work);
    }
}
