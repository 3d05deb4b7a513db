// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Two hosts: `--serve` on one runs the server side of each case when the other
//! (`--peer HOST`) asks, over a TCP control connection of lines:
//!
//! ```text
//! client: HELLO <version>                  server: OK | NO <why>
//! client: RUN <case> <lib> <server-addr> <client-addr> <port> <quick>
//!                                          server: READY <note> | NOTRUN <why>
//! client: DONE <0|1>   (its program ended, passed or not)
//!                                          server: END <how>, OUT <n> + n bytes, ERR <n> + n bytes
//! ```
//!
//! The serving side runs only the cases' own server programs, built from the case name
//! and parsed addresses, never a command it is sent; it serves one checking run, then
//! exits.

use crate::cases::{self, Ctx};
use crate::discover::Port;
use crate::libs::Lib;
use crate::run::{stopping, End};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

/// The control connection's TCP port, unless --control-port says otherwise.
pub const CONTROL_PORT: u16 = 7474;

pub struct Peer {
    r: BufReader<TcpStream>,
    w: TcpStream,
    wait: Duration,
}

fn end_token(e: &End) -> String {
    match e {
        End::Exit(c) => format!("exit {c}"),
        End::Signal(n) => format!("signal {n}"),
        End::Timeout => "timeout".into(),
        End::Killed => "stopped".into(),
        End::NoStart(m) => format!("nostart {m}"),
    }
}

fn end_parse(s: &str) -> End {
    let (k, v) = s.split_once(' ').unwrap_or((s, ""));
    match k {
        "exit" => End::Exit(v.parse().unwrap_or(-1)),
        "signal" => End::Signal(v.parse().unwrap_or(0)),
        "timeout" => End::Timeout,
        "stopped" => End::Killed,
        _ => End::NoStart(v.to_string()),
    }
}

/// One line, without its newline; a read timeout is waited through unless a stop is asked
/// for or `max` has passed.  Err on EOF.
fn read_line(r: &mut BufReader<TcpStream>, max: Duration) -> Result<String, String> {
    let t = Instant::now() + max;
    let mut buf = String::new();
    loop {
        match r.read_line(&mut buf) {
            Ok(0) => return Err("the peer closed the control connection".into()),
            Ok(_) if buf.ends_with('\n') => {
                buf.pop();
                return Ok(buf);
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                if stopping() {
                    return Err("interrupted".into());
                }
                if Instant::now() >= t {
                    return Err("no answer on the control connection".into());
                }
            }
            Err(e) => return Err(format!("control connection: {e}")),
        }
    }
}

fn read_blob(r: &mut BufReader<TcpStream>, head: &str, max: Duration) -> Result<String, String> {
    let l = read_line(r, max)?;
    let n: usize = l
        .strip_prefix(head)
        .and_then(|n| n.trim().parse().ok())
        .filter(|&n| n <= 1 << 20)
        .ok_or_else(|| format!("control connection: expected {head}<n>, got '{l}'"))?;
    let mut b = vec![0; n];
    let t = Instant::now() + max;
    let mut got = 0;
    while got < n {
        match r.read(&mut b[got..]) {
            Ok(0) => return Err("the peer closed the control connection".into()),
            Ok(k) => got += k,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                if stopping() || Instant::now() >= t {
                    return Err("control connection: output cut short".into());
                }
            }
            Err(e) => return Err(format!("control connection: {e}")),
        }
    }
    Ok(String::from_utf8_lossy(&b).into_owned())
}

fn send(w: &mut TcpStream, s: &str) -> Result<(), String> {
    w.write_all(s.as_bytes())
        .and_then(|_| w.flush())
        .map_err(|e| format!("control connection: {e}"))
}

