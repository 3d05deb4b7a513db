// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Bulk transfers with and without a copy, on one device in one process (a
//! listener and a client connected through the device's loopback): the
//! client RDMA-WRITEs `-S` bytes (1 MiB by default) with immediate data into
//! the server's buffer, `-C` times, and the server checks what arrived.
//!
//! * `--copy`: the data lives in plain `Vec`s and goes through regions of
//!   their own (`MemoryRegion::new`): `write` copies it in before the
//!   post, `read` copies it out after the completion;
//! * default (zero-copy): the client's `Vec` is registered in place,
//!   read-only for the device (`MemoryRegion::from_buffer` with
//!   `Access::NONE`), and written through `as_mut_slice`; the server's `Vec`
//!   is registered for each transfer (the device writes it) and taken back
//!   with `into_inner` after the completion, to be read in place;
//! * `--send-in-place`: the client's side as in zero-copy, the server's as
//!   with `--copy` (one registration, `read` copies out): a region the
//!   device writes lends no slice, and taking its buffer back costs a
//!   deregistration and a registration per transfer, which this form
//!   avoids at the price of one copy.
//!
//! Per transfer the client stamps the transfer's number into each 4 KiB
//! page and the server checks those stamps (`-V`: every byte), so the
//! program's own work per byte is small and the copies, where there are
//! any, are most of it. It prints the time per transfer:
//!
//! ```text
//! bulk: 20 transfers of 1048576 bytes, zero-copy: 812.4 us per transfer
//! ```
//!
//! Then (`-P`) it shows what `as_slice` relies on, on two fresh
//! connections: a receive posted into a region the device may only read
//! completes with an error and leaves its bytes alone, and so does a
//! peer's RDMA write into one (the device checks the registration's
//! rights).
//!
//!     bulk [-a ADDRESS] [-p PORT] [-S SIZE] [-C COUNT] [--copy | --send-in-place] [-V] [-P]
//!
//! `vm/suite.d/examples.sh` runs it on rxe (example_bulk_rxe), and `make
//! bench` times both forms (`zc_1m_*`). A failed check ends the program
//! with a message and status 1.

#![forbid(unsafe_code)]

use rdmacm::{OnChannel, Access, CmId, ConnParam, EventChannel, EventKind, MemoryRegion, PortSpace, QpCaps, SendOp, Sge, WcOpcode, WcStatus, WorkCompletion};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
}

const LONG: Duration = Duration::from_secs(20);
const PAGE: usize = 4096;

struct Opts {
    addr: SocketAddr,
    size: usize,
    count: u32,
    copy: bool,
    send_in_place: bool,
    verify: bool,
    protection: bool,
}

/// The next completion of `id` within `LONG`.
fn completion(id: &CmId<OnChannel>, what: &str) -> Res<WorkCompletion> {
    id.wait_cq_timeout(LONG).map_err(err("wait_cq_timeout"))?.ok_or_else(|| format!("{what}: no completion in {LONG:?}"))
}

/// The next successful completion of `id`, which must be `op`.
fn done(id: &CmId<OnChannel>, op: WcOpcode, what: &str) -> Res<WorkCompletion> {
    let wc = completion(id, what)?;
    if !wc.is_ok() || wc.opcode != op {
        return Err(format!("{what}: {:?} {:?} where a successful {op:?} was due", wc.opcode, wc.status));
    }
    Ok(wc)
}

