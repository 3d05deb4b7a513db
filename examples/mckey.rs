// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! mckey in Rust: multicast over unreliable datagrams, interoperable with
//! rdma-core's `mckey`, with no `unsafe` and no C library.
//!
//! ```text
//! mckey -m group [-b bind] [-C count] [-S size] [-t secs]        receiver
//! mckey -m group -s [-b bind] [-C count] [-S size] [-w secs]     sender
//! ```
//!
//! Both sides make one UD id, bind it (`-b`), resolve the group address
//! to a device, create a UD QP and join the group as full members. The
//! join's event carries the group's address vector, QP number (0xffffff)
//! and qkey; the sender makes an address handle from it, waits a moment
//! (`-w`, 3 s as in rdma-core's mckey: time for the fabric to set up the
//! group) and sends `-C` datagrams of `-S` bytes to the group, each with a
//! completion it checks. The receiver posts `-C` receives before joining
//! (each `-S` bytes plus the 40 bytes of the global route header a UD
//! receive starts with) and counts the datagrams until it has them all, or
//! fails after `-t` seconds. Both leave the group at the end.
//!
//! As rdma-core's sender, this one sends each datagram with immediate data:
//! its own QP number (`CmId::post_ud_send_with_imm`; the receiver reads it
//! as the number, the wire carries it big-endian). The receiver here checks
//! it against the completion's source QP and requires it (rdma-core's
//! receiver ignores the content). The receiver counts only completions
//! that succeeded with the full length: a datagram the device truncated or
//! flagged fails the run. It also checks that a group datagram gives no
//! address back to its sender (`AddressHandle::from_wc`: `EINVAL`, its GRH
//! names the group).
//!
//! The example shows an asynchronous UD id, `CmId::join_multicast` and its
//! `MulticastJoin` event, `AddressHandle`, `CmId::post_ud_send_with_imm`,
//! UD receives and `CmId::leave_multicast`.

#![forbid(unsafe_code)]

use rdmacm::{Access, OnChannel, AddressHandle, CmId, EventChannel, EventKind, MemoryRegion, PortSpace, QpCaps, UdParam, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);
/// How long a CM step (address resolution, the join) may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

struct Opts {
    group: IpAddr,
    bind: Option<IpAddr>,
    sender: bool,
    count: u32,
    size: usize,
    pause: Duration,
    timeout: Duration,
    ps: PortSpace,
}

fn usage() -> ! {
    eprintln!("usage: mckey -m group [-s] [-b bind] [-C count] [-S size] [-p ps] [-w secs] [-t secs]");
    eprintln!("\t-m group\tmulticast address (name or number)\n\t-s\t\tsend (default: receive)");
    eprintln!("\t-b bind\t\tlocal address\n\t-C count\tdatagrams (10)\n\t-S size\t\tdatagram size (100)");
    eprintln!("\t-p ps\t\tport space: 0x111 UDP (default), 0x2 IPoIB");
    eprintln!("\t-w secs\t\tsender: pause between the join and the sends (3)");
    eprintln!("\t-t secs\t\treceiver: give up after this long without all datagrams (30)");
    std::process::exit(22)
}

fn lookup(s: &str) -> IpAddr {
    if let Ok(ip) = s.parse() {
        return ip;
    }
    match (s, 0).to_socket_addrs().ok().and_then(|mut a| a.next()) {
        Some(a) => a.ip(),
        None => {
            eprintln!("mckey: cannot resolve {s}");
            std::process::exit(22)
        }
    }
}

