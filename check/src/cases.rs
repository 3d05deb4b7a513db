// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The cases: which rdma-core programs run over a port, how the server side is known to
//! be ready, what of their output is compared, and the verdict of a pair of runs.

use crate::discover::{Port, Transport};
use crate::libs::{which, Lib};
use crate::run::{nap, stopping, End, Proc};
pub use crate::verdict::{Outcome, Row, Verdict};
use crate::verdict::{first_diff, first_error, normalise};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct CaseDef {
    pub name: &'static str,
    pub what: &'static str,
    /// in --quick runs too
    pub quick: bool,
}

pub const CASES: &[CaseDef] = &[
    CaseDef { name: "rping", what: "rping server and client, RC send/RDMA read/write, output compared", quick: true },
    CaseDef { name: "ucmatose", what: "ucmatose: connections, sends, disconnect; output compared", quick: true },
    CaseDef { name: "udaddy", what: "udaddy: UD QPs, address handles from the CM events; output compared", quick: true },
    CaseDef { name: "mckey", what: "mckey: multicast join, UD sends to the group, leave", quick: false },
    CaseDef { name: "rdma_client", what: "rdma_server/rdma_client: rdma_getaddrinfo, rdma_create_ep, connect; output compared", quick: true },
    CaseDef { name: "getaddrinfo", what: "rdma_getaddrinfo cases through pyverbs (active, passive, numeric service, unresolvable); output compared", quick: true },
    CaseDef { name: "cmtime", what: "cmtime: many connections set up and torn down at once", quick: true },
    CaseDef { name: "rstream", what: "rstream: rsocket stream transfer with data verification", quick: true },
    CaseDef { name: "riostream", what: "riostream: riomap/riowrite transfer", quick: false },
    CaseDef { name: "rspreload", what: "rstream in socket mode under the library's own librspreload.so (must not fall back to TCP)", quick: true },
    CaseDef { name: "af_ib", what: "InfiniBand only: ucmatose with AF_IB addresses (the port's GID)", quick: true },
    CaseDef { name: "af_ib_rstream", what: "InfiniBand only: rstream with AF_IB addresses", quick: false },
    CaseDef { name: "gid_reachable", what: "InfiniBand only: ibv_gid_reachable through rdma-resolve (ours only: upstream has no such call)", quick: true },
];

pub fn find(name: &str) -> Option<&'static CaseDef> {
    CASES.iter().find(|c| c.name == name)
}

/// The server side of a case run by another host (two hosts: the serving instance, reached
/// by the control connection of peer.rs).
pub trait RemoteServer {
    /// Has the other host start the server side; Ok(note) once it is ready.
    fn start(&mut self, case: &str, lib: &str, c: &Ctx) -> Result<String, String>;
    /// Tells it the client is done; its server's end and output.
    fn finish(&mut self, ok: bool) -> Result<(End, String, String), String>;
}

/// Everything a case needs to build its command lines.
pub struct Ctx<'a> {
    pub port: &'a Port,
    /// the server's address (loopback: the port's own)
    pub addr: IpAddr,
    /// the client's address (loopback: the same)
    pub local: IpAddr,
    /// two hosts: the serving instance runs the server side
    pub peer: Option<&'a std::cell::RefCell<dyn RemoteServer + 'a>>,
    pub tcp_port: u16,
    pub quick: bool,
    pub work: &'a Path,
    pub timeout: Duration,
    pub cmtime_new: bool,
    pub rdma_resolve: Option<&'a Path>,
}

