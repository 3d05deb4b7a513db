// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The resolution explainer behind `rdma-resolve(1)`: runs the library's
//! own resolution steps for one destination, one at a time, timing each,
//! and says in plain words why a step failed and what fixes it.
//!
//! Every step goes through the library's Rust API, never the C exports:
//! `rdma_getaddrinfo` is [`crate::addrinfo::getaddrinfo`] with the
//! connection manager's backend; address and route resolution run on an
//! id of [`crate::cma::Cm`] with its own event channel, so the events and
//! their statuses are exactly what a program using the library receives;
//! the kernel's view (route, neighbour) comes from rtnetlink
//! ([`crate::sys::rtnl`]) and the device tables from sysfs
//! ([`devices`]).  `ibv_gid_reachable` needs an open device context,
//! which only the caller can vouch for: it comes in as a [`GidCheck`].
//!
//! The report is one JSON value ([`json::J`]); the text output is printed
//! from the same value, so the two never disagree.
#![deny(unsafe_code)]

pub mod devices;
pub mod json;
mod report;
pub mod trace;
mod words;

pub use report::{all_devices_json, all_devices_text, Report, Status, Step};
pub use words::{addr_text, ip_of, mtu_bytes, parse_addr, ps_name, rai_json, rate_gbps};
use words::{errno_text, family_name, qp_name};

use crate::abi::cma::*;
use crate::addrinfo::{self as gai, GaiError, Hints, Rai};
use crate::cma::{self, Cm};
use crate::sys::rtnl;
use crate::abi::sockaddr::SockAddr;
use devices::{gid_text, Device};
use json::J;
use nix::errno::Errno;
use std::ffi::CString;
use std::net::IpAddr;
use std::time::Instant;

/// The address family asked for (`--family`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Inet,
    Inet6,
    Ib,
}

/// What to explain.
#[derive(Clone, Debug)]
pub struct Request {
    pub node: Option<String>,
    pub service: Option<String>,
    pub source: Option<String>,
    /// `RDMA_PS_*`.
    pub port_space: u32,
    pub passive: bool,
    pub family: Option<Family>,
    pub timeout_ms: i32,
}

impl Default for Request {
    fn default() -> Self {
        Request { node: None, service: None, source: None, port_space: RDMA_PS_TCP, passive: false, family: None, timeout_ms: 2000 }
    }
}

/// `ibv_gid_reachable(ctx of device with node GUID guid, port, gid, timeout)`.
pub type GidCheck<'a> = &'a dyn Fn(u64, u8, &[u8; 16], i32) -> Result<(), Errno>;

/// Why the connection manager could not be used at all, in words.
fn cm_unusable(e: Errno) -> (String, Option<String>) {
    let dev = std::path::Path::new("/dev/infiniband/rdma_cm");
    if !dev.exists() {
        if !std::path::Path::new("/sys/module/rdma_ucm").exists() {
            return ("the kernel's rdma_ucm module is not loaded (/dev/infiniband/rdma_cm is missing)".into(), Some("`modprobe rdma_ucm`".into()));
        }
        return ("/dev/infiniband/rdma_cm is missing although rdma_ucm is loaded".into(), Some("check udev rules for /dev/infiniband (rdma-core's udev rules)".into()));
    }
    match e {
        Errno::ENODEV => ("there is no RDMA device on this system".into(), Some("load a driver, or add a software device: `rdma link add rxe0 type rxe netdev <interface>`".into())),
        Errno::EPERM => ("the kernel's rdma_cm ABI version is not one this library speaks (3 or 4)".into(), None),
        Errno::EACCES => ("no permission to open /dev/infiniband/rdma_cm".into(), Some("run as a user with access to /dev/infiniband (e.g. the rdma group)".into())),
        e => (format!("the connection manager cannot be used: {}", errno_text(e)), None),
    }
}

/// An unused `rxeN` name for the fix text.
fn free_rxe_name(devs: &[Device]) -> String {
    (0..).map(|i| format!("rxe{i}")).find(|n| !devs.iter().any(|d| &d.name == n)).unwrap_or_default()
}

/// The explainer's state while it runs.
struct Run<'a> {
    req: &'a Request,
    cm: &'static Cm,
    devs: Vec<Device>,
    steps: Vec<Step>,
    gid_check: GidCheck<'a>,
    /// The egress interface the kernel's route names.
    egress: Option<(u32, String)>,
    /// The next hop whose neighbour entry matters.
    next_hop: Option<IpAddr>,
}

