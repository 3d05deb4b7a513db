// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! An RDMA echo server (and client) on tokio: one task per connection, many
//! connections at once on one thread, no `unsafe`. Needs the `tokio` feature:
//!
//! ```text
//! cargo run --release --features tokio --example async_echo -- server [-b addr] [-p port] [-n conns]
//! cargo run --release --features tokio --example async_echo -- client -s addr [-p port] [-c conns] [-m msgs] [-S size]
//! ```
//!
//! The server echoes every message it receives on a connection back on it,
//! from the very buffer it arrived in (no copy), and serves connections
//! until `-n` of them have ended (0: forever); then it prints what each
//! echoed. Upstream's `rdma_client` (one 16-byte message, port 7471) is a
//! client of it. The example's own client opens `-c` connections, and only
//! once all of them are up sends `-m` messages of `-S` bytes on each, every
//! connection in its own task, checking every echo byte for byte.
//!
//! What it shows: [`AsyncCmId`] (awaited resolve, connect, accept,
//! disconnect; a listening id's connection requests as ids of their own),
//! completions awaited on the CQ's completion channel
//! ([`AsyncCmId::wait_cq`]), and a peer's disconnect raced against them.

#![forbid(unsafe_code)]

use rdmacm::asyncio::AsyncCmId;
use rdmacm::{Access, ConnParam, EventKind, MemoryRegion, PortSpace, QpCaps, SendOp, WcOpcode, WcStatus, WorkCompletion};
use std::cell::Cell;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::pin::pin;
use std::process::ExitCode;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

const DEFAULT_PORT: u16 = 7471;
/// Receive buffers per server connection, and the largest message.
const SLOTS: usize = 4;
const MAX_MSG: usize = 4096;
/// The wr_id bit of an echo (a send from receive slot `wr_id & !ECHO`).
const ECHO: u64 = 1 << 32;
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
}

/// An id with a QP, whose completions are awaited.
struct Conn {
    id: AsyncCmId,
}

impl Conn {
    /// After the QP exists.
    fn new(id: AsyncCmId) -> Res<Conn> {
        Ok(Conn { id })
    }

    /// The next work completion (`AsyncCmId::wait_cq`: poll the CQ, arm
    /// it, poll again, then sleep until its channel is readable).
    /// Cancel-safe: a completion is only taken when it is returned.
    async fn next_wc(&self) -> Res<WorkCompletion> {
        self.id.wait_cq().await.map_err(err("completion"))
    }

    /// The id's next connection manager event: its kind (the event itself is
    /// acknowledged here, when dropped).
    async fn next_event(&self) -> Res<EventKind> {
        let ev = self.id.next_event().await.map_err(err("rdma_get_cm_event"))?;
        Ok(ev.kind())
    }
}

enum Either<A, B> {
    Left(A),
    Right(B),
}

/// The first of two futures to finish; the other is dropped.
async fn race<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let mut a = pin!(a);
    let mut b = pin!(b);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(x) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(x));
        }
        if let Poll::Ready(y) = b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(y));
        }
        Poll::Pending
    })
    .await
}

/// What one connection echoed.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Echoed {
    messages: u64,
    bytes: u64,
}

