// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! mckey in Rust: multicast over unreliable datagrams, interoperable with
//! rdma-core's `mckey`, with no `unsafe` and no C library.
//!
//! ```text
//! mckey -m group [-b bind] [-c ids] [-C count] [-S size] [-p ps] [-o] [-l] [-t secs]       receiver
//! mckey -m group -s [-b bind] [-c ids] [-C count] [-S size] [-p ps] [-o] [-l] [-w secs]   sender
//! mckey -M gid -b bind ...                                                                  (a GID group)
//! ```
//!
//! The options are rdma-core's `mckey`'s (`-m -M -s -b -c -C -S -p -o -l`)
//! and two of this program's (`-w`, `-t`). Both sides make `-c` UD ids
//! (1) on one channel, bind each (`-b`), resolve the group address to a
//! device, create a UD QP on each and join the group with each, as full
//! members or, with `-o`, as send-only full members (whose QP is not
//! attached: it receives nothing of the group). With `-l` the QPs are made
//! with `QpCreateFlags::BLOCK_SELF_MCAST_LB` (no loopback of the QP's own
//! multicast sends; a device that lacks it refuses the QP). With `-M` the
//! group is a GID (`MulticastAddr::Gid`, an `AF_IB` address: no address
//! resolution, so `-b` is required). The join's event carries the group's
//! address vector, QP number (0xffffff) and qkey; the sender makes an
//! address handle from it on each id, waits a moment (`-w`, 3 s as in
//! rdma-core's mckey: time for the fabric to set up the group) and sends
//! `-C` datagrams of `-S` bytes to the group from each id, each with a
//! completion it checks. The receiver posts `-C` receives on each id before
//! joining (each `-S` bytes plus the 40 bytes of the global route header a
//! UD receive starts with) and counts `-C` datagrams on each until it has
//! them all, or fails after `-t` seconds. Both leave the group at the end.
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
//! A failure is reported with its errno (`mckey: failed: STEP: TEXT
//! (errno N)`), so that a refusal can be compared with what rdma-core's
//! `mckey` prints for the same step.
//!
//! The example shows an asynchronous UD id, `CmId::join_multicast_ex` and
//! its `MulticastJoin` event, `CmId::create_qp_with_flags`,
//! `AddressHandle`, `CmId::post_ud_send_with_imm`, UD receives and
//! `CmId::leave_multicast_ex`.

#![forbid(unsafe_code)]

use rdmacm::{Access, AddressHandle, CmId, EventChannel, EventKind, Membership, MemoryRegion, MulticastAddr, OnChannel, PortSpace, QpCaps, QpCreateFlags, UdParam, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);
/// How long a CM step (address resolution, the join) may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

struct Opts {
    group: MulticastAddr,
    bind: Option<IpAddr>,
    sender: bool,
    ids: usize,
    count: u32,
    size: usize,
    pause: Duration,
    timeout: Duration,
    ps: PortSpace,
    membership: Membership,
    no_loopback: bool,
}