impl<'a> Run<'a> {
    fn timed(&mut self, name: &'static str, f: impl FnOnce(&mut Self, &mut Step)) -> Status {
        let mut s = Step::new(name);
        let t = Instant::now();
        f(self, &mut s);
        s.ms = t.elapsed().as_secs_f64() * 1000.0;
        let st = s.status;
        log::debug!(target: "rdmacm::explain", "step {name}: {} {}", st.name(), s.reason.as_deref().unwrap_or(&s.summary));
        self.steps.push(s);
        st
    }

    fn skip(&mut self, name: &'static str, why: &str) {
        let mut s = Step::new(name);
        s.status = Status::Skipped;
        s.summary = why.to_string();
        self.steps.push(s);
    }

    fn hints(&self) -> Result<Hints, String> {
        let mut h = Hints { port_space: self.req.port_space as i32, ..Default::default() };
        h.qp_type = if matches!(self.req.port_space, RDMA_PS_UDP | RDMA_PS_IPOIB) { IBV_QPT_UD } else { IBV_QPT_RC } as i32;
        if self.req.passive {
            h.flags |= RAI_PASSIVE;
        }
        match self.req.family {
            Some(Family::Inet) => h.family = libc::AF_INET,
            Some(Family::Inet6) => h.family = libc::AF_INET6,
            Some(Family::Ib) => {
                h.family = AF_IB;
                h.flags |= RAI_FAMILY | RAI_NUMERICHOST;
            }
            None => {}
        }
        if let Some(s) = &self.req.source {
            h.src = Some(parse_addr(s).and_then(|b| SockAddr::from_bytes(&b)).ok_or_else(|| format!("--source {s} is not a numeric IPv4 or IPv6 address"))?);
        }
        Ok(h)
    }

    /// Step 1: rdma_getaddrinfo, every entry.
    fn getaddrinfo(&mut self) -> Option<Vec<Rai>> {
        let mut out = None;
        self.timed("getaddrinfo", |run, s| {
            let h = match run.hints() {
                Ok(h) => h,
                Err(e) => return s.fail(e, None),
            };
            let node = run.req.node.as_deref().map(|n| CString::new(n).unwrap_or_default());
            let service = run.req.service.as_deref().map(|n| CString::new(n).unwrap_or_default());
            s.data.set(
                "hints",
                J::obj()
                    .with("flags", h.flags)
                    .with("family", family_name(h.family))
                    .with("qp_type", qp_name(h.qp_type))
                    .with("port_space", ps_name(h.port_space as u32))
                    .with("src_addr", h.src.as_ref().map(|a| addr_text(a.as_bytes()))),
            );
            match gai::getaddrinfo(node.as_deref(), service.as_deref(), &h, &cma::ai::CmaBackend) {
                Ok(list) => {
                    s.summary = format!("{} entr{}", list.len(), if list.len() == 1 { "y" } else { "ies" });
                    s.data.set("entries", J::Arr(list.iter().map(rai_json).collect()));
                    out = Some(list);
                }
                Err(GaiError::Eai(code)) => {
                    let text = crate::sys::gai_strerror(code);
                    s.data.set("eai", code);
                    s.summary = format!("getaddrinfo error {code}: {text}");
                    let what = run.req.node.as_deref().unwrap_or("(no node)");
                    let fix = match code {
                        libc::EAI_NONAME | libc::EAI_AGAIN | libc::EAI_FAIL => {
                            Some("check the name (/etc/hosts, DNS) or give a numeric address; IPv6 link-local addresses need a scope, e.g. fe80::2%veth0".to_string())
                        }
                        libc::EAI_SERVICE => Some("give a numeric port, or a service name from /etc/services".to_string()),
                        libc::EAI_FAMILY => Some("drop --family, or ask for the family the name has".to_string()),
                        _ => None,
                    };
                    s.fail(format!("rdma_getaddrinfo cannot translate {what}: {text} (EAI code {code}, passed through from getaddrinfo)"), fix);
                }
                Err(GaiError::Sys(e)) => {
                    s.summary = format!("errno {}", errno_text(e));
                    let (reason, fix) = match e {
                        Errno::EPERM | Errno::ENODEV => cm_unusable(e),
                        Errno::EINVAL => ("rdma_getaddrinfo refused the arguments (a destination, service or --passive is needed)".to_string(), None),
                        e => (format!("rdma_getaddrinfo failed: {}", errno_text(e)), None),
                    };
                    s.fail(reason, fix);
                }
            }
        });
        out
    }

