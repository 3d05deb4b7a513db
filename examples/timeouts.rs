// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Timed waits, unsignalled sends and immediate data, on one device in one
//! process (a listener and a client on one channel, connected to each
//! other through the device's loopback):
//!
//! * `EventChannel::get_event_timeout` returns `None` once its time passed
//!   with no event, and an event that comes while it waits;
//! * an id dropped while its event is held returns at once (the id goes
//!   when the event is dropped);
//! * `listen(0)` takes connection requests (the kernel's own backlog);
//! * `CmId::wait_cq_timeout` returns `None` with nothing completed, and a
//!   completion that comes while it waits;
//! * a send posted with `signaled: false` reports no completion (it is
//!   delivered: the peer's receive completes); a signalled one does;
//! * immediate data arrives as it was given (host order both ends), with a
//!   send and with an RDMA write.
//!
//! `vm/suite.d/examples.sh` runs it on rxe (example_timeouts_rxe). Every
//! check that fails ends the program with a message and status 1; a wait
//! that hangs is ended by a watchdog after 20 s (status 2).
//!
//!     timeouts [-a ADDRESS] [-p PORT]        (default 192.0.2.1, port 7473)

#![forbid(unsafe_code)]

use rdmacm::{Access, OnChannel, CmId, ConnParam, Event, EventChannel, EventKind, MemoryRegion, PortSpace, QpCaps, SendOp, WcOpcode, WorkCompletion};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Res<()> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

const LONG: Duration = Duration::from_secs(5);
const SHORT: Duration = Duration::from_millis(300);
const LATER: Duration = Duration::from_millis(200);
const IMM_SEND: u32 = 0x0102_0304;
const IMM_WRITE: u32 = 0xa0b0_c0d0;

/// The next event within `LONG`, which must be `kind`, for `id`.
fn expect<'a>(ch: &'a EventChannel, id: &CmId<OnChannel>, kind: EventKind) -> Res<Event<'a>> {
    let ev = ch.get_event_timeout(LONG).map_err(err("get_event_timeout"))?.ok_or_else(|| format!("no event in {LONG:?} (waiting for {kind})"))?;
    check(ev.kind() == kind && ev.is_for(id) && ev.status() == 0, || format!("{} (status {}) where {kind} was expected", ev.kind(), ev.status()))?;
    Ok(ev)
}

/// The next completion within `LONG`.
fn completion(id: &CmId<OnChannel>, what: &str) -> Res<WorkCompletion> {
    let wc = id.wait_cq_timeout(LONG).map_err(err("wait_cq_timeout"))?.ok_or_else(|| format!("{what}: no completion in {LONG:?}"))?;
    check(wc.is_ok(), || format!("{what}: {:?}", wc.status))?;
    Ok(wc)
}