fn usage() -> ! {
    eprintln!("usage: mckey -m group | -M gid [-s] [-b bind] [-c ids] [-C count] [-S size] [-p ps] [-o] [-l] [-w secs] [-t secs]");
    eprintln!("\t-m group\tmulticast address (name or number)\n\t-M gid\t\ta group by its GID (replaces -m, needs -b)\n\t-s\t\tsend (default: receive)");
    eprintln!("\t-b bind\t\tlocal address\n\t-c ids\t\tids joining (1)\n\t-C count\tdatagrams per id (10)\n\t-S size\t\tdatagram size (100)");
    eprintln!("\t-p ps\t\tport space: 0x111 UDP (default), 0x2 IPoIB, 0x106 TCP, 0x13f IB");
    eprintln!("\t-o\t\tjoin as send-only full members\n\t-l\t\tQPs without multicast loopback");
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

fn number(v: &str) -> u32 {
    let (digits, radix) = match v.strip_prefix("0x") {
        Some(h) => (h, 16),
        None => (v, 10),
    };
    u32::from_str_radix(digits, radix).unwrap_or_else(|_| usage())
}

fn parse() -> Opts {
    let mut o = Opts {
        group: MulticastAddr::Gid(Ipv6Addr::UNSPECIFIED),
        bind: None,
        sender: false,
        ids: 1,
        count: 10,
        size: 100,
        pause: Duration::from_secs(3),
        timeout: Duration::from_secs(30),
        ps: PortSpace::Udp,
        membership: Membership::FullMember,
        no_loopback: false,
    };
    let mut group = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| args.next().unwrap_or_else(|| { eprintln!("mckey: {what} needs a value"); usage() });
        match a.as_str() {
            "-m" => group = Some(MulticastAddr::Ip(SocketAddr::new(lookup(&val("-m")), 0))),
            "-M" => group = Some(MulticastAddr::Gid(val("-M").parse().unwrap_or_else(|_| usage()))),
            "-s" => o.sender = true,
            "-b" => o.bind = Some(lookup(&val("-b"))),
            "-c" => o.ids = number(&val("-c")) as usize,
            "-C" => o.count = number(&val("-C")),
            "-S" => o.size = number(&val("-S")) as usize,
            "-w" => o.pause = Duration::from_secs_f64(val("-w").parse().unwrap_or_else(|_| usage())),
            "-t" => o.timeout = Duration::from_secs_f64(val("-t").parse().unwrap_or_else(|_| usage())),
            "-p" => {
                o.ps = match number(&val("-p")) {
                    0x111 => PortSpace::Udp,
                    0x2 => PortSpace::Ipoib,
                    0x106 => PortSpace::Tcp,
                    0x13f => PortSpace::Ib,
                    _ => usage(),
                }
            }
            "-o" => o.membership = Membership::SendOnlyFullMember,
            "-l" => o.no_loopback = true,
            _ => usage(),
        }
    }
    o.group = group.unwrap_or_else(|| usage());
    if matches!(o.group, MulticastAddr::Gid(_)) && o.bind.is_none() {
        eprintln!("mckey: a GID group (-M) needs a bind address (-b)");
        std::process::exit(1)
    }
    if o.size == 0 {
        o.count = 0;
    }
    o
}

/// A failed step: its name, the error's text and errno.
fn fail(what: &'static str) -> impl Fn(rdmacm::Error) -> String {
    move |err| format!("{what}: {err} (errno {})", err.errno())
}

/// The next event of the channel (non-blocking), within EVENT_TIMEOUT.
fn next_event(ch: &EventChannel) -> Result<rdmacm::Event<'_>, String> {
    let end = Instant::now() + EVENT_TIMEOUT;
    loop {
        match ch.get_event() {
            Ok(ev) => return Ok(ev),
            Err(e) if e.errno() == libc::EAGAIN && Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
            Err(e) if e.errno() == libc::EAGAIN => return Err(format!("no event within {EVENT_TIMEOUT:?}")),
            Err(e) => return Err(format!("reading events: {e}")),
        }
    }
}

