// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rping in Rust: the ping-pong of rdma-core's `rping`, client and server,
//! on the wire compatible with it, with no `unsafe` and no C library.
//!
//! ```text
//! rping -s [-vV] [-a addr] [-p port] [-S size]             server
//! rping -c [-vV] [-I src] -a addr [-p port] [-C count] [-S size]   client
//! ```
//!
//! The protocol (both sides run on an RC connection made by the connection
//! manager; every message is 16 bytes: buffer address, big-endian u64;
//! rkey, u32; length, u32):
//!
//! 1. the client fills its source buffer with `rdma-ping-<n>: ` and a run of
//!    letters, and sends the buffer's address, rkey and length;
//! 2. the server RDMA-READs that buffer into its own, prints it (`-v`) and
//!    sends a go-ahead;
//! 3. the client sends the address, rkey and length of its sink buffer;
//! 4. the server RDMA-WRITEs the string it read into the sink and sends a
//!    go-ahead; the client compares sink and source (`-V`), prints the sink
//!    (`-v`) and starts the next ping.
//!
//! After `-C` pings (0: forever) the client disconnects; the server serves
//! one connection until its client disconnects.
//!
//! The example shows an event channel with a listening id and a connection
//! request's owned id, a QP on an id, registered memory, sends, receives,
//! RDMA reads and writes and their completions.
//!
//! The ping data is never copied by the program: the buffers are plain
//! `Vec<u8>`s registered in place (`MemoryRegion::from_buffer`). The
//! client's source, which the device only reads, stays registered and is
//! filled through `as_mut_slice`; a buffer the device writes (the client's
//! sink, the server's copy of the ping) is registered for one step and
//! taken back with `into_inner` once its completion (or the peer's
//! go-ahead) says the bytes are there, so the program reads them in place.
//! Only the 16-byte messages go through copying regions. A second thread reads the
//! channel's events once the connection is up: the peer's disconnect moves
//! our QP to the error state (our own `disconnect`), which flushes the
//! receive the data path is waiting for.

#![forbid(unsafe_code)]

use rdmacm::{OnChannel, Access, CmId, ConnParam, EventChannel, EventKind, MemoryRegion, PortSpace, QpCaps, SendOp, WcOpcode, WcStatus, WorkCompletion};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const DEFAULT_PORT: u16 = 7174;
const DEFAULT_SIZE: usize = 64;
/// The longest ping prefix (`rdma-ping-2147483647: `) and its NUL, plus a little.
const MIN_SIZE: usize = 26;
const MAX_SIZE: usize = 65535;
/// One advert (or go-ahead) message: address, rkey, length.
const MSG_LEN: usize = 16;
/// The resolve timeouts of rping.
const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

// Work request numbers, to tell completions apart in debug output.
const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RDMA: u64 = 3;

struct Opts {
    server: bool,
    addr: Option<IpAddr>,
    src: Option<IpAddr>,
    port: u16,
    count: u64,
    size: usize,
    verbose: bool,
    validate: bool,
}

fn usage() -> ! {
    eprintln!("usage: rping -s [-vV] [-S size] [-C count] [-a addr] [-p port]");
    eprintln!("       rping -c [-vV] [-S size] [-C count] [-I addr] -a addr [-p port]");
    eprintln!("\t-c\t\tclient side\n\t-s\t\tserver side\n\t-I addr\t\tsource address (client)");
    eprintln!("\t-v\t\tdisplay ping data\n\t-V\t\tvalidate ping data\n\t-S size\t\tping data size ({MIN_SIZE}-{MAX_SIZE})");
    eprintln!("\t-C count\tping count (client; 0: forever)\n\t-a addr\t\taddress\n\t-p port\t\tport ({DEFAULT_PORT})");
    std::process::exit(22)
}

/// An IP address, or the first address a host name resolves to.
fn lookup(s: &str) -> IpAddr {
    if let Ok(ip) = s.parse() {
        return ip;
    }
    match (s, 0).to_socket_addrs().ok().and_then(|mut a| a.next()) {
        Some(a) => a.ip(),
        None => {
            eprintln!("rping: cannot resolve {s}");
            std::process::exit(22)
        }
    }
}

fn number<T: std::str::FromStr>(s: &str) -> T {
    s.parse().unwrap_or_else(|_| usage())
}