fn run(addr: SocketAddr) -> Res<()> {
    let ch = EventChannel::new().map_err(err("rdma_create_event_channel"))?;

    // A timed wait with nothing to come: None, not before its time.
    let t = Instant::now();
    let none = ch.get_event_timeout(SHORT).map_err(err("get_event_timeout"))?;
    check(none.is_none(), || "an event where none was due".into())?;
    check(t.elapsed() >= SHORT, || format!("get_event_timeout returned after {:?}, before its {SHORT:?}", t.elapsed()))?;
    println!("get_event_timeout: None after its timeout");

    // A timed wait that an event ends: the resolve is issued while it waits.
    let probe = ch.create_id(PortSpace::Tcp).map_err(err("rdma_create_id"))?;
    let t = Instant::now();
    let ev = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(LATER);
            probe.resolve_addr(None, addr, LONG)
        });
        ch.get_event_timeout(LONG)
    })
    .map_err(err("get_event_timeout"))?
    .ok_or("no event for the resolve")?;
    check(ev.kind() == EventKind::AddrResolved && ev.is_for(&probe), || format!("{} for the resolve", ev.kind()))?;
    check(t.elapsed() >= LATER && t.elapsed() < LONG, || format!("the event came after {:?}", t.elapsed()))?;
    println!("get_event_timeout: {} while it waited", ev.kind());

    // The id goes first, its event after: neither waits for the other.
    drop(probe);
    println!("an id dropped while its event is held: returned");
    drop(ev);

    // A listener with backlog 0 (the kernel's limit) and a client, on this channel.
    let listener = ch.create_id(PortSpace::Tcp).map_err(err("rdma_create_id"))?;
    listener.bind_addr(addr).map_err(err("rdma_bind_addr"))?;
    listener.listen(0).map_err(err("rdma_listen"))?;
    let client = ch.create_id(PortSpace::Tcp).map_err(err("rdma_create_id"))?;
    client.resolve_addr(None, addr, LONG).map_err(err("rdma_resolve_addr"))?;
    drop(expect(&ch, &client, EventKind::AddrResolved)?);
    client.resolve_route(LONG).map_err(err("rdma_resolve_route"))?;
    drop(expect(&ch, &client, EventKind::RouteResolved)?);
    let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_inline_data: 16, ..QpCaps::default() };
    client.create_qp(caps).map_err(err("create_qp (client)"))?;
    client.connect(&ConnParam::default()).map_err(err("rdma_connect"))?;
    let mut req = expect(&ch, &listener, EventKind::ConnectRequest)?;
    let server = req.take_request().ok_or("a request without its id")?;
    drop(req);
    server.create_qp(caps).map_err(err("create_qp (server)"))?;
    let inbox = MemoryRegion::new(&server, 80, Access::LOCAL_WRITE | Access::REMOTE_WRITE).map_err(err("register (server)"))?;
    // Receives at 0, 16, 32 and 64 (48..64 is the RDMA write's).
    for (i, at) in [0usize, 16, 32, 64].into_iter().enumerate() {
        server.post_recv(i as u64, &[inbox.sge(at..at + 16).map_err(err("sge"))?]).map_err(err("post_recv"))?;
    }
    server.accept(&ConnParam::default()).map_err(err("rdma_accept"))?;
    let mut up = 0;
    while up < 2 {
        let ev = ch.get_event_timeout(LONG).map_err(err("get_event_timeout"))?.ok_or("no Established event")?;
        check(ev.kind() == EventKind::Established && (ev.is_for(&client) || ev.is_for(&server)), || format!("{} while connecting", ev.kind()))?;
        up += 1;
    }
    println!("listen(0): a connection request taken and established");

    let mut out = MemoryRegion::new(&client, 64, Access::NONE).map_err(err("register (client)"))?;
    out.write(0, b"unsignal").map_err(err("write"))?;
    out.write(16, b"with imm").map_err(err("write"))?;
    out.write(32, b"written!").map_err(err("write"))?;

    // Nothing posted: a timed completion wait ends empty.
    let t = Instant::now();
    let none = client.wait_cq_timeout(SHORT).map_err(err("wait_cq_timeout"))?;
    check(none.is_none(), || format!("a completion where none was due: {none:?}"))?;
    check(t.elapsed() >= SHORT, || format!("wait_cq_timeout returned after {:?}, before its {SHORT:?}", t.elapsed()))?;
    println!("wait_cq_timeout: None after its timeout");

    // An unsignalled send: delivered (the server's receive), no completion here.
    client.post_send(10, &[out.sge(0..8).map_err(err("sge"))?], SendOp::Send, false).map_err(err("post_send"))?;
    let wc = completion(&server, "the unsignalled send's receive")?;
    check(wc.opcode == WcOpcode::Recv && wc.byte_len == 8 && wc.imm.is_none(), || format!("{wc:?}"))?;
    check(inbox.to_vec(0..8).map_err(err("read"))? == b"unsignal", || "the unsignalled send's bytes differ".into())?;
    let quiet = client.wait_cq_timeout(SHORT).map_err(err("wait_cq_timeout"))?;
    check(quiet.is_none(), || format!("the unsignalled send reported a completion: {quiet:?}"))?;
    println!("unsignalled send: delivered, no completion");

    // A signalled send with immediate data, posted while the server waits.
    let t = Instant::now();
    let (got, posted) = std::thread::scope(|s| {
        let poster = s.spawn(|| {
            std::thread::sleep(LATER);
            client.post_send(11, &[out.sge(16..24)?], SendOp::SendWithImm(IMM_SEND), true)
        });
        let got = completion(&server, "the send with immediate data's receive");
        (got, poster.join().expect("the posting thread"))
    });
    posted.map_err(err("post_send"))?;
    let wc = got?;
    check(t.elapsed() >= LATER, || format!("the receive completed after {:?}, before the send", t.elapsed()))?;
    check(wc.opcode == WcOpcode::Recv && wc.imm == Some(IMM_SEND) && wc.byte_len == 8, || format!("{wc:?}"))?;
    check(inbox.to_vec(16..24).map_err(err("read"))? == b"with imm", || "the send's bytes differ".into())?;
    let wc = completion(&client, "the signalled send")?;
    check(wc.opcode == WcOpcode::Send && wc.wr_id == 11, || format!("{wc:?} for the signalled send"))?;
    println!("wait_cq_timeout: a receive while it waited, immediate data {:#010x}", IMM_SEND);
    println!("signalled send: one completion (wr_id 11)");

    // An RDMA write with immediate data into the server's region.
    let op = SendOp::WriteWithImm { remote_addr: inbox.addr() + 48, rkey: inbox.rkey(), imm: IMM_WRITE };
    client.post_send(12, &[out.sge(32..40).map_err(err("sge"))?], op, true).map_err(err("post_send"))?;
    let wc = completion(&server, "the write with immediate data's receive")?;
    check(wc.opcode == WcOpcode::RecvRdmaWithImm && wc.imm == Some(IMM_WRITE), || format!("{wc:?}"))?;
    check(inbox.to_vec(48..56).map_err(err("read"))? == b"written!", || "the written bytes differ".into())?;
    let wc = completion(&client, "the write")?;
    check(wc.opcode == WcOpcode::RdmaWrite && wc.wr_id == 12, || format!("{wc:?} for the write"))?;
    println!("write with immediate data: {:#010x}, the bytes in place", IMM_WRITE);

    // An inline send of the program's own bytes: not registered, dropped
    // as soon as the call returns.
    {
        let line = String::from("inline!!");
        client.post_send_inline(13, &[line.as_bytes()], SendOp::Send, true).map_err(err("post_send_inline"))?;
    }
    let wc = completion(&server, "the inline send's receive")?;
    check(wc.opcode == WcOpcode::Recv && wc.byte_len == 8, || format!("{wc:?}"))?;
    check(inbox.to_vec(64..72).map_err(err("read"))? == b"inline!!", || "the inline send's bytes differ".into())?;
    let wc = completion(&client, "the inline send")?;
    check(wc.opcode == WcOpcode::Send && wc.wr_id == 13, || format!("{wc:?} for the inline send"))?;
    println!("inline send: the program's own bytes, unregistered, delivered");

    // The client disconnects; the server answers when told (the client's
    // own event waits for that answer).
    client.disconnect().map_err(err("rdma_disconnect"))?;
    let mut down = 0;
    while down < 2 {
        let ev = ch.get_event_timeout(LONG).map_err(err("get_event_timeout"))?.ok_or("no Disconnected event")?;
        check(ev.kind() == EventKind::Disconnected, || format!("{} while disconnecting", ev.kind()))?;
        if ev.is_for(&server) {
            server.disconnect().map_err(err("rdma_disconnect (server)"))?;
        }
        down += 1;
    }
    println!("disconnected");
    Ok(())
}

fn main() -> ExitCode {
    let mut ip: IpAddr = "192.0.2.1".parse().expect("an address");
    let mut port = 7473;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next();
        match (a.as_str(), v.as_deref().map(str::parse::<IpAddr>), v.as_deref().map(str::parse::<u16>)) {
            ("-a", Some(Ok(x)), _) => ip = x,
            ("-p", _, Some(Ok(x))) => port = x,
            _ => {
                eprintln!("usage: timeouts [-a ADDRESS] [-p PORT]");
                return ExitCode::from(1);
            }
        }
    }
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(20));
        eprintln!("timeouts: still running after 20 s (a wait hangs)");
        std::process::exit(2);
    });
    match run(SocketAddr::new(ip, port)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("timeouts: {e}");
            ExitCode::from(1)
        }
    }
}