fn parse() -> Opts {
    let mut o = Opts { group: IpAddr::from([0, 0, 0, 0]), bind: None, sender: false, count: 10, size: 100, pause: Duration::from_secs(3), timeout: Duration::from_secs(30), ps: PortSpace::Udp };
    let mut group = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| args.next().unwrap_or_else(|| { eprintln!("mckey: {what} needs a value"); usage() });
        match a.as_str() {
            "-m" => group = Some(lookup(&val("-m"))),
            "-s" => o.sender = true,
            "-b" => o.bind = Some(lookup(&val("-b"))),
            "-C" => o.count = val("-C").parse().unwrap_or_else(|_| usage()),
            "-S" => o.size = val("-S").parse().unwrap_or_else(|_| usage()),
            "-w" => o.pause = Duration::from_secs_f64(val("-w").parse().unwrap_or_else(|_| usage())),
            "-t" => o.timeout = Duration::from_secs_f64(val("-t").parse().unwrap_or_else(|_| usage())),
            "-p" => {
                let v = val("-p");
                o.ps = match u32::from_str_radix(v.trim_start_matches("0x"), if v.starts_with("0x") { 16 } else { 10 }) {
                    Ok(0x111) => PortSpace::Udp,
                    Ok(0x2) => PortSpace::Ipoib,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    o.group = group.unwrap_or_else(|| usage());
    if o.size == 0 {
        o.count = 0;
    }
    o
}

/// The next event of the channel (non-blocking), which must be `want` for
/// `id`, within EVENT_TIMEOUT.
fn expect_event(ch: &EventChannel, id: &CmId<OnChannel>, want: EventKind) -> Result<Option<UdParam>, String> {
    let end = Instant::now() + EVENT_TIMEOUT;
    loop {
        match ch.get_event() {
            Ok(ev) => {
                if !ev.is_for(id) || ev.kind() != want || ev.status() != 0 {
                    return Err(format!("expected {}, got {} (status {})", want.name(), ev.kind().name(), ev.status()));
                }
                return Ok(ev.ud_param());
            }
            Err(e) if e.errno() == libc::EAGAIN && Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
            Err(e) if e.errno() == libc::EAGAIN => return Err(format!("no {} within {:?}", want.name(), EVENT_TIMEOUT)),
            Err(e) => return Err(format!("reading events: {e}")),
        }
    }
}

/// A completion that is what `op` should have produced, or why not.
fn check_wc(wc: &WorkCompletion, op: WcOpcode, len: Option<usize>) -> Result<(), String> {
    if wc.status != WcStatus::Success {
        return Err(format!("completion {} failed: {:?} (vendor error {:#x})", wc.wr_id, wc.status, wc.vendor_err));
    }
    if wc.opcode != op {
        return Err(format!("completion {}: {:?}, expected {:?}", wc.wr_id, wc.opcode, op));
    }
    if let Some(l) = len {
        if wc.byte_len as usize != l {
            return Err(format!("datagram {}: {} bytes, expected {}", wc.wr_id, wc.byte_len, l));
        }
    }
    Ok(())
}

fn run(o: &Opts) -> Result<(), String> {
    let e = |what: &'static str| move |err: rdmacm::Error| format!("{what}: {err}");
    println!("mckey: starting {}", if o.sender { "sender" } else { "receiver" });
    let ch = EventChannel::new().map_err(e("event channel"))?;
    ch.set_nonblocking(true).map_err(e("event channel"))?;
    let id = ch.create_id(o.ps).map_err(e("create id"))?;
    let group = SocketAddr::new(o.group, 0);
    let bind = o.bind.map(|b| SocketAddr::new(b, 0));
    if let Some(b) = bind {
        id.bind_addr(b).map_err(e("bind"))?;
    }
    id.resolve_addr(bind, group, RESOLVE_TIMEOUT).map_err(e("resolve address"))?;
    expect_event(&ch, &id, EventKind::AddrResolved)?;

    // One QP, one region: a slot per datagram (receives need room for the
    // GRH in front of the data).
    let n = o.count.max(1);
    id.create_qp(QpCaps { max_send_wr: n, max_recv_wr: n, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }).map_err(e("create QP"))?;
    let slot = o.size + GRH_LEN;
    let mut mr = MemoryRegion::new(&id, slot * n as usize, Access::LOCAL_WRITE).map_err(e("register memory"))?;
    if !o.sender {
        for i in 0..o.count as usize {
            id.post_recv(i as u64, &[mr.sge(i * slot..(i + 1) * slot).map_err(e("receive buffer"))?]).map_err(e("post receive"))?;
        }
    }

    println!("mckey: joining {}", o.group);
    id.join_multicast(group).map_err(e("join"))?;
    let ud = expect_event(&ch, &id, EventKind::MulticastJoin)?.ok_or("the join event has no UD parameters")?;
    println!("mckey: joined group {} (qpn {:#x}, qkey {:#x}, mlid {:#x})", Ipv6Addr::from(ud.dgid()), ud.qp_num(), ud.qkey(), ud.dlid());
    let ah = AddressHandle::new(&id, &ud).map_err(e("address handle"))?;

    let outcome = if o.count == 0 {
        Ok(())
    } else if o.sender {
        std::thread::sleep(o.pause);
        send(o, &id, &mut mr, &ah, &ud)
    } else {
        receive(o, &id, &mr)
    };

    // A group that went away meanwhile is reported on the channel.
    let mut trouble = None;
    while let Ok(ev) = ch.get_event() {
        if ev.kind() == EventKind::MulticastError {
            trouble = Some(format!("{} (status {})", ev.kind().name(), ev.status()));
        }
    }
    let left = id.leave_multicast(group).map_err(e("leave"));
    drop(ah);
    outcome?;
    left?;
    match trouble {
        Some(t) => Err(t),
        None => Ok(()),
    }
}

fn send(o: &Opts, id: &CmId<OnChannel>, mr: &mut MemoryRegion, ah: &AddressHandle, ud: &UdParam) -> Result<(), String> {
    let e = |what: &'static str| move |err: rdmacm::Error| format!("{what}: {err}");
    println!("mckey: sending {} datagrams of {} bytes", o.count, o.size);
    let slot = o.size + GRH_LEN;
    let my_qpn = id.qp_num().ok_or("the id has no QP")?;
    for i in 0..o.count as usize {
        let text = format!("mckey-rs datagram {i}");
        let mut msg = vec![0u8; o.size];
        let l = text.len().min(o.size);
        msg[..l].copy_from_slice(&text.as_bytes()[..l]);
        mr.write(i * slot, &msg).map_err(e("fill datagram"))?;
        let sge = mr.sge(i * slot..i * slot + o.size).map_err(e("send buffer"))?;
        id.post_ud_send_with_imm(i as u64, &[sge], ah, ud.qp_num(), ud.qkey(), my_qpn, true).map_err(e("post send"))?;
    }
    for _ in 0..o.count {
        let wc = id.wait_cq().map_err(e("send completion"))?;
        check_wc(&wc, WcOpcode::Send, None)?;
    }
    println!("mckey: sent {} datagrams", o.count);
    Ok(())
}

fn receive(o: &Opts, id: &CmId<OnChannel>, mr: &MemoryRegion) -> Result<(), String> {
    let e = |what: &'static str| move |err: rdmacm::Error| format!("{what}: {err}");
    println!("mckey: receiving {} datagrams of {} bytes", o.count, o.size);
    let end = Instant::now() + o.timeout;
    let mut got = 0u32;
    let mut with_imm = 0u32;
    let mut way_back = None;
    let mut wcs = [WorkCompletion::default(); 8];
    while got < o.count {
        let k = id.poll_cq(&mut wcs).map_err(e("poll CQ"))?;
        if k == 0 {
            if Instant::now() >= end {
                return Err(format!("{got} of {} datagrams within {:?}", o.count, o.timeout));
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for wc in &wcs[..k] {
            check_wc(wc, WcOpcode::Recv, Some(o.size + GRH_LEN))?;
            // The sender puts its QP number into the immediate data.
            match wc.imm {
                Some(imm) if imm == wc.src_qp && wc.wc_flags.contains(WcFlags::WITH_IMM) => with_imm += 1,
                Some(imm) => return Err(format!("datagram {}: immediate {imm:#x} is not the sender's QP {:#x}", wc.wr_id, wc.src_qp)),
                None => return Err(format!("datagram {}: no immediate data (the sender's QP number)", wc.wr_id)),
            }
            // A datagram sent to the group has no way back to its sender
            // (its GRH names the group): AddressHandle::from_wc refuses it.
            if way_back.is_none() && wc.wc_flags.contains(WcFlags::GRH) {
                let mut grh = [0u8; GRH_LEN];
                mr.read(wc.wr_id as usize * (o.size + GRH_LEN), &mut grh).map_err(|e| format!("read GRH: {e}"))?;
                way_back = Some(match AddressHandle::from_wc(id, wc, &grh) {
                    Ok(_) => return Err("an address handle back from a group datagram".into()),
                    Err(e) => e.errno(),
                });
            }
            got += 1;
        }
    }
    match way_back {
        Some(libc::EINVAL) => println!("mckey: the address back from a group datagram is refused (EINVAL)"),
        Some(e) => return Err(format!("the address back from a group datagram: errno {e}, expected EINVAL")),
        None => println!("mckey: no datagram with a GRH"),
    }
    println!("mckey: received {got} datagrams, {with_imm} with the sender's QP number as immediate data");
    Ok(())
}

fn main() -> ExitCode {
    let o = parse();
    match run(&o) {
        Ok(()) => {
            println!("mckey: done");
            ExitCode::SUCCESS
        }
        Err(m) => {
            println!("mckey: failed: {m}");
            eprintln!("mckey: {m}");
            ExitCode::FAILURE
        }
    }
}