    /// Step 2: the route the kernel picks.
    fn route(&mut self, dst: IpAddr, scope: u32, src: Option<IpAddr>) -> Status {
        self.timed("route", |run, s| {
            let link_local = matches!(dst, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80);
            match rtnl::route_get(&dst, src.as_ref(), (scope != 0).then_some(scope)) {
                Err(e) => {
                    s.summary = format!("no route: {}", errno_text(e));
                    s.data.set("destination", dst.to_string());
                    let fix = match e {
                        Errno::ENETUNREACH | Errno::EHOSTUNREACH => {
                            let on: Vec<String> = run.devs.iter().flat_map(|d| d.ports.iter().filter_map(|p| p.netdev.clone())).collect();
                            Some(if on.is_empty() {
                                "add an address and route on the interface that leads there (`ip addr add ... dev <interface>`), and an RDMA device on it".to_string()
                            } else {
                                format!("add a route to {dst} through an interface with an RDMA device ({}): `ip route add {dst} via <gateway> dev {}`", on.join(", "), on[0])
                            })
                        }
                        Errno::EINVAL if src.is_some() => Some("the source must be an address of this host (`ip addr`)".to_string()),
                        _ => None,
                    };
                    s.fail(format!("the kernel has no route to {dst}: {}", errno_text(e)), fix);
                }
                Ok(r) => {
                    let mut oif = r.oif.unwrap_or(0);
                    if r.rtype == 2 {
                        // A local address leaves through lo; the device is the one on the interface holding it.
                        let owner = rtnl::addr_owner(&dst);
                        if owner != 0 {
                            oif = owner;
                        }
                    }
                    let name = rtnl::if_name(oif).unwrap_or_else(|| format!("if{oif}"));
                    s.data
                        .set("type", rtnl::rtn_name(r.rtype))
                        .set("interface", name.as_str())
                        .set("ifindex", oif)
                        .set("source", r.prefsrc.map(|a| a.to_string()))
                        .set("gateway", r.gateway.map(|a| a.to_string()))
                        .set("table", r.table);
                    s.summary = format!(
                        "{} {dst} via {name}{}{}",
                        rtnl::rtn_name(r.rtype),
                        r.gateway.map(|g| format!(" gateway {g}")).unwrap_or_default(),
                        r.prefsrc.map(|p| format!(", source {p}")).unwrap_or_default()
                    );
                    if matches!(r.rtype, 6..=8) {
                        return s.fail(format!("the kernel's route to {dst} is of type {}: packets are dropped", rtnl::rtn_name(r.rtype)), Some(format!("remove that route (`ip route del {dst}`) or add a better one")));
                    }
                    if link_local && scope == 0 {
                        // The kernel's resolution takes the same guess (the first fe80::/64 route).
                        s.data.set("warning", format!("{dst} is link-local but has no scope: the kernel picked {name}; write {dst}%{name} to choose the link yourself"));
                        s.summary.push_str(" (no scope given: the kernel's guess)");
                    }
                    run.egress = Some((oif, name));
                    run.next_hop = Some(r.gateway.unwrap_or(dst));
                }
            }
        })
    }