impl Peer {
    pub fn connect(host: IpAddr, port: u16, timeout: Duration) -> Result<Peer, String> {
        let sa = SocketAddr::new(host, port);
        let s = TcpStream::connect_timeout(&sa, Duration::from_secs(10))
            .map_err(|e| format!("cannot reach the serving instance at {sa} ({e}): is `rdmacm-rs-check --serve` running there?"))?;
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .map_err(|e| e.to_string())?;
        let w = s.try_clone().map_err(|e| e.to_string())?;
        let mut p = Peer {
            r: BufReader::new(s),
            w,
            wait: timeout + Duration::from_secs(30),
        };
        send(&mut p.w, &format!("HELLO {}\n", env!("CARGO_PKG_VERSION")))?;
        let l = read_line(&mut p.r, p.wait)?;
        if l != "OK" {
            return Err(format!(
                "the serving instance says: {}",
                l.strip_prefix("NO ").unwrap_or(&l)
            ));
        }
        Ok(p)
    }

    pub fn bye(&mut self) {
        let _ = send(&mut self.w, "BYE\n");
    }
}

impl cases::RemoteServer for Peer {
    fn start(&mut self, case: &str, lib: &str, c: &Ctx) -> Result<String, String> {
        send(
            &mut self.w,
            &format!(
                "RUN {case} {lib} {} {} {} {}\n",
                c.addr, c.local, c.tcp_port, c.quick as u8
            ),
        )?;
        let l = read_line(&mut self.r, self.wait)?;
        if let Some(n) = l.strip_prefix("READY") {
            return Ok(n.trim().to_string());
        }
        Err(format!(
            "the peer cannot run it: {}",
            l.strip_prefix("NOTRUN ").unwrap_or(&l)
        ))
    }

    fn finish(&mut self, ok: bool) -> Result<(End, String, String), String> {
        send(&mut self.w, &format!("DONE {}\n", ok as u8))?;
        let l = read_line(&mut self.r, self.wait)?;
        let end = end_parse(
            l.strip_prefix("END ")
                .ok_or_else(|| format!("control connection: got '{l}'"))?,
        );
        let out = read_blob(&mut self.r, "OUT ", self.wait)?;
        let err = read_blob(&mut self.r, "ERR ", self.wait)?;
        Ok((end, out, err))
    }
}

/// The local port through which `host` is reached, and the source address (`ip route get`).
pub fn route_to(host: IpAddr, ports: &[Port]) -> Result<(String, IpAddr), String> {
    let out = std::process::Command::new("ip")
        .args(["-j", "route", "get", &host.to_string()])
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let obj = crate::discover::json_objects(&text)
        .first()
        .copied()
        .unwrap_or("");
    let dev = crate::discover::json_str(obj, "dev").ok_or_else(|| format!("no route to {host}"))?;
    let src = crate::discover::json_str(obj, "prefsrc")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no source address towards {host}"))?;
    let p = ports
        .iter()
        .find(|p| p.netdev.as_deref() == Some(dev.as_str()) && p.unusable.is_none())
        .ok_or_else(|| {
            format!("{host} is reached through {dev}, which is not a usable RDMA port's interface")
        })?;
    Ok((p.label(), src))
}

pub fn resolve_host(h: &str) -> Result<IpAddr, String> {
    if let Ok(a) = h.parse() {
        return Ok(a);
    }
    (h, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut i| i.next())
        .map(|s| s.ip())
        .ok_or_else(|| format!("--peer {h}: no such host"))
}

pub struct ServeOpts<'a> {
    pub port: u16,
    pub quick_default: bool,
    pub timeout: Duration,
    pub work: &'a Path,
    pub cmtime_new: bool,
    pub rdma_resolve: Option<&'a Path>,
}