/// getopt-style: flags may be grouped (`-vV`), a value follows its letter
/// or is the next argument.
fn parse_args() -> Opts {
    let mut o = Opts { server: false, addr: None, src: None, port: DEFAULT_PORT, count: 0, size: DEFAULT_SIZE, verbose: false, validate: false };
    let mut side = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else { usage() };
        for (pos, c) in flags.char_indices() {
            if "aIpCS".contains(c) {
                let rest = &flags[pos + c.len_utf8()..];
                let v = if !rest.is_empty() {
                    rest.to_string()
                } else {
                    i += 1;
                    args.get(i).cloned().unwrap_or_else(|| usage())
                };
                match c {
                    'a' => o.addr = Some(lookup(&v)),
                    'I' => o.src = Some(lookup(&v)),
                    'p' => o.port = number(&v),
                    'C' => o.count = number(&v),
                    _ => o.size = number(&v),
                }
                break;
            }
            match c {
                's' => side = Some(true),
                'c' => side = Some(false),
                'v' => o.verbose = true,
                'V' => o.validate = true,
                'd' => {} // rping's debug output: nothing to add here
                _ => usage(),
            }
        }
        i += 1;
    }
    o.server = side.unwrap_or_else(|| usage());
    if !(MIN_SIZE..=MAX_SIZE).contains(&o.size) {
        eprintln!("rping: invalid size {} (valid range is {MIN_SIZE} to {MAX_SIZE})", o.size);
        std::process::exit(22);
    }
    if !o.server && o.addr.is_none() {
        usage();
    }
    o
}

/// A failure, with what to print.
type Fail = String;

fn fail<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> Fail + '_ {
    move |e| format!("{what}: {e}")
}

/// The registered message buffers of one side (the ping data has its own,
/// see `serve` and `ping`).
struct Buffers {
    /// Where adverts and go-aheads arrive.
    recv: MemoryRegion,
    /// What this side sends (its adverts, or the server's go-aheads).
    send: MemoryRegion,
}

impl Buffers {
    fn new(id: &CmId<OnChannel>) -> Result<Buffers, Fail> {
        Ok(Buffers {
            recv: MemoryRegion::new(id, MSG_LEN, Access::LOCAL_WRITE).map_err(fail("recv buffer"))?,
            send: MemoryRegion::new(id, MSG_LEN, Access::NONE).map_err(fail("send buffer"))?,
        })
    }
}

/// Registers the program's `buf` in place for one step (no copy).
fn register(id: &CmId<OnChannel>, buf: Vec<u8>, access: Access, what: &str) -> Result<MemoryRegion<Vec<u8>>, Fail> {
    MemoryRegion::from_buffer(id, buf, access).map_err(|(e, _)| format!("registering the {what}: {e}"))
}

/// Deregisters `mr` and takes its buffer back, with the bytes the device
/// put there.
fn take_back(mr: MemoryRegion<Vec<u8>>, what: &str) -> Result<Vec<u8>, Fail> {
    mr.into_inner().map_err(|(e, _)| format!("deregistering the {what}: {e}"))
}

/// The QP both sides use: rping's send queue depth, two receives.
fn create_qp(id: &CmId<OnChannel>) -> Result<(), Fail> {
    id.create_qp(QpCaps { max_send_wr: 16, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }).map(drop).map_err(fail("create_qp"))
}

fn post_recv(id: &CmId<OnChannel>, b: &Buffers) -> Result<(), Fail> {
    let sge = b.recv.sge(0..MSG_LEN).map_err(fail("recv sge"))?;
    id.post_recv(WR_RECV, &[sge]).map_err(fail("post recv"))
}

/// The connection parameters of rping: one RDMA read in flight each way.
fn conn_param() -> ConnParam {
    ConnParam { responder_resources: 1, initiator_depth: 1, retry_count: 7, rnr_retry_count: 7, ..ConnParam::default() }
}

/// Waits for the next event of `ch` for `id` and requires it to be `want`.
fn expect_event(ch: &EventChannel, id: &CmId<OnChannel>, want: EventKind) -> Result<(), Fail> {
    loop {
        let ev = ch.get_event().map_err(fail("rdma_get_cm_event"))?;
        if !ev.is_for(id) {
            continue;
        }
        if ev.kind() == want && ev.status() == 0 {
            return Ok(());
        }
        return Err(format!("cma event {}, error {} (waiting for {want})", ev.kind(), ev.status()));
    }
}