/// The next event, which must be `want` for `id`.
fn expect_event(ch: &EventChannel, id: &CmId<OnChannel>, want: EventKind) -> Result<(), String> {
    let ev = next_event(ch)?;
    if !ev.is_for(id) || ev.kind() != want || ev.status() != 0 {
        return Err(format!("expected {}, got {} (status {})", want.name(), ev.kind().name(), ev.status()));
    }
    Ok(())
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

/// One id of the test: its QP's region (a slot per datagram) and, once
/// joined, the group's parameters and an address handle to it.
struct Node {
    id: CmId<OnChannel>,
    mr: Option<MemoryRegion>,
    joined: Option<(UdParam, AddressHandle)>,
}

/// Makes node `k`'s QP and region, posts its receives, joins the group.
fn set_up(o: &Opts, node: &mut Node) -> Result<(), String> {
    // As rdma-core's mckey: no datagram larger than the port's active MTU.
    let mtu = node.id.active_mtu().map_err(fail("query port"))?;
    if o.count > 0 && o.size > mtu as usize {
        return Err(format!("message size {} is larger than active mtu {mtu}", o.size));
    }
    let n = o.count.max(1);
    let caps = QpCaps { max_send_wr: n, max_recv_wr: n, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    if o.no_loopback {
        node.id.create_qp_with_flags(caps, QpCreateFlags::BLOCK_SELF_MCAST_LB).map_err(fail("create QP"))?;
    } else {
        node.id.create_qp(caps).map_err(fail("create QP"))?;
    }
    let slot = o.size + GRH_LEN;
    let mr = MemoryRegion::new(&node.id, slot * n as usize, Access::LOCAL_WRITE).map_err(fail("register memory"))?;
    if !o.sender {
        for i in 0..o.count as usize {
            node.id.post_recv(i as u64, &[mr.sge(i * slot..(i + 1) * slot).map_err(fail("receive buffer"))?]).map_err(fail("post receive"))?;
        }
    }
    node.mr = Some(mr);
    node.id.join_multicast_ex(o.group, o.membership).map_err(fail("join"))
}

fn group_name(g: &MulticastAddr) -> String {
    match g {
        MulticastAddr::Ip(a) => a.ip().to_string(),
        MulticastAddr::Gid(g) => format!("gid {g}"),
    }
}

fn run(o: &Opts) -> Result<(), String> {
    println!("mckey: starting {}", if o.sender { "sender" } else { "receiver" });
    let ch = EventChannel::new().map_err(fail("event channel"))?;
    ch.set_nonblocking(true).map_err(fail("event channel"))?;
    let mut nodes = Vec::with_capacity(o.ids);
    for _ in 0..o.ids {
        nodes.push(Node { id: ch.create_id(o.ps).map_err(fail("create id"))?, mr: None, joined: None });
    }
    let bind = o.bind.map(|b| SocketAddr::new(b, 0));
    let outcome = join_all(o, &ch, &mut nodes, bind).and_then(|()| {
        if o.count == 0 {
            Ok(())
        } else if o.sender {
            std::thread::sleep(o.pause);
            nodes.iter_mut().enumerate().try_for_each(|(k, n)| send(o, k, n))
        } else {
            nodes.iter().enumerate().try_for_each(|(k, n)| receive(o, k, n))
        }
    });

    // A group that went away meanwhile is reported on the channel.
    let mut trouble = None;
    while let Ok(ev) = ch.get_event() {
        if ev.kind() == EventKind::MulticastError {
            trouble = Some(format!("{} (status {})", ev.kind().name(), ev.status()));
        }
    }
    // Every id that joined leaves (as rdma-core's mckey, each id tries).
    let mut left = Ok(());
    for n in &mut nodes {
        if n.joined.take().is_some() {
            if let Err(e) = n.id.leave_multicast_ex(o.group).map_err(fail("leave")) {
                left = Err(e);
            }
        }
    }
    outcome?;
    left?;
    match trouble {
        Some(t) => Err(t),
        None => Ok(()),
    }
}

/// Binds, resolves (an IP group), sets up and joins every node, then
/// waits for every join: the join lines come once all ids have joined.
fn join_all(o: &Opts, ch: &EventChannel, nodes: &mut [Node], bind: Option<SocketAddr>) -> Result<(), String> {
    println!("mckey: joining {} with {} id{}{}", group_name(&o.group), o.ids, if o.ids == 1 { "" } else { "s" }, if o.membership == Membership::SendOnlyFullMember { " (send-only)" } else { "" });
    // Every id gets its device first (no join event can come between
    // the resolutions), then every id joins; the join events may come in
    // any order.
    for node in nodes.iter_mut() {
        if let Some(b) = bind {
            node.id.bind_addr(b).map_err(fail("bind"))?;
        }
        if let MulticastAddr::Ip(group) = o.group {
            node.id.resolve_addr(bind, group, RESOLVE_TIMEOUT).map_err(fail("resolve address"))?;
            expect_event(ch, &node.id, EventKind::AddrResolved)?;
        }
    }
    for node in nodes.iter_mut() {
        set_up(o, node)?;
    }
    for _ in 0..nodes.len() {
        let ev = next_event(ch)?;
        let node = nodes.iter_mut().find(|n| ev.is_for(&n.id) && n.joined.is_none()).ok_or_else(|| format!("an event for no joining id: {}", ev.kind().name()))?;
        if ev.kind() != EventKind::MulticastJoin || ev.status() != 0 {
            return Err(format!("expected {}, got {} (status {})", EventKind::MulticastJoin.name(), ev.kind().name(), ev.status()));
        }
        let ud = ev.ud_param().ok_or("the join event has no UD parameters")?;
        let ah = AddressHandle::new(&node.id, &ud).map_err(fail("address handle"))?;
        node.joined = Some((ud, ah));
    }
    for node in nodes.iter() {
        if let Some((ud, _)) = &node.joined {
            println!("mckey: joined group {} (qpn {:#x}, qkey {:#x}, mlid {:#x})", Ipv6Addr::from(ud.dgid()), ud.qp_num(), ud.qkey(), ud.dlid());
        }
    }
    Ok(())
}

fn send(o: &Opts, k: usize, node: &mut Node) -> Result<(), String> {
    let (ud, ah) = node.joined.as_ref().ok_or("not joined")?;
    let mr = node.mr.as_mut().ok_or("no region")?;
    println!("mckey: id {k}: sending {} datagrams of {} bytes", o.count, o.size);
    let slot = o.size + GRH_LEN;
    let my_qpn = node.id.qp_num().ok_or("the id has no QP")?;
    for i in 0..o.count as usize {
        let text = format!("mckey-rs id {k} datagram {i}");
        let mut msg = vec![0u8; o.size];
        let l = text.len().min(o.size);
        msg[..l].copy_from_slice(&text.as_bytes()[..l]);
        mr.write(i * slot, &msg).map_err(fail("fill datagram"))?;
        let sge = mr.sge(i * slot..i * slot + o.size).map_err(fail("send buffer"))?;
        node.id.post_ud_send_with_imm(i as u64, &[sge], ah, ud.qp_num(), ud.qkey(), my_qpn, true).map_err(fail("post send"))?;
    }
    for _ in 0..o.count {
        let wc = node.id.wait_cq().map_err(fail("send completion"))?;
        check_wc(&wc, WcOpcode::Send, None)?;
    }
    println!("mckey: id {k}: sent {} datagrams", o.count);
    Ok(())
}

fn receive(o: &Opts, k: usize, node: &Node) -> Result<(), String> {
    let mr = node.mr.as_ref().ok_or("no region")?;
    let id = &node.id;
    println!("mckey: id {k}: receiving {} datagrams of {} bytes", o.count, o.size);
    let end = Instant::now() + o.timeout;
    let mut got = 0u32;
    let mut with_imm = 0u32;
    let mut way_back = None;
    let mut wcs = [WorkCompletion::default(); 8];
    while got < o.count {
        let n = id.poll_cq(&mut wcs).map_err(fail("poll CQ"))?;
        if n == 0 {
            if Instant::now() >= end {
                return Err(format!("id {k}: {got} of {} datagrams within {:?}", o.count, o.timeout));
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for wc in &wcs[..n] {
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
                mr.read(wc.wr_id as usize * (o.size + GRH_LEN), &mut grh).map_err(fail("read GRH"))?;
                way_back = Some(match AddressHandle::from_wc(id, wc, &grh) {
                    Ok(_) => return Err("an address handle back from a group datagram".into()),
                    Err(e) => e.errno(),
                });
            }
            got += 1;
        }
    }
    match way_back {
        Some(libc::EINVAL) => println!("mckey: id {k}: the address back from a group datagram is refused (EINVAL)"),
        Some(e) => return Err(format!("the address back from a group datagram: errno {e}, expected EINVAL")),
        None => println!("mckey: id {k}: no datagram with a GRH"),
    }
    println!("mckey: id {k}: received {got} datagrams, {with_imm} with the sender's QP number as immediate data");
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