/// A client and the server's id of it, connected to each other through
/// `addr`'s device, on `ch`.
fn connect(ch: &EventChannel, addr: SocketAddr) -> Res<(CmId<OnChannel>, CmId<OnChannel>)> {
    let listener = ch.create_id(PortSpace::Tcp).map_err(err("rdma_create_id"))?;
    listener.bind_addr(addr).map_err(err("rdma_bind_addr"))?;
    listener.listen(1).map_err(err("rdma_listen"))?;
    let expect = |kind: EventKind| -> Res<rdmacm::Event<'_>> {
        let ev = ch.get_event_timeout(LONG).map_err(err("get_event_timeout"))?.ok_or_else(|| format!("no event (waiting for {kind})"))?;
        if ev.kind() != kind || ev.status() != 0 {
            return Err(format!("{} (status {}) where {kind} was expected", ev.kind(), ev.status()));
        }
        Ok(ev)
    };
    let client = ch.create_id(PortSpace::Tcp).map_err(err("rdma_create_id"))?;
    client.resolve_addr(None, addr, LONG).map_err(err("rdma_resolve_addr"))?;
    drop(expect(EventKind::AddrResolved)?);
    client.resolve_route(LONG).map_err(err("rdma_resolve_route"))?;
    drop(expect(EventKind::RouteResolved)?);
    let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, ..QpCaps::default() };
    client.create_qp(caps).map_err(err("create_qp (client)"))?;
    client.connect(&ConnParam::default()).map_err(err("rdma_connect"))?;
    let mut req = expect(EventKind::ConnectRequest)?;
    let server = req.take_request().ok_or("a request without its id")?;
    drop(req);
    server.create_qp(caps).map_err(err("create_qp (server)"))?;
    server.accept(&ConnParam::default()).map_err(err("rdma_accept"))?;
    drop(expect(EventKind::Established)?);
    drop(expect(EventKind::Established)?);
    Ok((client, server))
}

/// The data of transfer `n`: `n` (little-endian u32) at the start of every
/// page, the rest as it was.
fn stamp(buf: &mut [u8], n: u32) {
    for page in buf.chunks_mut(PAGE) {
        let k = page.len().min(4);
        page[..k].copy_from_slice(&n.to_le_bytes()[..k]);
    }
}

/// Whether `buf` holds transfer `n`, and with `all` every byte of it as
/// `fill` then `stamp` made them.
fn holds(buf: &[u8], n: u32, all: bool) -> bool {
    let mut want = vec![0u8; if all { buf.len() } else { 0 }];
    if all {
        fill(&mut want);
        stamp(&mut want, n);
        return buf == want;
    }
    buf.chunks(PAGE).all(|page| page[..page.len().min(4)] == n.to_le_bytes()[..page.len().min(4)])
}

/// The bytes between the stamps: a pattern of the offset.
fn fill(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
}

/// Transfer `n`: an RDMA write with immediate data `n` of `src` to
/// (address, rkey) of the server, its receive and its completion.
fn transfer(client: &CmId<OnChannel>, server: &CmId<OnChannel>, src: Sge, (remote_addr, rkey): (u64, u32), n: u32) -> Res<()> {
    server.post_recv(u64::from(n), &[]).map_err(err("post_recv"))?;
    let op = SendOp::WriteWithImm { remote_addr, rkey, imm: n };
    client.post_send(u64::from(n), &[src], op, true).map_err(err("post_send"))?;
    let wc = done(server, WcOpcode::RecvRdmaWithImm, "the write's receive")?;
    if wc.imm != Some(n) {
        return Err(format!("transfer {n}: immediate data {:?}", wc.imm));
    }
    done(client, WcOpcode::RdmaWrite, "the write").map(drop)
}

/// `count` transfers, with a copy each way.
#[inline(never)]
fn with_copies(client: &CmId<OnChannel>, server: &CmId<OnChannel>, o: &Opts, mut data: Vec<u8>) -> Res<()> {
    let mut got = vec![0u8; o.size];
    let mut src = MemoryRegion::new(client, o.size, Access::NONE).map_err(err("register (client)"))?;
    let sink = MemoryRegion::new(server, o.size, Access::LOCAL_WRITE | Access::REMOTE_WRITE).map_err(err("register (server)"))?;
    for n in 0..o.count {
        stamp(&mut data, n);
        src.write(0, &data).map_err(err("write"))?;
        transfer(client, server, src.sge(0..o.size).map_err(err("sge"))?, (sink.addr(), sink.rkey()), n)?;
        sink.read(0, &mut got).map_err(err("read"))?;
        if !holds(&got, n, o.verify) {
            return Err(format!("transfer {n}: the server's bytes differ"));
        }
    }
    Ok(())
}

