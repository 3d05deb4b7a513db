// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! udaddy in Rust: unreliable datagrams between a client and a server,
//! on the wire compatible with rdma-core's `udaddy`, with no `unsafe` and
//! no C library.
//!
//! ```text
//! udaddy [-b bind] [-c connections] [-C count] [-S size] [-T secs]              server
//! udaddy -s server [-y] [-b bind] [-c connections] [-C count] [-S size] [-T secs]    client
//! ```
//!
//! The protocol (UDP port space, port 7174):
//!
//! 1. the client resolves the server's address and route on each of its
//!    `-c` ids, creates a UD QP, posts `-C` receives (each `-S` bytes plus
//!    the 40-byte GRH a UD receive starts with) and connects: a UD
//!    "connect" is a service ID resolution, whose answer
//!    (`EventKind::Established`) carries the server's QP number, qkey and
//!    the route to it (`Event::ud_param`), from which it makes an address
//!    handle;
//! 2. the server, for each connection request, creates a UD QP on the
//!    request's id, posts `-C` receives and accepts. The request tells it
//!    nothing of the client's QP or address;
//! 3. the client sends `-C` datagrams of `-S` bytes, each with its own QP
//!    number as immediate data;
//! 4. the server receives them; from the first one's completion and GRH it
//!    makes the address handle back to the client (`UdParam::from_wc`, as
//!    `ibv_create_ah_from_wc` in C), takes the client's QP number from the
//!    immediate data and the qkey from its own QP (`CmId::qkey`), then sends
//!    `-C` replies the same way (its QP number as immediate data);
//! 5. the client receives the replies.
//!
//! Each side checks every datagram here: received whole (`-S` bytes after
//! the GRH), with immediate data equal to the completion's source QP, and
//! on the client from the QP the server's answer named, with a GRH whose
//! source is the server's address. rdma-core's `udaddy` checks none of
//! this and puts no data of its own into the datagrams. A side that misses
//! datagrams fails after `-T` seconds (rdma-core's waits forever).
//!
//! With `-y` the client's ids are synchronous (`CmId::new`: each call
//! waits for its outcome) and the server's answer is
//! `CmId::peer_ud_param` after `connect`, which must be `None` before it.
//!
//! The example shows UD ids on an event channel and synchronous ones, `CmId::post_ud_send_with_imm`,
//! `Event::ud_param`, `AddressHandle`, `UdParam::from_wc`, `CmId::qkey` and
//! the UD fields of `WorkCompletion`.

#![forbid(unsafe_code)]