    /// Step 3: the RDMA device and port on the egress interface.
    fn device(&mut self) -> Status {
        self.timed("device", |run, s| {
            let Some((_, ifname)) = run.egress.clone() else { return };
            let ports = devices::ports_on(&run.devs, &ifname);
            let up = std::fs::read_to_string(format!("/sys/class/net/{ifname}/operstate")).map(|x| x.trim().to_string()).unwrap_or_default();
            s.data.set("interface", ifname.as_str()).set("operstate", up.as_str());
            if ports.is_empty() {
                s.summary = format!("{ifname} has no RDMA device");
                let others: Vec<String> =
                    run.devs.iter().flat_map(|d| d.ports.iter()).filter_map(|p| p.netdev.as_ref().map(|n| format!("{}/{} on {n}", p.device, p.port))).collect();
                let dst = run.req.node.clone().unwrap_or_default();
                let reason = if others.is_empty() {
                    format!("{dst} is routed via {ifname}, which has no RDMA device (and this host has none on any interface)")
                } else {
                    format!("{dst} is routed via {ifname}, which has no RDMA device (RDMA devices: {})", others.join(", "))
                };
                return s.fail(reason, Some(format!("`rdma link add {} type rxe netdev {ifname}` (or siw for iWARP), or reach the peer through an interface that has one", free_rxe_name(&run.devs))));
            }
            s.data.set("ports", J::Arr(ports.iter().map(|p| p.to_json(false)).collect()));
            let p = ports[0];
            s.summary = format!("{}/{} on {ifname}, state {}", p.device, p.port, p.state);
            if up == "down" {
                return s.fail(format!("{ifname} is down"), Some(format!("`ip link set {ifname} up`")));
            }
            if p.state != "ACTIVE" {
                s.fail(format!("port {} of {} is {}, not ACTIVE", p.port, p.device, p.state), Some(format!("bring {ifname} up and check its carrier (`ip link show {ifname}`)")));
            }
        })
    }