/// How waiting for a completion ended.
enum Waited {
    Done(WorkCompletion),
    /// The QP was flushed: the connection is gone.
    Flushed,
}

/// The next completion of kind `want`; completions of our sends (adverts,
/// go-aheads) are passed over.
fn wait_for(id: &CmId<OnChannel>, want: WcOpcode) -> Result<Waited, Fail> {
    loop {
        let wc = id.wait_cq().map_err(fail("waiting for a completion"))?;
        match wc.status {
            WcStatus::WrFlushErr => return Ok(Waited::Flushed),
            WcStatus::Error(n) => return Err(format!("cq completion failed status {n} (wr {}, vendor error {})", wc.wr_id, wc.vendor_err)),
            WcStatus::Success => {}
        }
        if wc.opcode == want {
            return Ok(Waited::Done(wc));
        }
        if wc.opcode != WcOpcode::Send {
            return Err(format!("unexpected completion {:?} (wr {})", wc.opcode, wc.wr_id));
        }
    }
}

/// `wait_for` where the connection must stay up.
fn need(id: &CmId<OnChannel>, want: WcOpcode) -> Result<WorkCompletion, Fail> {
    match wait_for(id, want)? {
        Waited::Done(wc) => Ok(wc),
        Waited::Flushed => Err(format!("disconnected while waiting for {want:?}")),
    }
}

/// A received advert: (address, rkey, length).
fn received_advert(id: &CmId<OnChannel>, b: &Buffers, wc: &WorkCompletion) -> Result<(u64, u32, u32), Fail> {
    if wc.byte_len as usize != MSG_LEN {
        return Err(format!("received bogus data, size {}", wc.byte_len));
    }
    let mut m = [0u8; MSG_LEN];
    b.recv.read(0, &mut m).map_err(fail("recv buffer"))?;
    // The buffer is free again: post it for the peer's next message.
    post_recv(id, b)?;
    let addr = u64::from_be_bytes(m[0..8].try_into().expect("8 bytes"));
    let rkey = u32::from_be_bytes(m[8..12].try_into().expect("4 bytes"));
    let len = u32::from_be_bytes(m[12..16].try_into().expect("4 bytes"));
    Ok((addr, rkey, len))
}

/// Sends the advert of the first `len` bytes of the region at `addr`
/// with `rkey`.
fn send_advert(id: &CmId<OnChannel>, b: &mut Buffers, (addr, rkey): (u64, u32), len: usize) -> Result<(), Fail> {
    let mut m = [0u8; MSG_LEN];
    m[0..8].copy_from_slice(&addr.to_be_bytes());
    m[8..12].copy_from_slice(&rkey.to_be_bytes());
    m[12..16].copy_from_slice(&(len as u32).to_be_bytes());
    b.send.write(0, &m).map_err(fail("send buffer"))?;
    send_msg(id, b)
}

/// Sends the 16-byte message in the send buffer (an advert, or as the
/// server's go-ahead whatever it holds).
fn send_msg(id: &CmId<OnChannel>, b: &Buffers) -> Result<(), Fail> {
    let sge = b.send.sge(0..MSG_LEN).map_err(fail("send sge"))?;
    id.post_send(WR_SEND, &[sge], SendOp::Send, true).map_err(fail("post send"))
}

/// The bytes of `buf` up to its first NUL (a C string).
fn c_string(buf: &[u8]) -> &[u8] {
    &buf[..buf.iter().position(|&c| c == 0).unwrap_or(buf.len())]
}

/// Reads the peer's disconnect (or device removal) off the channel once
/// the connection is up, and answers it with our own disconnect, which
/// puts our QP into the error state and flushes what the data path waits
/// for. Connection requests that come meanwhile are refused (their events
/// are dropped untaken).
fn watch(ch: &EventChannel, conn: &CmId<OnChannel>, who: &str, gone: &AtomicBool) {
    loop {
        let ev = match ch.get_event() {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("rdma_get_cm_event: {e}");
                return;
            }
        };
        let (kind, mine) = (ev.kind(), ev.is_for(conn));
        drop(ev);
        match kind {
            EventKind::Disconnected | EventKind::DeviceRemoval if mine => {
                eprintln!("{who} {kind} EVENT...");
                gone.store(true, Ordering::SeqCst);
                let _ = conn.disconnect();
                return;
            }
            EventKind::ConnectRequest => eprintln!("{who}: refusing another connection"),
            k => eprintln!("unhandled event: {k}, ignoring"),
        }
    }
}