use rdmacm::{Access, AddressHandle, Blocking, CmId, ConnParam, Event, EventChannel, EventKind, MemoryRegion, Mode, OnChannel, PortSpace, QpCaps, UdParam, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PORT: u16 = 7174;
const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

struct Opts {
    server: Option<String>,
    bind: Option<IpAddr>,
    connections: usize,
    count: u32,
    size: usize,
    ps: PortSpace,
    timeout: Duration,
    sync: bool,
}

fn usage() -> ! {
    eprintln!("usage: udaddy [-s server [-y]] [-b bind] [-c connections] [-C count] [-S size] [-p ps] [-P udp|ipoib] [-T secs]");
    eprintln!("\t-s server\tthe server's address (client side; default: server side)\n\t-y\t\tclient: synchronous ids\n\t-b bind\t\tlocal address");
    eprintln!("\t-c connections\t(1)\n\t-C count\tdatagrams each way per connection (10)\n\t-S size\t\tdatagram size (100)");
    eprintln!("\t-p ps\t\tport space: 0x111 UDP (default), 0x2 IPoIB\n\t-P ps\t\tport space: udp or ipoib");
    eprintln!("\t-T secs\t\tgive up after this long without every event or datagram (30)");
    std::process::exit(22)
}

fn lookup(s: &str) -> Result<IpAddr, String> {
    if let Ok(ip) = s.parse() {
        return Ok(ip);
    }
    (s, 0).to_socket_addrs().ok().and_then(|mut a| a.next()).map(|a| a.ip()).ok_or_else(|| format!("cannot resolve {s}"))
}

fn parse() -> Opts {
    let mut o = Opts { server: None, bind: None, connections: 1, count: 10, size: 100, ps: PortSpace::Udp, timeout: Duration::from_secs(30), sync: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("udaddy: {what} needs a value");
                usage()
            })
        };
        match a.as_str() {
            "-s" => o.server = Some(val("-s")),
            "-y" => o.sync = true,
            "-b" => o.bind = Some(lookup(&val("-b")).unwrap_or_else(|m| { eprintln!("udaddy: {m}"); usage() })),
            "-c" => o.connections = val("-c").parse().unwrap_or_else(|_| usage()),
            "-C" => o.count = val("-C").parse().unwrap_or_else(|_| usage()),
            "-S" => o.size = val("-S").parse().unwrap_or_else(|_| usage()),
            "-T" => o.timeout = Duration::from_secs_f64(val("-T").parse().unwrap_or_else(|_| usage())),
            "-p" => {
                let v = val("-p");
                o.ps = match u32::from_str_radix(v.trim_start_matches("0x"), if v.starts_with("0x") { 16 } else { 10 }) {
                    Ok(0x111) => PortSpace::Udp,
                    Ok(0x2) => PortSpace::Ipoib,
                    _ => usage(),
                }
            }
            "-P" => {
                o.ps = match val("-P").to_ascii_lowercase().as_str() {
                    "udp" => PortSpace::Udp,
                    "ipoib" => PortSpace::Ipoib,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    if o.size == 0 {
        o.count = 0;
    }
    if o.connections == 0 {
        usage()
    }
    o
}

/// One connection: its id, a region of `count` receive slots and one send
/// slot (each GRH_LEN + size bytes), and the remote end once known. The
/// id is on an event channel, or synchronous (`-y`).
struct Node<M: Mode = OnChannel> {
    id: CmId<M>,
    mr: Option<MemoryRegion>,
    ah: Option<AddressHandle>,
    remote: Option<UdParam>,
}

fn slot(o: &Opts) -> usize {
    GRH_LEN + o.size
}

impl<M: Mode> Node<M> {
    /// The UD QP, the region and the receives (before connecting or
    /// accepting, so no datagram finds the queue empty).
    fn init(&mut self, o: &Opts) -> Result<(), String> {
        let n = o.count.max(1);
        self.id.create_qp(QpCaps { max_send_wr: n, max_recv_wr: n, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }).map_err(|e| format!("create QP: {e}"))?;
        let slot = slot(o);
        let mr = MemoryRegion::new(&self.id, slot * (o.count as usize + 1), Access::LOCAL_WRITE).map_err(|e| format!("register memory: {e}"))?;
        for i in 0..o.count as usize {
            let sge = mr.sge(i * slot..(i + 1) * slot).map_err(|e| format!("receive buffer: {e}"))?;
            self.id.post_recv(i as u64, &[sge]).map_err(|e| format!("post receive: {e}"))?;
        }
        self.mr = Some(mr);
        Ok(())
    }

    fn my_qpn(&self) -> u32 {
        self.id.qp_num().unwrap_or(0)
    }

    /// `count` datagrams to the remote end, each with our QP number as
    /// immediate data (work requests count.., after the receives).
    fn send_all(&mut self, o: &Opts, text: &str, signaled: bool) -> Result<(), String> {
        let qpn = self.my_qpn();
        let (Some(mr), Some(ah), Some(to)) = (&mut self.mr, &self.ah, &self.remote) else {
            return Err("no address to send to".into());
        };
        let off = slot(o) * o.count as usize;
        let mut msg = vec![0u8; o.size];
        let l = text.len().min(o.size);
        msg[..l].copy_from_slice(&text.as_bytes()[..l]);
        mr.write(off, &msg).map_err(|e| format!("fill datagram: {e}"))?;
        let sge = mr.sge(off..off + o.size).map_err(|e| format!("send buffer: {e}"))?;
        for i in 0..o.count {
            self.id.post_ud_send_with_imm(u64::from(o.count + i), &[sge], ah, to.qp_num(), to.qkey(), qpn, signaled).map_err(|e| format!("post send: {e}"))?;
        }
        Ok(())
    }

    /// Waits for `recvs` receives and `sends` send completions (a send
    /// completion beyond those is checked and counted too) until `end`;
    /// the receives' completions in order.
    fn poll(&self, recvs: u32, sends: u32, end: Instant) -> Result<Vec<WorkCompletion>, String> {
        let mut got = Vec::new();
        let mut sent = 0;
        let mut wcs = [WorkCompletion::default(); 8];
        while (got.len() as u32) < recvs || sent < sends {
            let k = self.id.poll_cq(&mut wcs).map_err(|e| format!("poll CQ: {e}"))?;
            if k == 0 {
                if Instant::now() >= end {
                    return Err(format!("{} of {recvs} datagrams and {sent} of {sends} send completions in time", got.len()));
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            for wc in &wcs[..k] {
                if wc.status != WcStatus::Success {
                    return Err(format!("completion {} failed: {:?} (vendor error {:#x})", wc.wr_id, wc.status, wc.vendor_err));
                }
                match wc.opcode {
                    WcOpcode::Recv => got.push(*wc),
                    WcOpcode::Send => sent += 1,
                    op => return Err(format!("completion {}: unexpected {op:?}", wc.wr_id)),
                }
            }
        }
        Ok(got)
    }

    /// The GRH slot of the receive `wc` completed.
    fn grh(&self, o: &Opts, wc: &WorkCompletion) -> Result<[u8; GRH_LEN], String> {
        let mut grh = [0u8; GRH_LEN];
        let mr = self.mr.as_ref().ok_or("no region")?;
        mr.read(wc.wr_id as usize * slot(o), &mut grh).map_err(|e| format!("read GRH: {e}"))?;
        Ok(grh)
    }
}

/// A received datagram is whole and carries its sender's QP number as
/// immediate data.
fn check_datagram(o: &Opts, wc: &WorkCompletion) -> Result<(), String> {
    if wc.byte_len as usize != GRH_LEN + o.size {
        return Err(format!("datagram {}: {} bytes, expected {} (GRH and data)", wc.wr_id, wc.byte_len, GRH_LEN + o.size));
    }
    match wc.imm {
        Some(imm) if imm == wc.src_qp && wc.wc_flags.contains(WcFlags::WITH_IMM) => Ok(()),
        Some(imm) => Err(format!("datagram {}: immediate data {imm:#x} is not the sender's QP {:#x}", wc.wr_id, wc.src_qp)),
        None => Err(format!("datagram {}: no immediate data (the sender's QP number)", wc.wr_id)),
    }
}

/// The next event of the channel (non-blocking), until `end`.
fn next_event(ch: &EventChannel, end: Instant) -> Result<Event<'_>, String> {
    loop {
        match ch.get_event() {
            Ok(ev) => return Ok(ev),
            Err(e) if e.errno() == libc::EAGAIN && Instant::now() < end => std::thread::sleep(Duration::from_millis(2)),
            Err(e) if e.errno() == libc::EAGAIN => return Err("no connection event in time".into()),
            Err(e) => return Err(format!("reading events: {e}")),
        }
    }
}

fn failed_event(ev: &Event<'_>) -> String {
    format!("event: {}, error: {}", ev.kind().name(), ev.status())
}

fn run_client(o: &Opts, server: &str) -> Result<(), String> {
    println!("udaddy: starting client");
    let ip = lookup(server)?;
    let dst = SocketAddr::new(ip, PORT);
    let src = o.bind.map(|b| SocketAddr::new(b, 0));
    let end = Instant::now() + o.timeout;
    if o.sync {
        transfer(o, connect_sync(o, src, dst)?, end)
    } else {
        transfer(o, connect_async(o, src, dst, end)?, end)
    }
}

/// The client's datagrams on its connections, and the server's replies.
fn transfer<M: Mode>(o: &Opts, mut nodes: Vec<Node<M>>, end: Instant) -> Result<(), String> {
    if o.count == 0 {
        return Ok(());
    }
    println!("initiating data transfers");
    for (i, n) in nodes.iter_mut().enumerate() {
        n.send_all(o, &format!("udaddy-rs datagram of connection {i}"), false)?;
    }
    println!("receiving data transfers");
    for (i, n) in nodes.iter().enumerate() {
        let server = n.remote.ok_or("not connected")?;
        for wc in n.poll(o.count, 0, end)? {
            check_datagram(o, &wc)?;
            if wc.src_qp != server.qp_num() {
                return Err(format!("connection {i}: a reply from QP {:#x}, the server's is {:#x}", wc.src_qp, server.qp_num()));
            }
            // The reply's GRH names the server: the address back to it is
            // the one its answer gave.
            if wc.wc_flags.contains(WcFlags::GRH) && server.is_global() {
                let back = UdParam::from_wc(&n.id, &wc, &n.grh(o, &wc)?).map_err(|e| format!("address from a reply: {e}"))?;
                if back.dgid() != server.dgid() {
                    return Err(format!("connection {i}: a reply from {}, the server is {}", Ipv6Addr::from(back.dgid()), Ipv6Addr::from(server.dgid())));
                }
            }
        }
        println!("udaddy: connection {i}: {} replies from the server's QP, each with its QP number as immediate data", o.count);
    }
    println!("data transfers complete");
    Ok(())
}

/// The client's connections on synchronous ids: each step waits for its
/// outcome; the answer is the id's `peer_ud_param`.
fn connect_sync(o: &Opts, src: Option<SocketAddr>, dst: SocketAddr) -> Result<Vec<Node<Blocking>>, String> {
    println!("udaddy: connecting");
    let mut nodes = Vec::new();
    for _ in 0..o.connections {
        let id = CmId::new(o.ps).map_err(|e| format!("create id: {e}"))?;
        id.resolve_addr(src, dst, RESOLVE_TIMEOUT).map_err(|e| format!("resolve address: {e}"))?;
        id.resolve_route(RESOLVE_TIMEOUT).map_err(|e| format!("resolve route: {e}"))?;
        // Route resolution carries no UD parameters.
        if let Some(u) = id.peer_ud_param() {
            return Err(format!("UD parameters before the connect: {u:?}"));
        }
        let mut n = Node { id, mr: None, ah: None, remote: None };
        n.init(o)?;
        n.id.connect(&ConnParam::default()).map_err(|e| format!("connect: {e}"))?;
        let ud = n.id.peer_ud_param().ok_or("the server's answer has no UD parameters")?;
        n.ah = Some(AddressHandle::new(&n.id, &ud).map_err(|e| format!("address handle: {e}"))?);
        n.remote = Some(ud);
        nodes.push(n);
    }
    Ok(nodes)
}

/// The client's connections on one event channel, driven by its events
/// (the ids keep the channel open).
fn connect_async(o: &Opts, src: Option<SocketAddr>, dst: SocketAddr, end: Instant) -> Result<Vec<Node>, String> {
    let ch = EventChannel::new().map_err(|e| format!("event channel: {e}"))?;
    ch.set_nonblocking(true).map_err(|e| format!("event channel: {e}"))?;
    let mut nodes = Vec::new();
    for _ in 0..o.connections {
        let id = ch.create_id(o.ps).map_err(|e| format!("create id: {e}"))?;
        nodes.push(Node { id, mr: None, ah: None, remote: None });
    }
    println!("udaddy: connecting");
    for n in &nodes {
        n.id.resolve_addr(src, dst, RESOLVE_TIMEOUT).map_err(|e| format!("resolve address: {e}"))?;
    }
    let mut left = nodes.len();
    while left > 0 {
        let ev = next_event(&ch, end)?;
        let Some(n) = nodes.iter_mut().find(|n| ev.is_for(&n.id)) else { continue };
        match ev.kind() {
            EventKind::AddrResolved if ev.status() == 0 => n.id.resolve_route(RESOLVE_TIMEOUT).map_err(|e| format!("resolve route: {e}"))?,
            EventKind::RouteResolved if ev.status() == 0 => {
                n.init(o)?;
                n.id.connect(&ConnParam::default()).map_err(|e| format!("connect: {e}"))?;
            }
            EventKind::Established if ev.status() == 0 => {
                // The answer names the server's QP, its qkey and the route.
                let ud = ev.ud_param().ok_or("the server's answer has no UD parameters")?;
                n.ah = Some(AddressHandle::new(&n.id, &ud).map_err(|e| format!("address handle: {e}"))?);
                n.remote = Some(ud);
                left -= 1;
            }
            _ => return Err(failed_event(&ev)),
        }
    }
    Ok(nodes)
}

fn run_server(o: &Opts) -> Result<(), String> {
    println!("udaddy: starting server");
    let ch = EventChannel::new().map_err(|e| format!("event channel: {e}"))?;
    ch.set_nonblocking(true).map_err(|e| format!("event channel: {e}"))?;
    let listener = ch.create_id(o.ps).map_err(|e| format!("create id: {e}"))?;
    let addr = SocketAddr::new(o.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), PORT);
    listener.bind_addr(addr).map_err(|e| format!("bind address: {e}"))?;
    listener.listen(0).map_err(|e| format!("listen: {e}"))?;
    let mut nodes: Vec<Node> = Vec::new();
    // The clients may take their time to start: no deadline here.
    while nodes.len() < o.connections {
        let mut ev = next_event(&ch, Instant::now() + Duration::from_secs(3600))?;
        match ev.kind() {
            EventKind::ConnectRequest => {
                // A UD request names no QP and no address of the client.
                if ev.ud_param().is_some() {
                    return Err("a UD connection request with UD parameters".into());
                }
                let id = ev.take_request().ok_or("a request without its id")?;
                drop(ev);
                let mut n = Node { id, mr: None, ah: None, remote: None };
                n.init(o)?;
                n.id.accept(&ConnParam::default()).map_err(|e| format!("accept: {e}"))?;
                nodes.push(n);
            }
            _ => return Err(failed_event(&ev)),
        }
    }
    if o.count == 0 {
        return Ok(());
    }
    println!("receiving data transfers");
    let end = Instant::now() + o.timeout;
    for (i, n) in nodes.iter_mut().enumerate() {
        let wcs = n.poll(o.count, 0, end)?;
        for wc in &wcs {
            check_datagram(o, wc)?;
        }
        // The first datagram makes the way back: its sender's address from
        // the completion and the GRH, the QP number it sent as immediate
        // data, our own QP's qkey.
        let first = wcs[0];
        let back = UdParam::from_wc(&n.id, &first, &n.grh(o, &first)?).map_err(|e| format!("address from a datagram: {e}"))?;
        let qpn = first.imm.ok_or("no immediate data")?;
        let qkey = n.id.qkey().map_err(|e| format!("query qkey: {e}"))?;
        if back.qp_num() != qpn || back.qkey() != qkey {
            return Err(format!("UdParam::from_wc: QP {:#x} qkey {:#x}, expected {qpn:#x} {qkey:#x}", back.qp_num(), back.qkey()));
        }
        n.ah = Some(AddressHandle::from_wc(&n.id, &first, &n.grh(o, &first)?).map_err(|e| format!("address handle: {e}"))?);
        n.remote = Some(back);
        let from = if back.is_global() { Ipv6Addr::from(back.dgid()).to_string() } else { format!("LID {:#x}", back.dlid()) };
        println!("udaddy: connection {i}: {} datagrams from {from}, each with the client's QP number as immediate data", o.count);
    }
    println!("sending replies");
    for (i, n) in nodes.iter_mut().enumerate() {
        n.send_all(o, &format!("udaddy-rs reply of connection {i}"), true)?;
    }
    for n in &nodes {
        n.poll(0, o.count, end)?;
    }
    println!("data transfers complete");
    drop(nodes);
    drop(listener);
    Ok(())
}

fn main() -> ExitCode {
    let o = parse();
    let r = match &o.server {
        Some(s) => run_client(&o, s),
        None => run_server(&o),
    };
    println!("test complete");
    match r {
        Ok(()) => {
            println!("return status 0");
            ExitCode::SUCCESS
        }
        Err(m) => {
            println!("udaddy: failed: {m}");
            eprintln!("udaddy: {m}");
            ExitCode::FAILURE
        }
    }
}