/// `count` transfers, without a copy: the client's Vec registered in
/// place, the server's registered for each transfer and taken back.
#[inline(never)]
fn zero_copy(client: &CmId<OnChannel>, server: &CmId<OnChannel>, o: &Opts, data: Vec<u8>) -> Res<()> {
    let mut src = MemoryRegion::from_buffer(client, data, Access::NONE).map_err(|(e, _)| format!("register (client): {e}"))?;
    let mut got = vec![0u8; o.size];
    for n in 0..o.count {
        stamp(src.as_mut_slice().map_err(err("as_mut_slice"))?, n);
        let sink = MemoryRegion::from_buffer(server, got, Access::LOCAL_WRITE | Access::REMOTE_WRITE).map_err(|(e, _)| format!("register (server): {e}"))?;
        transfer(client, server, src.sge(0..o.size).map_err(err("sge"))?, (sink.addr(), sink.rkey()), n)?;
        got = sink.into_inner().map_err(|(e, _)| format!("into_inner: {e}"))?;
        if !holds(&got, n, o.verify) {
            return Err(format!("transfer {n}: the server's bytes differ"));
        }
    }
    // The client's buffer comes back as it was last stamped.
    let data = src.into_inner().map_err(|(e, _)| format!("into_inner (client): {e}"))?;
    if o.count > 0 && !holds(&data, o.count - 1, o.verify) {
        return Err("the client's buffer came back changed".into());
    }
    Ok(())
}

/// `count` transfers, the client's Vec registered in place, the server's
/// bytes copied out of a region registered once.
#[inline(never)]
fn send_in_place(client: &CmId<OnChannel>, server: &CmId<OnChannel>, o: &Opts, data: Vec<u8>) -> Res<()> {
    let mut src = MemoryRegion::from_buffer(client, data, Access::NONE).map_err(|(e, _)| format!("register (client): {e}"))?;
    let sink = MemoryRegion::new(server, o.size, Access::LOCAL_WRITE | Access::REMOTE_WRITE).map_err(err("register (server)"))?;
    let mut got = vec![0u8; o.size];
    for n in 0..o.count {
        stamp(src.as_mut_slice().map_err(err("as_mut_slice"))?, n);
        transfer(client, server, src.sge(0..o.size).map_err(err("sge"))?, (sink.addr(), sink.rkey()), n)?;
        sink.read(0, &mut got).map_err(err("read"))?;
        if !holds(&got, n, o.verify) {
            return Err(format!("transfer {n}: the server's bytes differ"));
        }
    }
    Ok(())
}