/// Serves one connection: receives into `SLOTS` buffers, sends each
/// message back from the buffer it came in, reposts the buffer once that
/// send completed; until the peer disconnects.
async fn echo_conn(id: AsyncCmId, open: Rc<Cell<usize>>, peak: Rc<Cell<usize>>) -> Res<Echoed> {
    id.id()
        .create_qp(QpCaps { max_send_wr: SLOTS as u32, max_recv_wr: SLOTS as u32, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 })
        .map_err(err("create_qp"))?;
    let mr = MemoryRegion::new(id.id(), SLOTS * MAX_MSG, Access::LOCAL_WRITE).map_err(err("register"))?;
    let slot = |s: u64, len: usize| mr.sge(s as usize * MAX_MSG..s as usize * MAX_MSG + len).map_err(err("sge"));
    for s in 0..SLOTS as u64 {
        id.id().post_recv(s, &[slot(s, MAX_MSG)?]).map_err(err("post recv"))?;
    }
    let conn = Conn::new(id)?;
    conn.id.accept(&ConnParam::default()).await.map_err(err("accept"))?;
    open.set(open.get() + 1);
    peak.set(peak.get().max(open.get()));
    let mut done = Echoed::default();
    let r = loop {
        match race(conn.next_wc(), conn.next_event()).await {
            Either::Left(wc) => {
                let wc = match wc {
                    Ok(wc) => wc,
                    Err(e) => break Err(e),
                };
                match (wc.status, wc.opcode) {
                    (WcStatus::Success, WcOpcode::Recv) => {
                        let len = wc.byte_len as usize;
                        if let Err(e) = slot(wc.wr_id, len).and_then(|sge| conn.id.id().post_send(ECHO | wc.wr_id, &[sge], SendOp::Send, true).map_err(err("post send"))) {
                            break Err(e);
                        }
                        done.messages += 1;
                        done.bytes += len as u64;
                    }
                    (WcStatus::Success, WcOpcode::Send) => {
                        let s = wc.wr_id & !ECHO;
                        if let Err(e) = slot(s, MAX_MSG).and_then(|sge| conn.id.id().post_recv(s, &[sge]).map_err(err("post recv"))) {
                            break Err(e);
                        }
                    }
                    (WcStatus::WrFlushErr, _) => break Err("the QP was flushed before the peer disconnected".into()),
                    (status, op) => break Err(format!("completion {op:?} failed: {status:?} (vendor error {})", wc.vendor_err)),
                }
            }
            Either::Right(Ok(EventKind::Disconnected)) => {
                // Our side of it: the QP goes to the error state.
                let _ = conn.id.id().disconnect();
                break Ok(done);
            }
            Either::Right(Ok(k)) => eprintln!("async_echo: event {k} on a connection, ignored"),
            Either::Right(Err(e)) => break Err(e),
        }
    };
    open.set(open.get() - 1);
    r
}

async fn server(bind: SocketAddr, conns: usize) -> Res<()> {
    let listener = AsyncCmId::new(PortSpace::Tcp).map_err(err("create id"))?;
    listener.bind_addr(bind).map_err(err("bind"))?;
    listener.listen(64).map_err(err("listen"))?;
    let (open, peak) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let mut tasks = Vec::new();
    while conns == 0 || tasks.len() < conns {
        let (id, _param) = listener.get_request().await.map_err(err("connection request"))?;
        tasks.push(tokio::task::spawn_local(echo_conn(id, open.clone(), peak.clone())));
    }
    let mut done = Vec::new();
    let mut failed = 0;
    for t in tasks {
        match t.await {
            Ok(Ok(e)) => done.push(e),
            Ok(Err(e)) => {
                eprintln!("async_echo: connection failed: {e}");
                failed += 1;
            }
            Err(e) => {
                eprintln!("async_echo: connection task: {e}");
                failed += 1;
            }
        }
    }
    // In a fixed order: which connection came first is the clients' race.
    done.sort();
    for e in &done {
        println!("connection: {} messages, {} bytes echoed", e.messages, e.bytes);
    }
    let (m, b) = done.iter().fold((0, 0), |(m, b), e| (m + e.messages, b + e.bytes));
    println!("served {} connections: {m} messages, {b} bytes", done.len());
    eprintln!("async_echo: at most {} connections open at once", peak.get());
    if failed > 0 {
        return Err(format!("{failed} connections failed"));
    }
    Ok(())
}

/// The bytes of message `m` of connection `c`.
fn message(c: usize, m: usize, size: usize) -> Vec<u8> {
    let head = format!("conn {c} msg {m} ");
    (0..size).map(|i| head.as_bytes().get(i).copied().unwrap_or(b'a' + ((c + m + i) % 26) as u8)).collect()
}

/// One client connection, resolved and connected, with its buffers.
struct ClientConn {
    conn: Conn,
    send: MemoryRegion,
    recv: MemoryRegion,
}