/// --serve: waits for one checking run and serves it.  Ok(number of cases served).
pub fn serve(o: &ServeOpts, ports: &[Port], libs: &[Lib; 2]) -> Result<usize, String> {
    let l = TcpListener::bind(("::", o.port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", o.port)))
        .map_err(|e| format!("cannot listen on TCP port {}: {e}", o.port))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    eprintln!(
        "rdmacm-rs-check: serving one checking run on TCP port {} (run `rdmacm-rs-check --peer <this host>` on the other host)",
        o.port
    );
    let (s, from) = loop {
        match l.accept() {
            Ok(x) => break x,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if stopping() {
                    return Err("interrupted".into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    drop(l);
    eprintln!("rdmacm-rs-check: checking run from {from}");
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .map_err(|e| e.to_string())?;
    let mut w = s.try_clone().map_err(|e| e.to_string())?;
    let mut r = BufReader::new(s);
    let idle = Duration::from_secs(3600);
    let hello = read_line(&mut r, Duration::from_secs(30))?;
    if hello != format!("HELLO {}", env!("CARGO_PKG_VERSION")) {
        send(
            &mut w,
            &format!(
                "NO version {} here, the client sent '{hello}'\n",
                env!("CARGO_PKG_VERSION")
            ),
        )?;
        return Err(format!("the client is not this version: '{hello}'"));
    }
    send(&mut w, "OK\n")?;
    let mut served = 0;
    loop {
        let line = match read_line(&mut r, idle) {
            Ok(l) => l,
            Err(e) if e.starts_with("the peer closed") => return Ok(served),
            Err(e) => return Err(e),
        };
        if line == "BYE" {
            return Ok(served);
        }
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() != 7 || f[0] != "RUN" {
            send(&mut w, "NOTRUN not understood\n")?;
            continue;
        }
        let parsed = (|| -> Result<(&'static str, &Lib, IpAddr, IpAddr, u16, bool), String> {
            let case = cases::find(f[1]).ok_or("no such case")?.name;
            let lib = libs
                .iter()
                .find(|l| l.name == f[2])
                .ok_or("no such library")?;
            let a: IpAddr = f[3].parse().map_err(|_| "bad address")?;
            let b: IpAddr = f[4].parse().map_err(|_| "bad address")?;
            let p: u16 = f[5].parse().map_err(|_| "bad port")?;
            Ok((case, lib, a, b, p, f[6] == "1" || o.quick_default))
        })();
        let (case, lib, a, b, p, quick) = match parsed {
            Ok(x) => x,
            Err(e) => {
                send(&mut w, &format!("NOTRUN {e}\n"))?;
                continue;
            }
        };
        let Some(port) = ports
            .iter()
            .find(|pt| pt.addr == Some(a) && pt.unusable.is_none())
        else {
            send(
                &mut w,
                &format!("NOTRUN no usable RDMA port here has the address {a}\n"),
            )?;
            continue;
        };
        let c = Ctx {
            port,
            addr: a,
            local: b,
            peer: None,
            tcp_port: p,
            quick,
            work: o.work,
            timeout: o.timeout,
            cmtime_new: o.cmtime_new,
            rdma_resolve: o.rdma_resolve,
        };
        let tag = format!("{case}.{}.{}", port.label().replace('/', "-"), lib.name);
        let (mut srv, note) = match cases::serve_start(case, lib, &c, &tag) {
            Ok(x) => x,
            Err(e) => {
                send(&mut w, &format!("NOTRUN {e}\n"))?;
                continue;
            }
        };
        eprintln!("rdmacm-rs-check: {case} with {} for {b}", lib.called());
        send(&mut w, &format!("READY {note}\n"))?;
        let done = read_line(&mut r, o.timeout + Duration::from_secs(30));
        let ok = matches!(done.as_deref(), Ok("DONE 1"));
        let end = srv.wait_or_stop(cases::server_grace(ok));
        done?;
        let (out, err) = (srv.stdout(), srv.stderr());
        send(
            &mut w,
            &format!(
                "END {}\nOUT {}\n{out}ERR {}\n{err}",
                end_token(&end),
                out.len(),
                err.len()
            ),
        )?;
        served += 1;
    }
}