/// How the client knows the server is ready.
#[derive(Clone)]
enum Ready {
    /// the server's pid holds a LISTEN cm_id (`rdma res show cm_id`)
    Listen,
    /// the server's stdout has this text
    Line(&'static str),
}

struct Plan {
    server: Option<Vec<String>>,
    client: Vec<String>,
    ready: Ready,
    compare: bool,
    preload: bool,
    /// after the run, no TCP socket of the case's port may exist (rsockets over RDMA)
    no_tcp: bool,
    /// upstream's library has nothing to run (ours-only case)
    ours_only: bool,
    /// a side passes when its stdout has this text, whatever its exit status (cmtime)
    pass_mark: Option<&'static str>,
}

fn v(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The plan of a case over a port, or why it cannot run there.
fn plan(name: &str, c: &Ctx) -> Result<Plan, String> {
    let a = c.addr.to_string();
    let b = c.local.to_string();
    let p = c.tcp_port.to_string();
    let q = c.quick;
    let tr = c.port.transport;
    let no_ud = || -> Result<(), String> {
        if tr == Transport::Iwarp {
            Err("iWARP has no UD QPs".into())
        } else {
            Ok(())
        }
    };
    let ib_only = || -> Result<(), String> {
        if tr != Transport::Ib {
            Err(format!(
                "needs an InfiniBand port (this one is {})",
                tr.name()
            ))
        } else {
            Ok(())
        }
    };
    let one_host = || -> Result<(), String> {
        if c.peer.is_some() {
            Err("AF_IB cases run on one host only".into())
        } else {
            Ok(())
        }
    };
    let mk = |server: Vec<String>, client: Vec<String>, compare: bool| Plan {
        server: Some(server),
        client,
        ready: Ready::Listen,
        compare,
        preload: false,
        no_tcp: false,
        ours_only: false,
        pass_mark: None,
    };
    let n = |quick: u32, full: u32| if q { quick } else { full }.to_string();
    Ok(match name {
        "rping" => {
            let cnt = n(3, 10);
            mk(
                v(&["rping", "-s", "-a", &a, "-p", &p, "-C", &cnt, "-v"]),
                v(&["rping", "-c", "-a", &a, "-p", &p, "-C", &cnt, "-v"]),
                true,
            )
        }
        "ucmatose" => {
            let (cn, mc) = (n(1, 2), n(5, 10));
            mk(
                v(&["ucmatose", "-b", &a, "-p", &p, "-c", &cn, "-C", &mc]),
                v(&[
                    "ucmatose", "-s", &a, "-b", &b, "-p", &p, "-c", &cn, "-C", &mc,
                ]),
                true,
            )
        }
        "udaddy" => {
            no_ud()?;
            let (cn, mc) = (n(1, 2), n(5, 10));
            mk(
                // udaddy's -p is the port space: it always uses its own port, 7174
                v(&["udaddy", "-b", &a, "-c", &cn, "-C", &mc]),
                v(&["udaddy", "-s", &a, "-b", &b, "-c", &cn, "-C", &mc]),
                true,
            )
        }
        "mckey" => {
            no_ud()?;
            let group = if c.addr.is_ipv4() {
                "239.255.74.71"
            } else {
                "ff15::7471"
            };
            let mc = n(5, 10);
            let mut pl = mk(
                v(&["stdbuf", "-oL", "mckey", "-m", group, "-b", &a, "-C", &mc]),
                v(&["mckey", "-m", group, "-s", "-b", &b, "-C", &mc]),
                false,
            );
            pl.ready = Ready::Line("joined");
            pl
        }
        "rdma_client" => mk(
            v(&["rdma_server", "-s", &a, "-p", &p]),
            v(&["rdma_client", "-s", &a, "-p", &p]),
            true,
        ),
        "getaddrinfo" => {
            let script = gai_script(&a, &b, &p);
            Plan {
                server: None,
                client: v(&["python3", "-c", &script]),
                ready: Ready::Listen,
                compare: true,
                preload: false,
                no_tcp: false,
                ours_only: false,
                pass_mark: None,
            }
        }
        "cmtime" => {
            let cn = n(10, 50);
            if c.cmtime_new {
                // This cmtime ends with a phase of connections without QPs: iWARP cannot
                // make them, and over loopback they are rejected with either library. The
                // phase with QPs before it is the comparison: a side passes once both its
                // programs reached the phase without QPs.
                if tr == Transport::Iwarp {
                    return Err(
                        "this rdma-core's cmtime also connects without QPs, which iWARP cannot"
                            .into(),
                    );
                }
                let mut pl = mk(
                    v(&["cmtime", "-b", &a, "-C", &a, "-L", "-p", &p, "-c", &cn]),
                    v(&["cmtime", "-b", &b, "-C", &a, "-p", &p, "-c", &cn]),
                    false,
                );
                pl.pass_mark = Some("test - no QPs");
                pl
            } else {
                mk(
                    v(&["cmtime", "-b", &a, "-p", &p, "-c", &cn]),
                    v(&["cmtime", "-s", &a, "-p", &p, "-c", &cn]),
                    false,
                )
            }
        }
        "rstream" | "riostream" => {
            let cnt = n(20, 100);
            mk(
                v(&[
                    name, "-b", &a, "-p", &p, "-S", "10000", "-C", &cnt, "-T", "v",
                ]),
                v(&[
                    name, "-s", &a, "-p", &p, "-S", "10000", "-C", &cnt, "-T", "v",
                ]),
                false,
            )
        }
        "rspreload" => {
            let cnt = n(20, 100);
            let mut pl = mk(
                v(&[
                    "rstream", "-T", "s", "-b", &a, "-p", &p, "-S", "10000", "-C", &cnt,
                ]),
                v(&[
                    "rstream", "-T", "s", "-s", &a, "-p", &p, "-S", "10000", "-C", &cnt,
                ]),
                false,
            );
            pl.preload = true;
            // iWARP connections are TCP connections of the kernel's: no telling them apart
            pl.no_tcp = tr != Transport::Iwarp;
            pl
        }
        "af_ib" => {
            ib_only()?;
            one_host()?;
            let g = &c.port.gid0;
            mk(
                v(&[
                    "ucmatose", "-f", "gid", "-b", g, "-p", &p, "-c", "1", "-C", "5",
                ]),
                v(&[
                    "ucmatose", "-f", "gid", "-s", g, "-b", g, "-p", &p, "-c", "1", "-C", "5",
                ]),
                true,
            )
        }
        "af_ib_rstream" => {
            ib_only()?;
            one_host()?;
            let g = &c.port.gid0;
            mk(
                v(&[
                    "rstream", "-f", "gid", "-b", g, "-p", &p, "-S", "10000", "-C", "20", "-T", "v",
                ]),
                v(&[
                    "rstream", "-f", "gid", "-s", g, "-p", &p, "-S", "10000", "-C", "20", "-T", "v",
                ]),
                false,
            )
        }
        "gid_reachable" => {
            ib_only()?;
            let rr = c.rdma_resolve.ok_or("rdma-resolve is not installed")?;
            Plan {
                server: None,
                client: vec![rr.display().to_string(), a.clone()],
                ready: Ready::Listen,
                compare: false,
                preload: false,
                no_tcp: false,
                ours_only: true,
                pass_mark: None,
            }
        }
        _ => return Err(format!("unknown case {name}")),
    })
}

/// rdma_getaddrinfo through pyverbs (which loads librdmacm.so.1 the usual way): one line
/// per call, the call's result or its error.
fn gai_script(a: &str, b: &str, p: &str) -> String {
    format!(
        r#"
import pyverbs.cmid as cmid
try:
    import pyverbs.cm_enums as e
    TCP, UDP, PASSIVE, NUMERIC = e.RDMA_PS_TCP, e.RDMA_PS_UDP, e.RAI_PASSIVE, e.RAI_NUMERICHOST
except Exception:
    TCP, UDP, PASSIVE, NUMERIC = 0x0106, 0x0111, 1, 2
cases = [
    ("active dst=A service=P", dict(dst="{a}", dst_service="{p}", port_space=TCP)),
    ("active dst=A src=B", dict(src="{b}", dst="{a}", dst_service="{p}", port_space=TCP)),
    ("active dst=A udp", dict(dst="{a}", dst_service="{p}", port_space=UDP)),
    ("active numeric dst=A", dict(dst="{a}", dst_service="{p}", port_space=TCP, flags=NUMERIC)),
    ("passive src=B", dict(src="{b}", src_service="{p}", port_space=TCP, flags=PASSIVE)),
    ("passive wildcard", dict(src_service="{p}", port_space=TCP, flags=PASSIVE)),
    ("unresolvable name", dict(dst="no-such-host.invalid", dst_service="{p}", port_space=TCP)),
    ("bad service", dict(dst="{a}", dst_service="no-such-service-x", port_space=TCP)),
]
for label, kw in cases:
    try:
        ai = cmid.AddrInfo(**kw)
        print(label + ": ok")
        ai.close()
    except Exception as ex:
        print(label + ": " + type(ex).__name__ + ": " + str(ex))
"#
    )
}

/// Every `rdma res show cm_id` entry of `pid` in state LISTEN.  None: the tool cannot say.
fn listening(pid: u32) -> Option<bool> {
    let out = Command::new("rdma")
        .args(["-j", "res", "show", "cm_id"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(crate::discover::json_objects(&text).iter().any(|o| {
        crate::discover::json_num(o, "pid") == Some(pid as u64)
            && crate::discover::json_str(o, "state").as_deref() == Some("LISTEN")
    }))
}

fn wait_ready(srv: &mut Proc, ready: &Ready, max: Duration) -> Result<(), String> {
    let t = Instant::now() + max;
    loop {
        if stopping() {
            return Err("interrupted".into());
        }
        if !srv.alive() {
            return Ok(()); // the verdict sees its exit status
        }
        match ready {
            Ready::Listen => match listening(srv.pid) {
                Some(true) => return Ok(()),
                Some(false) => {}
                None => {
                    // no `rdma` tool to ask: give the server a fixed head start
                    nap(Duration::from_millis(1500));
                    return Ok(());
                }
            },
            Ready::Line(s) => {
                if srv.stdout().contains(s) {
                    return Ok(());
                }
            }
        }
        if Instant::now() >= t {
            return Err(format!("server not ready after {} s", max.as_secs()));
        }
        nap(Duration::from_millis(100));
    }
}

/// TCP sockets (any state, TIME_WAIT included) whose local or remote port is `port`.
fn tcp_sockets_on(port: u16) -> usize {
    let hex = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 2 && (f[1].ends_with(&hex) || f[2].ends_with(&hex))
        })
        .count()
}

fn command(argv: &[String], lib: &Lib, preload: bool) -> Result<Command, String> {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    lib.apply(&mut c);
    if preload {
        let p = lib
            .preload
            .as_ref()
            .ok_or_else(|| format!("{} has no rsocket/librspreload.so", lib.called()))?;
        let mut v = p.display().to_string();
        if let Some((_, more)) = lib.env.iter().find(|(k, _)| k == "LD_PRELOAD") {
            v = format!("{v}:{more}");
        }
        c.env("LD_PRELOAD", v);
    }
    Ok(c)
}

/// Whether the programs a case needs are installed; Err: which is missing.
fn programs_present(pl: &Plan) -> Result<(), String> {
    let mut progs: Vec<&str> = vec![pl.client[0].as_str()];
    if let Some(s) = &pl.server {
        progs.push(if s[0] == "stdbuf" {
            s[2].as_str()
        } else {
            s[0].as_str()
        });
        progs.push(s[0].as_str());
    }
    for p in progs {
        if !p.starts_with('/') && which(p).is_none() {
            return Err(format!("{p} is not installed"));
        }
    }
    Ok(())
}

/// Runs one side of a case: the server here (loopback) or on the peer, the client here.
fn run_side(name: &str, pl: &Plan, lib: &Lib, c: &Ctx, tag: &str) -> Result<Outcome, String> {
    let t0 = Instant::now();
    let mut note = String::new();
    let mut srv = None;
    let mut remote = false;
    if let Some(argv) = &pl.server {
        match c.peer {
            Some(peer) => {
                note = peer.borrow_mut().start(name, lib.name, c)?;
                remote = true;
            }
            None => {
                let mut s = Proc::start(
                    command(argv, lib, pl.preload)?,
                    c.work,
                    &format!("{tag}.server"),
                    c.timeout,
                );
                if let Err(e) = wait_ready(&mut s, &pl.ready, Duration::from_secs(10)) {
                    note = e;
                }
                srv = Some(s);
            }
        }
    }
    let mut cli = Proc::start(
        command(&pl.client, lib, pl.preload)?,
        c.work,
        &format!("{tag}.client"),
        c.timeout,
    );
    let cend = cli.wait();
    let grace = server_grace(cend.ok());
    let (send, sout, serr) = match (srv.as_mut(), remote, c.peer) {
        (Some(s), _, _) => (Some(s.wait_or_stop(grace)), s.stdout(), s.stderr()),
        (None, true, Some(peer)) => {
            let (e, o, r) = peer.borrow_mut().finish(cend.ok())?;
            (Some(e), o, r)
        }
        _ => (None, String::new(), String::new()),
    };
    let ms = t0.elapsed().as_millis();
    let (cout, cerr) = (cli.stdout(), cli.stderr());
    Ok(judge_side(
        pl, c, cend, send, &cout, &cerr, &sout, &serr, ms, note,
    ))
}

#[allow(clippy::too_many_arguments)]
fn judge_side(
    pl: &Plan,
    c: &Ctx,
    cend: End,
    send: Option<End>,
    cout: &str,
    cerr: &str,
    sout: &str,
    serr: &str,
    ms: u128,
    mut note: String,
) -> Outcome {
    let mut output = normalise(cout, c.tcp_port);
    if pl.server.is_some() {
        output.push_str("--- server ---\n");
        output.push_str(&normalise(sout, c.tcp_port));
    }
    let mut why = String::new();
    let marked = pl
        .pass_mark
        .is_some_and(|m| cout.contains(m) && sout.contains(m));
    if marked {
        note = format!("passed on reaching '{}'", pl.pass_mark.unwrap_or_default());
    } else if !cend.ok() || send.as_ref().is_some_and(|e| !e.ok()) {
        let ends = match &send {
            Some(s) => format!("client {}, server {}", cend.text(), s.text()),
            None => cend.text(),
        };
        let line = first_error(&[cerr, cout, serr, sout]);
        why = if line.is_empty() {
            ends
        } else {
            format!("{ends}: {line}")
        };
    } else if pl.no_tcp {
        let n = tcp_sockets_on(c.tcp_port);
        if n > 0 {
            why = format!(
                "went over TCP, not RDMA ({n} TCP socket(s) on port {})",
                c.tcp_port
            );
        }
    }
    Outcome {
        client: cend,
        server: send,
        ms,
        output,
        why,
        note,
    }
}

/// How long a server whose client has ended may take to end by itself before it is
/// stopped: after a client that passed, long enough for a disconnect whose CM message was
/// lost to be retried (a CM retry waits seconds); after a client that failed, a moment.
pub fn server_grace(client_ok: bool) -> Duration {
    Duration::from_secs(if client_ok { 20 } else { 2 })
}

/// The serving side of a case (--serve): starts the server program of `name` with `lib`
/// for a client at `c.local`, waits until it is ready.  Err: why it cannot run here.
pub fn serve_start(name: &str, lib: &Lib, c: &Ctx, tag: &str) -> Result<(Proc, String), String> {
    let pl = plan(name, c)?;
    programs_present(&pl)?;
    let argv = pl
        .server
        .as_ref()
        .ok_or_else(|| format!("{name} has no server side"))?;
    let mut s = Proc::start(
        command(argv, lib, pl.preload)?,
        c.work,
        &format!("{tag}.server"),
        c.timeout,
    );
    let note = wait_ready(&mut s, &pl.ready, Duration::from_secs(10))
        .err()
        .unwrap_or_default();
    Ok((s, note))
}

/// Runs a case over a port with both libraries and judges the pair.
pub fn run_case(
    name: &'static str,
    c: &Ctx,
    libs: &[Lib; 2],
    progress: &mut dyn FnMut(&str),
) -> Row {
    let port = c.port.label();
    let mut row = Row {
        case: name,
        port,
        upstream: None,
        ours: None,
        verdict: Verdict::Stopped,
    };
    let pl = match plan(name, c).and_then(|pl| programs_present(&pl).map(|_| pl)) {
        Ok(pl) => pl,
        Err(why) => {
            row.verdict = Verdict::Skip(why);
            return row;
        }
    };
    if name == "getaddrinfo" {
        let ok = Command::new("python3")
            .args(["-c", "import pyverbs.cmid"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            row.verdict = Verdict::Skip("python3-pyverbs is not installed".into());
            return row;
        }
    }
    if pl.preload {
        if let Some(l) = libs.iter().find(|l| l.preload.is_none()) {
            row.verdict = Verdict::Skip(format!("{} has no rsocket/librspreload.so", l.called()));
            return row;
        }
    }
    let mut outs = Vec::new();
    for lib in libs.iter() {
        if pl.ours_only && lib.name == "upstream" {
            outs.push(None);
            continue;
        }
        if stopping() {
            return row;
        }
        progress(lib.called());
        let tag = format!("{}.{}.{}", name, row.port.replace('/', "-"), lib.name);
        let tc = Ctx {
            tcp_port: c.tcp_port + if lib.name == "ours" { 1 } else { 0 },
            ..*c
        };
        // each run its own port: the command lines are made for it
        let mut r = plan(name, &tc).and_then(|pl| run_side(name, &pl, lib, &tc, &tag));
        // Upstream's run that timed out gets one more try (on the case's third port), said in
        // its note; a run of ours never does: its timeout is its result.
        if lib.name == "upstream" && !stopping() && r.as_ref().is_ok_and(|o| o.timed_out()) {
            let tc = Ctx {
                tcp_port: c.tcp_port + 2,
                ..*c
            };
            r = plan(name, &tc)
                .and_then(|pl| run_side(name, &pl, lib, &tc, &format!("{tag}.retry")))
                .map(|mut o| {
                    o.note = format!(
                        "{}{}first run timed out, run again",
                        o.note,
                        if o.note.is_empty() { "" } else { "; " }
                    );
                    o
                });
        }
        match r {
            Ok(o) => outs.push(Some(o)),
            Err(e) => {
                row.verdict = Verdict::Skip(e);
                return row;
            }
        }
    }
    if stopping() {
        row.upstream = outs[0].clone();
        row.ours = outs[1].clone();
        return row;
    }
    let (u, o) = (outs[0].clone(), outs[1].clone());
    row.verdict = match (&u, &o) {
        (None, Some(o)) if o.ok() => {
            Verdict::Info("ours only: resolved, ibv_gid_reachable answered".into())
        }
        (None, Some(o)) => Verdict::Info(format!("ours only: {}", o.why)),
        (Some(u), Some(o)) if u.ok() && o.ok() => {
            if pl.compare && u.output != o.output {
                Verdict::Differ(format!(
                    "output differs: {}",
                    first_diff(&u.output, &o.output)
                ))
            } else {
                Verdict::Agree
            }
        }
        (Some(u), Some(o)) if u.ok() => Verdict::Differ(format!("ours: {}", o.why)),
        (Some(u), Some(o)) if o.ok() => {
            let _ = u;
            Verdict::OursOnly
        }
        (Some(u), Some(o)) => {
            if u.why == o.why {
                Verdict::BothFail(format!("both: {}", u.why))
            } else {
                Verdict::BothFail(format!("upstream: {}; ours: {}", u.why, o.why))
            }
        }
        _ => Verdict::Stopped,
    };
    row.upstream = u;
    row.ours = o;
    row
}

/// Whether this rdma-core's cmtime is the newer one (out-of-band control socket: -C/-L).
pub fn cmtime_is_new() -> bool {
    Command::new("cmtime")
        .arg("-h")
        .output()
        .map(|o| {
            let t = String::from_utf8_lossy(&o.stderr).into_owned()
                + &String::from_utf8_lossy(&o.stdout);
            t.contains("[-L")
        })
        .unwrap_or(false)
}

pub fn rdma_resolve_path() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let beside = exe.parent()?.join("rdma-resolve");
    if beside.is_file() {
        return Some(beside);
    }
    which("rdma-resolve")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_masks_port_and_pointers() {
        assert_eq!(
            normalise("listening on 7471 at 0x55d1ab, 74710\n", 7471),
            "listening on PORT at 0xADDR, 74710\n"
        );
    }

    #[test]
    fn first_error_picks_the_telling_line() {
        assert_eq!(
            first_error(&["", "starting\nrdma_connect: Connection refused\n"]),
            "rdma_connect: Connection refused"
        );
        assert_eq!(first_error(&["", "just this\n"]), "just this");
    }
}