/// The device refuses to write a region it may only read: a receive into
/// one, and a peer's RDMA write into one, complete with an error and leave
/// its bytes as they were. Each breaks its connection (the QP goes to the
/// error state), so each has one of its own.
fn protection(ch: &EventChannel, addr: SocketAddr) -> Res<()> {
    let ro = Access::REMOTE_READ;
    // A receive into a read-only region.
    let (client, server) = connect(ch, addr)?;
    let inbox = MemoryRegion::from_buffer(&server, vec![b'.'; 64], ro).map_err(|(e, _)| format!("register: {e}"))?;
    server.post_recv(1, &[inbox.sge(0..64).map_err(err("sge"))?]).map_err(err("post_recv"))?;
    let mut out = MemoryRegion::from_buffer(&client, vec![0u8; 64], Access::NONE).map_err(|(e, _)| format!("register: {e}"))?;
    out.as_mut_slice().map_err(err("as_mut_slice"))?.copy_from_slice(&[b'x'; 64]);
    client.post_send(2, &[out.sge(0..64).map_err(err("sge"))?], SendOp::Send, true).map_err(err("post_send"))?;
    let wc = completion(&server, "the receive into a read-only region")?;
    if wc.status == WcStatus::Success {
        return Err("a receive into a read-only region succeeded".into());
    }
    if inbox.as_slice().map_err(err("as_slice"))? != [b'.'; 64] {
        return Err("the device wrote a read-only region (receive)".into());
    }
    println!("receive into a read-only region: {:?}, its bytes unchanged", wc.status);
    drop((inbox, out, client, server));

    // A peer's RDMA write into a read-only region (its rkey allows reads).
    let (client, server) = connect(ch, addr)?;
    let target = MemoryRegion::from_buffer(&server, vec![b'.'; 64], ro).map_err(|(e, _)| format!("register: {e}"))?;
    let out = MemoryRegion::from_buffer(&client, vec![b'x'; 64], Access::NONE).map_err(|(e, _)| format!("register: {e}"))?;
    let op = SendOp::Write { remote_addr: target.addr(), rkey: target.rkey() };
    client.post_send(3, &[out.sge(0..64).map_err(err("sge"))?], op, true).map_err(err("post_send"))?;
    let wc = completion(&client, "the write into a read-only region")?;
    if wc.status == WcStatus::Success {
        return Err("an RDMA write into a read-only region succeeded".into());
    }
    if target.as_slice().map_err(err("as_slice"))? != [b'.'; 64] {
        return Err("the device wrote a read-only region (peer's write)".into());
    }
    println!("peer's RDMA write into a read-only region: {:?}, its bytes unchanged", wc.status);
    Ok(())
}

fn run(o: &Opts) -> Res<()> {
    let ch = EventChannel::new().map_err(err("rdma_create_event_channel"))?;
    let (client, server) = connect(&ch, o.addr)?;
    // The client's data, made before the clock (and callgrind) starts.
    let mut data = vec![0u8; o.size];
    fill(&mut data);
    let t = Instant::now();
    let mode = if o.copy {
        with_copies(&client, &server, o, data)?;
        "with copies"
    } else if o.send_in_place {
        send_in_place(&client, &server, o, data)?;
        "sent in place"
    } else {
        zero_copy(&client, &server, o, data)?;
        "zero-copy"
    };
    let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(o.count.max(1));
    println!("bulk: {} transfers of {} bytes, {mode}: {us:.1} us per transfer", o.count, o.size);
    drop((client, server));
    if o.protection {
        protection(&ch, o.addr)?;
    }
    Ok(())
}

fn usage() -> ExitCode {
    eprintln!("usage: bulk [-a ADDRESS] [-p PORT] [-S SIZE] [-C COUNT] [--copy | --send-in-place] [-V] [-P]");
    ExitCode::from(22)
}

fn main() -> ExitCode {
    let mut o = Opts { addr: SocketAddr::new("192.0.2.1".parse().expect("an address"), 7475), size: 1 << 20, count: 20, copy: false, send_in_place: false, verify: false, protection: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let ok = match a.as_str() {
            "--copy" => {
                o.copy = true;
                true
            }
            "--send-in-place" => {
                o.send_in_place = true;
                true
            }
            "-V" => {
                o.verify = true;
                true
            }
            "-P" => {
                o.protection = true;
                true
            }
            "-a" => args.next().and_then(|v| v.parse::<IpAddr>().ok()).map(|ip| o.addr.set_ip(ip)).is_some(),
            "-p" => args.next().and_then(|v| v.parse().ok()).map(|p| o.addr.set_port(p)).is_some(),
            "-S" => args.next().and_then(|v| v.parse().ok()).filter(|&s| s > 0).map(|s| o.size = s).is_some(),
            "-C" => args.next().and_then(|v| v.parse().ok()).map(|c| o.count = c).is_some(),
            _ => false,
        };
        if !ok {
            return usage();
        }
    }
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulk: {e}");
            ExitCode::FAILURE
        }
    }
}