/// Runs `work` on the connection with `watch` beside it; exits the process
/// on a failure (the watcher would wait for an event that may not come).
fn with_watcher(ch: &EventChannel, conn: &CmId<OnChannel>, who: &str, work: impl FnOnce(&AtomicBool) -> Result<(), Fail>) {
    let gone = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| watch(ch, conn, who, &gone));
        if let Err(e) = work(&gone) {
            let _ = std::io::stdout().flush();
            eprintln!("rping {who} failed: {e}");
            std::process::exit(1);
        }
    });
}

fn run_server(o: &Opts) -> Result<(), Fail> {
    let ch = EventChannel::new().map_err(fail("rdma_create_event_channel"))?;
    let listener = ch.create_id(PortSpace::Tcp).map_err(fail("rdma_create_id"))?;
    let addr = SocketAddr::new(o.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), o.port);
    listener.bind_addr(addr).map_err(fail("rdma_bind_addr"))?;
    listener.listen(3).map_err(fail("rdma_listen"))?;
    // The first connection request: its id is ours.
    let conn = loop {
        let mut ev = ch.get_event().map_err(fail("rdma_get_cm_event"))?;
        if ev.kind() == EventKind::ConnectRequest {
            break ev.take_request().ok_or("a connection request without an id")?;
        }
        eprintln!("unhandled event: {}, ignoring", ev.kind());
    };
    create_qp(&conn)?;
    let b = Buffers::new(&conn)?;
    post_recv(&conn, &b)?;
    conn.accept(&conn_param()).map_err(fail("rdma_accept"))?;
    expect_event(&ch, &conn, EventKind::Established)?;
    with_watcher(&ch, &conn, "server", |gone| serve(&conn, &b, o, gone));
    Ok(())
}

/// The server's loop: one ping per turn, until the client disconnects.
/// Its copy of the ping is a `Vec` registered for the RDMA READ into it
/// (the device writes it), read in place once taken back, and registered
/// again, read-only, for the RDMA WRITE from it.
fn serve(id: &CmId<OnChannel>, b: &Buffers, o: &Opts, gone: &AtomicBool) -> Result<(), Fail> {
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; o.size];
    loop {
        // The client's source advert, or its disconnect.
        let wc = match wait_for(id, WcOpcode::Recv)? {
            Waited::Done(wc) => wc,
            Waited::Flushed if gone.load(Ordering::SeqCst) => return Ok(()),
            Waited::Flushed => return Err("the QP was flushed".into()),
        };
        let (addr, rkey, len) = received_advert(id, b, &wc)?;
        let len = len as usize;
        if len > o.size {
            return Err(format!("the client's buffer ({len} bytes) is larger than ours ({})", o.size));
        }
        let mr = register(id, buf, Access::LOCAL_WRITE, "rdma buffer")?;
        let sge = mr.sge(0..len).map_err(fail("rdma sge"))?;
        id.post_send(WR_RDMA, &[sge], SendOp::Read { remote_addr: addr, rkey }, true).map_err(fail("post rdma read"))?;
        need(id, WcOpcode::RdmaRead)?;
        buf = take_back(mr, "rdma buffer")?;
        let n = c_string(&buf).len();
        if o.verbose {
            writeln!(out, "server ping data: {}", String::from_utf8_lossy(&buf[..n])).map_err(fail("stdout"))?;
        }
        // Go ahead: the client sends its sink.
        send_msg(id, b)?;
        let wc = need(id, WcOpcode::Recv)?;
        let (addr, rkey, _) = received_advert(id, b, &wc)?;
        // The ping back, with its NUL, from the same bytes (the device only
        // reads them now).
        let n = (n + 1).min(o.size);
        let mr = register(id, buf, Access::NONE, "rdma buffer")?;
        let sge = mr.sge(0..n).map_err(fail("rdma sge"))?;
        id.post_send(WR_RDMA, &[sge], SendOp::Write { remote_addr: addr, rkey }, true).map_err(fail("post rdma write"))?;
        need(id, WcOpcode::RdmaWrite)?;
        buf = take_back(mr, "rdma buffer")?;
        // Go ahead: the next ping.
        send_msg(id, b)?;
    }
}