    /// The neighbour entry of the next hop (after the kernel's address
    /// resolution, which is what makes one).
    fn neighbour(&mut self, resolved: bool) -> Status {
        self.timed("neighbour", |run, s| {
            let (Some((oif, ifname)), Some(hop)) = (run.egress.clone(), run.next_hop) else { return };
            s.data.set("interface", ifname.as_str()).set("address", hop.to_string());
            match rtnl::neigh_get(oif, &hop) {
                Err(e) => s.summary = format!("cannot read the neighbour table: {}", errno_text(e)),
                Ok(None) => {
                    s.data.set("state", "NONE");
                    s.summary = format!("no entry for {hop} on {ifname}");
                    if !resolved {
                        s.fail(format!("no neighbour answered for {hop} on {ifname} within {} ms", run.req.timeout_ms), Some(neigh_fix(&hop, &ifname)));
                    }
                }
                Ok(Some(n)) => {
                    let st = rtnl::nud_name(n.state);
                    let ll = n.lladdr.map(|l| l.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"));
                    s.data.set("state", st).set("lladdr", ll.clone());
                    s.summary = format!("{hop} on {ifname}: {st}{}", ll.map(|l| format!(" lladdr {l}")).unwrap_or_default());
                    if !resolved && matches!(st, "INCOMPLETE" | "FAILED" | "NONE") {
                        s.fail(format!("no neighbour answered for {hop} on {ifname} within {} ms (neighbour state {st})", run.req.timeout_ms), Some(neigh_fix(&hop, &ifname)));
                    }
                }
            }
        })
    }
}

fn neigh_fix(hop: &IpAddr, ifname: &str) -> String {
    format!("check that {hop} is up and on the link of {ifname} (`ip neigh show dev {ifname}`, `ping {hop}`), or raise --timeout")
}

/// What a resolution event said.
struct Ev {
    name: String,
    status: i32,
}

fn ev_json(e: &Ev) -> J {
    let st = if e.status < 0 { Some(errno_text(Errno::from_raw(-e.status))) } else { None };
    J::obj().with("event", e.name.as_str()).with("status", e.status).with("status_text", st)
}

fn wait_event(cm: &'static Cm, ch: &cma::Channel) -> Result<Ev, Errno> {
    let got = cma::get_event(ch)?;
    let ev = Ev { name: cma::events::event_name(got.event).to_string_lossy().into_owned(), status: got.status };
    cma::ack_event(cm, got.ptr);
    Ok(ev)
}

/// Runs the explainer: the request's steps, in order, up to the first
/// failure (the later ones are listed as skipped).  `gid_check` runs
/// `ibv_gid_reachable` for the destination GID on the device and port
/// the kernel picked.
pub fn explain(req: &Request, gid_check: GidCheck<'_>) -> Report {
    crate::logging::init(crate::sys::env::var, crate::sys::env::open_log_file, crate::sys::cancel::shield);
    let cm = cma::global();
    let mut run = Run { req, cm, devs: devices::devices(), steps: Vec::new(), gid_check, egress: None, next_hop: None };
    let order_active = ["route", "device", "resolve_addr", "neighbour", "resolve_route", "gid_reachable"];
    let order_passive = ["route", "device", "bind", "listen"];
    let rest = |run: &mut Run, after: &str, why: &str| {
        let order: &[&'static str] = if req.passive { &order_passive } else { &order_active };
        let from = order.iter().position(|n| *n == after).map_or(0, |i| i + 1);
        for n in &order[from..] {
            if !run.steps.iter().any(|s| s.name == *n) {
                run.skip(n, why);
            }
        }
    };
    let Some(list) = run.getaddrinfo() else {
        rest(&mut run, "", "an earlier step failed");
        return Report { request: req.clone(), steps: run.steps, devices: None };
    };
    let first = &list[0];
    let bytes_of = |a: &Option<SockAddr>| a.as_ref().map(|a| a.as_bytes().to_vec());
    let target = if req.passive { bytes_of(&first.src).or_else(|| wildcard_of(req, first)) } else { bytes_of(&first.dst) };
    let src = if req.passive { None } else { bytes_of(&first.src) };
    let ip = target.as_deref().and_then(ip_of);
    let wildcard = ip.is_some_and(|(a, _, _)| a.is_unspecified());
    let mut failed = false;
    match ip {
        Some((a, _, scope)) if !wildcard => {
            let sip = src.as_deref().and_then(ip_of).map(|x| x.0).filter(|s| !s.is_unspecified());
            failed = run.route(a, scope, sip) == Status::Failed;
            if failed {
                run.skip("device", "no route");
            } else {
                failed = run.device() == Status::Failed;
            }
        }
        Some(_) => {
            run.skip("route", "wildcard address: no route to look up");
            run.skip("device", "wildcard address: every RDMA device may receive");
        }
        None => {
            run.skip("route", "not an IP destination (AF_IB): no IP route");
            run.skip("device", "not an IP destination (AF_IB)");
        }
    }
    if failed {
        // Still ask the kernel: its answer is part of the explanation.
        log::debug!(target: "rdmacm::explain", "route/device step failed; asking the kernel anyway");
    }
    let Some(target) = target else {
        rest(&mut run, "device", "no address to resolve");
        return Report { request: req.clone(), steps: run.steps, devices: None };
    };
    if req.passive {
        passive(&mut run, &target);
    } else {
        active(&mut run, src.as_deref(), &target, failed);
    }
    rest(&mut run, "", "an earlier step failed");
    // The order of the list is the order of the steps as they ran.
    Report { request: req.clone(), steps: run.steps, devices: None }
}

/// The address a listener binds to when rdma_getaddrinfo gave none (no
/// node, no service): the wildcard of the asked family (IPv4 unless
/// inet6), port 0, as rping -s and ucmatose do without -a/-b.
fn wildcard_of(req: &Request, first: &Rai) -> Option<Vec<u8>> {
    let v6 = req.family == Some(Family::Inet6) || first.family == libc::AF_INET6;
    parse_addr(if v6 { "::" } else { "0.0.0.0" })
}

/// The address as the CM takes it (the library's one rule, SockAddr::for_cm);
/// the explainer's addresses are whole structures, so this only falls back
/// to the bytes as given for an unknown family.
fn raw(cm: &Cm, b: &[u8]) -> SockAddr {
    SockAddr::for_cm(b, cm.af_ib()).unwrap_or_else(|| SockAddr::from_prefix(b))
}

/// The kernel's view of a resolved id: device, port, GIDs, path.
/// What the kernel says about a resolved or bound id.
struct Facts {
    guid: u64,
    port: u8,
    dgid: [u8; 16],
    /// Device, port, addresses, GIDs, GID index and type.
    json: J,
    /// The first path record, when there is one.
    path: Option<J>,
}

fn id_facts(run: &Run, p: &cma::IdPriv) -> Option<Facts> {
    let r = run.cm.route_of(p).ok()?;
    let dev = devices::by_guid(&run.devs, r.node_guid);
    let path0 = r.paths[0];
    let (sgid, dgid) = (path0.sgid, path0.dgid);
    let gid_index = dev.and_then(|d| d.ports.iter().find(|pp| pp.port == r.port_num)).and_then(|pp| {
        let same: Vec<&devices::Gid> = pp.gids.iter().filter(|g| g.gid == sgid).collect();
        same.iter().find(|g| g.kind.as_deref() == Some("RoCE v2")).or(same.first()).map(|g| (g.index, g.kind.clone()))
    });
    let facts = J::obj()
        .with("device", dev.map(|d| d.name.clone()))
        .with("port", r.port_num)
        .with("src_addr", addr_text(r.src.as_bytes()))
        .with("dst_addr", addr_text(r.dst.as_bytes()))
        .with("sgid", gid_text(&sgid))
        .with("dgid", gid_text(&dgid))
        .with("gid_index", gid_index.as_ref().map(|g| g.0))
        .with("gid_type", gid_index.and_then(|g| g.1));
    let path = (r.num_paths > 0).then(|| {
        J::obj()
            .with("sl", path0.sl)
            .with("mtu", mtu_bytes(path0.mtu))
            .with("rate_gbps", rate_gbps(path0.rate))
            .with("pkey", format!("{:#06x}", u16::from_be(path0.pkey)))
            .with("hop_limit", path0.hop_limit)
            .with("traffic_class", path0.traffic_class)
            .with("packet_life_time", path0.packet_life_time)
            .with("num_paths", r.num_paths)
    });
    Some(Facts { guid: r.node_guid, port: r.port_num, dgid, json: facts, path })
}

fn active(run: &mut Run, src: Option<&[u8]>, dst: &[u8], route_failed: bool) {
    let cm = run.cm;
    let ch = match cm.create_channel() {
        Ok(c) => c,
        Err(e) => {
            run.timed("resolve_addr", |_, s| {
                let (r, f) = cm_unusable(e);
                s.fail(r, f);
            });
            return;
        }
    };
    let id = match cm.create_id(Some(&ch), std::ptr::null_mut(), run.req.port_space) {
        Ok(p) => p,
        Err(e) => {
            run.timed("resolve_addr", |_, s| {
                let (r, f) = cm_unusable(e);
                s.fail(r, f);
            });
            cm.destroy_channel(&ch);
            return;
        }
    };
    let timeout = run.req.timeout_ms;
    let mut resolved = false;
    let mut guid_port = None;
    let st = run.timed("resolve_addr", |run, s| {
        s.data.set("dst_addr", addr_text(dst)).set("src_addr", src.map(addr_text)).set("timeout_ms", timeout);
        let srcraw = src.map(|b| raw(cm, b));
        if let Err(e) = cm.resolve_addr(&id, srcraw, Some(raw(cm, dst)), timeout) {
            s.summary = format!("rdma_resolve_addr: {}", errno_text(e));
            let (reason, fix) = match e {
                Errno::ENETUNREACH | Errno::EHOSTUNREACH => (format!("the kernel has no route to {}", addr_text(dst)), None),
                Errno::EADDRNOTAVAIL => ("the source address is not an address of this host".to_string(), Some("give a source address from `ip addr`".to_string())),
                Errno::EINVAL => ("the kernel refused the addresses (an IPv6 link-local address needs a scope, e.g. fe80::2%veth0)".to_string(), None),
                e => (format!("rdma_resolve_addr failed: {}", errno_text(e)), None),
            };
            return s.fail(reason, fix);
        }
        match wait_event(cm, &ch) {
            Err(e) => s.fail(format!("reading the event failed: {}", errno_text(e)), None),
            Ok(ev) => {
                s.data.set("events", J::Arr(vec![ev_json(&ev)]));
                s.summary = format!("{} status {}", ev.name, ev.status);
                if ev.name == "RDMA_CM_EVENT_ADDR_RESOLVED" && ev.status == 0 {
                    resolved = true;
                    if let Some(Facts { guid, port, json: facts, .. }) = id_facts(run, &id) {
                        s.summary = format!("{} on {}/{}", s.summary, facts.get("device").map_or("?".into(), J::plain), port);
                        s.data.set("resolved", facts);
                        guid_port = Some((guid, port));
                    }
                } else {
                    let e = Errno::from_raw(ev.status.wrapping_abs());
                    let (reason, fix) = match (e, &run.egress) {
                        (Errno::ETIMEDOUT | Errno::EHOSTUNREACH, Some((_, ifn))) => (
                            format!("no neighbour answered for {} on {ifn} within {timeout} ms ({} status {})", run.next_hop.map_or(String::new(), |h| h.to_string()), ev.name, ev.status),
                            Some(neigh_fix(&run.next_hop.unwrap_or(IpAddr::from([0u8; 4])), ifn)),
                        ),
                        (Errno::ENODEV, Some((_, ifn))) => (
                            format!("the kernel found no RDMA device for {ifn} ({} status {})", ev.name, ev.status),
                            Some(format!("`rdma link add {} type rxe netdev {ifn}`", free_rxe_name(&run.devs))),
                        ),
                        _ if ev.status == -1 => (
                            format!("the kernel resolved the address but the library could not use the device it names ({} status -1)", ev.name),
                            None,
                        ),
                        _ => (format!("address resolution failed: {} status {} ({})", ev.name, ev.status, errno_text(e)), None),
                    };
                    s.fail(reason, fix);
                }
            }
        }
    });
    // The neighbour table after the kernel's attempt.
    if run.egress.is_some() {
        run.neighbour(resolved);
    } else if !route_failed {
        run.skip("neighbour", "no IP route (AF_IB)");
    }
    if st == Status::Ok && resolved && !route_failed {
        let st = run.timed("resolve_route", |run, s| {
            if let Err(e) = cm.resolve_route(&id, timeout) {
                s.summary = format!("rdma_resolve_route: {}", errno_text(e));
                return s.fail(format!("rdma_resolve_route failed: {}", errno_text(e)), None);
            }
            match wait_event(cm, &ch) {
                Err(e) => s.fail(format!("reading the event failed: {}", errno_text(e)), None),
                Ok(ev) => {
                    s.data.set("events", J::Arr(vec![ev_json(&ev)]));
                    s.summary = format!("{} status {}", ev.name, ev.status);
                    if ev.name != "RDMA_CM_EVENT_ROUTE_RESOLVED" || ev.status != 0 {
                        let e = Errno::from_raw(ev.status.wrapping_abs());
                        let fix = (e == Errno::ETIMEDOUT).then(|| "InfiniBand: check that a subnet manager runs (`sminfo`, `ibstat`); or raise --timeout".to_string());
                        return s.fail(format!("route resolution failed: {} status {} ({})", ev.name, ev.status, errno_text(e)), fix);
                    }
                    match id_facts(run, &id).and_then(|f| f.path) {
                        Some(path) => {
                            s.summary = format!(
                                "{}; path: sl {} mtu {} rate {} pkey {} hop limit {}",
                                s.summary,
                                path.get("sl").map_or(String::new(), J::plain),
                                path.get("mtu").map_or(String::new(), J::plain),
                                path.get("rate_gbps").map_or(String::new(), |r| if *r == J::Num(0.0) { "unspecified".into() } else { format!("{} Gb/s", r.plain()) }),
                                path.get("pkey").map_or(String::new(), J::plain),
                                path.get("hop_limit").map_or(String::new(), J::plain)
                            );
                            s.data.set("path", path);
                        }
                        None => {
                            s.data.set("path", J::Null);
                            s.summary = format!("{}; no path record (iWARP routes have none)", s.summary);
                        }
                    }
                }
            }
        });
        if st == Status::Ok {
            if let (Some((guid, port)), Some(Facts { dgid, .. })) = (guid_port, id_facts(run, &id)) {
                // The destination's GID: for an IP destination the GID that encodes
                // its address (RoCE's own dgid; iWARP GIDs carry a MAC instead).
                let dgid = match ip_of(dst).map(|x| x.0) {
                    Some(IpAddr::V4(v)) => v.to_ipv6_mapped().octets(),
                    Some(IpAddr::V6(v)) => v.octets(),
                    None => dgid,
                };
                run.timed("gid_reachable", |run, s| {
                    s.data.set("gid", gid_text(&dgid)).set("port", port);
                    match (run.gid_check)(guid, port, &dgid, timeout) {
                        Ok(()) => s.summary = format!("{} reachable from port {port}", gid_text(&dgid)),
                        Err(e) => {
                            s.summary = format!("ibv_gid_reachable: {}", errno_text(e));
                            s.fail(format!("ibv_gid_reachable says {} is not reachable from port {port}: {}", gid_text(&dgid), errno_text(e)), None);
                        }
                    }
                });
            }
        }
    }
    let _ = cm.destroy_id(&id);
    cm.destroy_channel(&ch);
}

fn passive(run: &mut Run, addr: &[u8]) {
    let cm = run.cm;
    let id = match cm.create_id(None, std::ptr::null_mut(), run.req.port_space) {
        Ok(p) => p,
        Err(e) => {
            run.timed("bind", |_, s| {
                let (r, f) = cm_unusable(e);
                s.fail(r, f);
            });
            return;
        }
    };
    let st = run.timed("bind", |run, s| {
        s.data.set("addr", addr_text(addr));
        match cm.bind(&id, Some(raw(cm, addr))) {
            Err(e) => {
                s.summary = format!("rdma_bind_addr: {}", errno_text(e));
                let (reason, fix) = match e {
                    Errno::EADDRINUSE => (format!("{} is in use by another listener", addr_text(addr)), Some("pick another port (service), or stop the other listener (`rdma resource show cm_id`)".to_string())),
                    Errno::EADDRNOTAVAIL => (format!("{} is not an address of this host", addr_text(addr)), Some("bind to an address from `ip addr`, or to the wildcard".to_string())),
                    Errno::ENODEV => (format!("{} is on an interface without an RDMA device", addr_text(addr)), None),
                    e => (format!("rdma_bind_addr failed: {}", errno_text(e)), None),
                };
                s.fail(reason, fix);
            }
            Ok(()) => {
                if let Some(Facts { port, json: facts, .. }) = id_facts(run, &id) {
                    let dev = facts.get("device").map_or("-".into(), J::plain);
                    s.summary = if dev == "-" { "bound, no device yet (wildcard: any device may receive)".into() } else { format!("bound to {dev}/{port}") };
                    s.data.set("bound", facts);
                }
            }
        }
    });
    if st == Status::Ok {
        run.timed("listen", |_, s| match cma::conn::listen(cm, &id, 1) {
            Ok(()) => s.summary = "listening".into(),
            Err(e) => {
                s.summary = format!("rdma_listen: {}", errno_text(e));
                s.fail(format!("rdma_listen failed: {}", errno_text(e)), None);
            }
        });
    }
    let _ = cm.destroy_id(&id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let b = parse_addr("192.0.2.9").unwrap();
        assert_eq!(addr_text(&b), "192.0.2.9:0");
        let b = parse_addr("2001:db8::2").unwrap();
        assert_eq!(ip_of(&b).unwrap().0, "2001:db8::2".parse::<IpAddr>().unwrap());
        let b = parse_addr("fe80::1%7").unwrap();
        assert_eq!(ip_of(&b).unwrap().2, 7);
        assert!(parse_addr("host.example").is_none());
        assert_eq!(mtu_bytes(3), 1024);
        assert_eq!(rate_gbps(3), 10.0);
    }

    /// rdma-resolve(1) shows both schema files verbatim (roff-escaped):
    /// the report's (JSON OUTPUT) and the trace lines' (TRACE).
    #[test]
    fn schema_in_man_page() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
        let page = std::fs::read_to_string(dir.join("rdma-resolve.1")).unwrap().replace("\\e", "\\");
        for (file, section) in [("rdma-resolve.schema.json", "JSON OUTPUT"), ("rdmacm-trace.schema.json", "TRACE")] {
            let schema = std::fs::read_to_string(dir.join(file)).unwrap();
            assert!(page.contains(&schema), "man/rdma-resolve.1 does not show man/{file} as it is (regenerate its {section} section)");
        }
    }

    #[test]
    fn report_text_and_json_agree() {
        let mut s = Step::new("route");
        s.fail("the kernel has no route to 203.0.113.5", Some("`ip route add ...`".into()));
        s.data.set("destination", "203.0.113.5");
        let r = Report { request: Request { node: Some("203.0.113.5".into()), ..Default::default() }, steps: vec![s], devices: None };
        let j = r.to_json();
        assert_eq!(j.get("result").unwrap().get("ok"), Some(&J::Bool(false)));
        assert_eq!(j.get("result").unwrap().get("failed_step"), Some(&J::Str("route".into())));
        let t = r.to_text();
        assert!(t.contains("result: FAILED at route: the kernel has no route to 203.0.113.5"), "{t}");
        assert!(t.contains("fix: `ip route add ...`"), "{t}");
    }
}