async fn connect(dst: SocketAddr, size: usize) -> Res<ClientConn> {
    let id = AsyncCmId::new(PortSpace::Tcp).map_err(err("create id"))?;
    id.resolve_addr(None, dst, RESOLVE_TIMEOUT).await.map_err(err("resolve address"))?;
    id.resolve_route(RESOLVE_TIMEOUT).await.map_err(err("resolve route"))?;
    id.id().create_qp(QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }).map_err(err("create_qp"))?;
    let send = MemoryRegion::new(id.id(), size, Access::NONE).map_err(err("register"))?;
    let recv = MemoryRegion::new(id.id(), size, Access::LOCAL_WRITE).map_err(err("register"))?;
    id.id().post_recv(0, &[recv.sge(0..size).map_err(err("sge"))?]).map_err(err("post recv"))?;
    let conn = Conn::new(id)?;
    conn.id.connect(&ConnParam::default()).await.map_err(err("connect"))?;
    Ok(ClientConn { conn, send, recv })
}

/// `msgs` messages on one connection, each echo checked; then disconnects.
async fn exchange(c: usize, mut cc: ClientConn, msgs: usize, size: usize) -> Res<()> {
    let id = cc.conn.id.id();
    for m in 0..msgs {
        let data = message(c, m, size);
        cc.send.write(0, &data).map_err(err("send buffer"))?;
        id.post_send(1, &[cc.send.sge(0..size).map_err(err("sge"))?], SendOp::Send, true).map_err(err("post send"))?;
        let wc = loop {
            let wc = cc.conn.next_wc().await?;
            if !wc.is_ok() {
                return Err(format!("connection {c} message {m}: completion {:?} failed: {:?}", wc.opcode, wc.status));
            }
            if wc.opcode == WcOpcode::Recv {
                break wc;
            }
        };
        let back = cc.recv.to_vec(0..wc.byte_len as usize).map_err(err("recv buffer"))?;
        if back != data {
            return Err(format!("connection {c} message {m}: the echo differs ({} bytes back, {size} sent)", back.len()));
        }
        id.post_recv(0, &[cc.recv.sge(0..size).map_err(err("sge"))?]).map_err(err("post recv"))?;
    }
    cc.conn.id.disconnect().await.map_err(err("disconnect"))
}

async fn client(dst: SocketAddr, conns: usize, msgs: usize, size: usize) -> Res<()> {
    // Every connection up before any message: the server holds them all at once.
    let mut up = Vec::new();
    for _ in 0..conns {
        up.push(connect(dst, size).await?);
    }
    let tasks: Vec<_> = up.into_iter().enumerate().map(|(c, cc)| tokio::task::spawn_local(exchange(c, cc, msgs, size))).collect();
    let mut failed = 0;
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("async_echo: {e}");
                failed += 1;
            }
            Err(e) => {
                eprintln!("async_echo: connection task: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {conns} connections failed"));
    }
    println!("client: {conns} connections, {msgs} messages of {size} bytes each, every echo matched");
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: async_echo server [-b addr] [-p port] [-n conns]");
    eprintln!("       async_echo client -s addr [-p port] [-c conns] [-m msgs] [-S size]");
    std::process::exit(22)
}

fn ip(s: &str) -> IpAddr {
    s.parse().ok().or_else(|| (s, 0).to_socket_addrs().ok()?.next().map(|a| a.ip())).unwrap_or_else(|| usage())
}

fn num(s: Option<&String>) -> usize {
    s.and_then(|v| v.parse().ok()).unwrap_or_else(|| usage())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or_else(|| usage());
    let (mut addr, mut port, mut conns, mut msgs, mut size) = (None, DEFAULT_PORT, None, 8, 64);
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1);
        match args[i].as_str() {
            "-b" | "-s" => addr = Some(ip(v.unwrap_or_else(|| usage()))),
            "-p" => port = num(v) as u16,
            "-n" | "-c" => conns = Some(num(v)),
            "-m" => msgs = num(v),
            "-S" => size = num(v),
            _ => usage(),
        }
        i += 2;
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_io().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("async_echo: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    let r = match mode {
        "server" => {
            let bind = SocketAddr::new(addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), port);
            local.block_on(&rt, server(bind, conns.unwrap_or(0)))
        }
        "client" => {
            let Some(a) = addr else { usage() };
            if !(1..=MAX_MSG).contains(&size) {
                eprintln!("async_echo: -S must be 1 to {MAX_MSG}");
                return ExitCode::FAILURE;
            }
            local.block_on(&rt, client(SocketAddr::new(a, port), conns.unwrap_or(4), msgs, size))
        }
        _ => usage(),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_echo: {e}");
            ExitCode::FAILURE
        }
    }
}