fn run_client(o: &Opts) -> Result<(), Fail> {
    let ch = EventChannel::new().map_err(fail("rdma_create_event_channel"))?;
    let id = ch.create_id(PortSpace::Tcp).map_err(fail("rdma_create_id"))?;
    let dst = SocketAddr::new(o.addr.expect("checked in parse_args"), o.port);
    id.resolve_addr(o.src.map(|ip| SocketAddr::new(ip, 0)), dst, RESOLVE_TIMEOUT).map_err(fail("rdma_resolve_addr"))?;
    expect_event(&ch, &id, EventKind::AddrResolved)?;
    id.resolve_route(RESOLVE_TIMEOUT).map_err(fail("rdma_resolve_route"))?;
    expect_event(&ch, &id, EventKind::RouteResolved)?;
    create_qp(&id)?;
    let mut b = Buffers::new(&id)?;
    post_recv(&id, &b)?;
    id.connect(&conn_param()).map_err(fail("rdma_connect"))?;
    expect_event(&ch, &id, EventKind::Established)?;
    with_watcher(&ch, &id, "client", |_| {
        let r = ping(&id, &mut b, o);
        // Either way: the server sees our disconnect, the watcher ours.
        let _ = id.disconnect();
        r
    });
    Ok(())
}

/// The text of ping `n`: `rdma-ping-<n>: `, then letters from `first` on
/// ('A'..='z', wrapping), and a NUL in the last byte.
fn ping_text(buf: &mut [u8], n: u64, first: u8) {
    let prefix = format!("rdma-ping-{n}: ");
    let p = prefix.len().min(buf.len() - 1);
    buf[..p].copy_from_slice(&prefix.as_bytes()[..p]);
    let mut c = first;
    for x in &mut buf[p..] {
        *x = c;
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    let last = buf.len() - 1;
    buf[last] = 0;
}

/// The client's loop: `count` pings (0: forever). The source is a `Vec`
/// registered once, read-only for the device (the server RDMA-READs it),
/// and written in place; the sink is a `Vec` registered for the server's
/// RDMA WRITE of each ping and taken back after the go-ahead, to be
/// compared and printed in place.
fn ping(id: &CmId<OnChannel>, b: &mut Buffers, o: &Opts) -> Result<(), Fail> {
    let mut start = register(id, vec![0u8; o.size], Access::REMOTE_READ, "start buffer")?;
    let mut sink = vec![0u8; o.size];
    let mut out = std::io::stdout().lock();
    let mut first = b'A';
    let mut n = 0u64;
    while o.count == 0 || n < o.count {
        ping_text(start.as_mut_slice().map_err(fail("start buffer"))?, n, first);
        first = if first >= b'z' { b'A' } else { first + 1 };
        // Our source: the server reads it, then says go ahead.
        send_advert(id, b, (start.addr(), start.rkey()), o.size)?;
        let wc = need(id, WcOpcode::Recv)?;
        received_advert(id, b, &wc)?;
        // Our sink: the server writes the ping back, then says go ahead.
        let mr = register(id, sink, Access::LOCAL_WRITE | Access::REMOTE_WRITE, "rdma buffer")?;
        send_advert(id, b, (mr.addr(), mr.rkey()), o.size)?;
        let wc = need(id, WcOpcode::Recv)?;
        received_advert(id, b, &wc)?;
        sink = take_back(mr, "rdma buffer")?;
        if o.validate && sink[..] != *start.as_slice().map_err(fail("start buffer"))? {
            return Err("data mismatch!".into());
        }
        if o.verbose {
            writeln!(out, "ping data: {}", String::from_utf8_lossy(c_string(&sink))).map_err(fail("stdout"))?;
        }
        n += 1;
    }
    out.flush().map_err(fail("stdout"))
}

fn main() -> ExitCode {
    let o = parse_args();
    let r = if o.server { run_server(&o) } else { run_client(&o) };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rping: {e}");
            ExitCode::FAILURE
        }
    }
}
