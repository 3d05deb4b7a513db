// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The trail of the CM's steps (docs/trace.md): with `RDMACM_RS_TRACE`
//! set, every call that starts a step of an id and every event delivered
//! for it becomes one JSON line ([`crate::sys::trace`] writes it).  Off,
//! each hook costs one relaxed load and a branch ([`call`], [`on`]),
//! with no call frame of its own.
//!
//! An id gets a number, 1, 2, ... in the order the process first traces
//! it, kept until its destroy; the call that starts an asynchronous step
//! (resolve_addr, resolve_route, connect, accept, disconnect) is
//! remembered with the id, so that the event ending it carries the step's
//! duration from the call (`of`, `dur_us`).
#![deny(unsafe_code)]

use super::base::{Cm, EventPriv, IdPriv, IdRef};
use super::events;
use crate::abi::cma::*;
use crate::abi::sockaddr::SockAddr;
use crate::sys::trace as st;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};

/// A call that starts or is a step of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    CreateId,
    ResolveAddr,
    ResolveRoute,
    CreateQp,
    Connect,
    Listen,
    Accept,
    Disconnect,
    DestroyId,
}

impl Step {
    /// The step's name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            Step::CreateId => "create_id",
            Step::ResolveAddr => "resolve_addr",
            Step::ResolveRoute => "resolve_route",
            Step::CreateQp => "create_qp",
            Step::Connect => "connect",
            Step::Listen => "listen",
            Step::Accept => "accept",
            Step::Disconnect => "disconnect",
            Step::DestroyId => "destroy_id",
        }
    }

    /// Whether an event ends the step (the call only starts it).
    fn asynchronous(self) -> bool {
        matches!(self, Step::ResolveAddr | Step::ResolveRoute | Step::Connect | Step::Accept | Step::Disconnect)
    }
}

/// What the trace keeps of a live id.
struct Known {
    n: u64,
    /// The asynchronous step started last and not yet ended by an event,
    /// with the time of its call.
    open: Option<(Step, u64)>,
}

const SHARDS: usize = 16;
static IDS: [Mutex<Option<HashMap<usize, Known>>>; SHARDS] = [const { Mutex::new(None) }; SHARDS];
static NEXT: AtomicU64 = AtomicU64::new(1);

fn shard(key: usize) -> &'static Mutex<Option<HashMap<usize, Known>>> {
    &IDS[(key >> 6) % SHARDS]
}

/// Whether the trace is on: one relaxed load once decided.
#[inline]
pub fn on() -> bool {
    st::enabled()
}

/// The id's number (given now if it has none); `open` replaces its open
/// step when Some, and the open step it had is returned when `close`.
fn number(p: &IdPriv, open: Option<(Step, u64)>, close: bool, forget: bool) -> (u64, Option<(Step, u64)>) {
    let key = p.uid() as usize;
    let mut g = shard(key).lock();
    let m = g.get_or_insert_with(HashMap::new);
    let k = m.entry(key).or_insert_with(|| Known { n: NEXT.fetch_add(1, Ordering::Relaxed), open: None });
    let n = k.n;
    let was = if close { k.open.take() } else { None };
    if open.is_some() {
        k.open = open;
    }
    if forget {
        m.remove(&key);
    }
    (n, was)
}

/// The id's number without changing what the trace keeps (0 when off).
pub fn id_number(p: &IdPriv) -> u64 {
    if !on() {
        return 0;
    }
    number(p, None, false, false).0
}

// How a call is traced: its function tests [`on`] and, off, runs its
// body (an `#[inline(always)]` function) in its own frame; on, it calls a
// `#[cold]` copy of itself that runs the body through [`call`] or
// [`create`].  Off, the trace costs one relaxed load and a branch, with no
// call frame, closure or argument passing of its own (a closure run on
// both paths would be compiled out of line).

/// Runs `f`, the call of `step` on `p`, and traces it (the trace is on).
#[inline(always)]
pub fn call<R>(p: &IdPriv, step: Step, f: impl FnOnce() -> Result<R, Errno>) -> Result<R, Errno> {
    let t0 = st::mono_us();
    let r = f();
    record_call(p, step, t0, r.as_ref().err().copied());
    r
}

/// `create_id`: runs `f` and traces the new id (or the failure, id 0).
#[inline(always)]
pub fn create(f: impl FnOnce() -> Result<IdRef, Errno>) -> Result<IdRef, Errno> {
    let t0 = st::mono_us();
    let r = f();
    record_create(&r, t0);
    r
}

#[cold]
#[inline(never)]
fn record_create(r: &Result<IdRef, Errno>, t0: u64) {
    match r {
        Ok(p) => record_call(p, Step::CreateId, t0, None),
        Err(e) => {
            let mut l = Line::start(0, "create_id", "call");
            l.result(Some(*e)).dur(st::mono_us().saturating_sub(t0));
            l.finish();
        }
    }
}

#[cold]
#[inline(never)]
fn record_call(p: &IdPriv, step: Step, t0: u64, err: Option<Errno>) {
    let open = if err.is_none() && step.asynchronous() { Some((step, t0)) } else { None };
    let (n, _) = number(p, open, false, step == Step::DestroyId && err.is_none());
    let mut l = Line::start(n, step.name(), "call");
    l.result(err).dur(st::mono_us().saturating_sub(t0)).addrs(p);
    l.finish();
}

/// Traces an event about to be delivered (when on): `p` is the id the
/// event counts on (the listener for a connection request, whose new id
/// the event names).
#[inline]
pub fn event(cm: &Cm, evt: &EventPriv, p: &IdPriv) {
    if on() {
        record_event(cm, evt, p);
    }
}

#[cold]
#[inline(never)]
fn record_event(cm: &Cm, evt: &EventPriv, p: &IdPriv) {
    let e = &evt.event.0;
    let np = if e.event == RDMA_CM_EVENT_CONNECT_REQUEST && e.id != p.raw() { cm.live.ids.get(e.id as usize) } else { None };
    let new = np.as_deref();
    let who = new.unwrap_or(p);
    let (n, open) = number(who, None, true, false);
    let name = event_step(e.event);
    let mut l = Line::start(n, &name, "event");
    l.num("status", e.status as i64).boolean("ok", event_ok(e.event, e.status));
    if let Some((s, t0)) = open {
        l.str("of", s.name()).dur(st::mono_us().saturating_sub(t0));
    }
    if new.is_some() {
        let (ln, _) = number(p, None, false, false);
        l.num("listener", ln as i64);
    }
    l.addrs(who);
    l.finish();
}

/// Traces a destroy that has waited `waited_ms` for `missing` events
/// still unacked: `held` names them (event, status, whether the waiting
/// thread holds it).
pub fn held(p: &IdPriv, waited_ms: u64, missing: u32, held: &[(u32, i32, bool)]) {
    if !on() {
        return;
    }
    let (n, _) = number(p, None, false, false);
    let mut l = Line::start(n, "destroy_id_blocked", "stall");
    l.boolean("ok", false).num("waited_ms", waited_ms as i64).num("unacked", missing as i64);
    l.raw(",\"held\":[");
    for (i, (ev, status, mine)) in held.iter().enumerate() {
        if i > 0 {
            l.raw(",");
        }
        let _ = write!(l.0, "{{\"event\":\"{}\",\"status\":{status},\"by_this_thread\":{mine}}}", event_step(*ev));
    }
    l.raw("]");
    l.boolean("self_deadlock", held.iter().any(|h| h.2));
    l.addrs(p);
    l.finish();
}

/// `RDMA_CM_EVENT_ADDR_RESOLVED` -> `ADDR_RESOLVED`.
pub fn event_step(ev: u32) -> String {
    let s = events::event_name(ev).to_string_lossy().into_owned();
    match s.strip_prefix("RDMA_CM_EVENT_") {
        Some(t) => t.to_string(),
        None => format!("EVENT_{ev}"),
    }
}

/// Whether an event reports success.
fn event_ok(ev: u32, status: i32) -> bool {
    status == 0
        && !matches!(
            ev,
            RDMA_CM_EVENT_ADDR_ERROR
                | RDMA_CM_EVENT_ROUTE_ERROR
                | RDMA_CM_EVENT_CONNECT_ERROR
                | RDMA_CM_EVENT_UNREACHABLE
                | RDMA_CM_EVENT_REJECTED
                | RDMA_CM_EVENT_DEVICE_REMOVAL
                | RDMA_CM_EVENT_MULTICAST_ERROR
                | RDMA_CM_EVENT_ADDRINFO_ERROR
        )
}

/// An address of `struct rdma_addr` as text (`192.0.2.1:7471`,
/// `[2001:db8::1]:0`, `ib:fe80::...`), None when unset.
fn addr_text(s: libc::sockaddr_storage) -> Option<String> {
    let a = SockAddr::from_storage(&rdma_sockaddr { storage: s });
    match a.family() {
        libc::AF_INET => {
            let v = a.as_v4()?;
            Some(format!("{}:{}", Ipv4Addr::from(u32::from_be(v.sin_addr.s_addr)), u16::from_be(v.sin_port)))
        }
        libc::AF_INET6 => {
            let v = a.as_v6()?;
            Some(format!("[{}]:{}", Ipv6Addr::from(v.sin6_addr.s6_addr), u16::from_be(v.sin6_port)))
        }
        AF_IB => Some(format!("ib:{}", Ipv6Addr::from(a.ib_image().sib_addr.sib_raw))),
        _ => None,
    }
}

/// One line under construction.
struct Line(String);

impl Line {
    fn start(id: u64, step: &str, kind: &str) -> Line {
        let (mono, wall) = st::now_us();
        let mut s = String::with_capacity(320);
        let _ = write!(s, "{{\"v\":1,\"t_us\":{mono},\"wall_us\":{wall},\"pid\":{},\"tid\":{},\"id\":{id},\"kind\":\"{kind}\",\"step\":\"{step}\"", st::pid(), st::tid());
        Line(s)
    }
    fn raw(&mut self, s: &str) -> &mut Line {
        self.0.push_str(s);
        self
    }
    fn num(&mut self, k: &str, v: i64) -> &mut Line {
        let _ = write!(self.0, ",\"{k}\":{v}");
        self
    }
    fn boolean(&mut self, k: &str, v: bool) -> &mut Line {
        let _ = write!(self.0, ",\"{k}\":{v}");
        self
    }
    fn str(&mut self, k: &str, v: &str) -> &mut Line {
        let _ = write!(self.0, ",\"{k}\":\"");
        for c in v.chars() {
            match c {
                '"' => self.0.push_str("\\\""),
                '\\' => self.0.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(self.0, "\\u{:04x}", c as u32);
                }
                c => self.0.push(c),
            }
        }
        self.0.push('"');
        self
    }
    fn dur(&mut self, us: u64) -> &mut Line {
        self.num("dur_us", us as i64)
    }
    /// `result` (0 or the errno's number), `errno` (its name) and `ok`.
    fn result(&mut self, e: Option<Errno>) -> &mut Line {
        match e {
            None => self.num("result", 0).boolean("ok", true),
            Some(e) => self.num("result", e as i64).str("errno", &format!("{e:?}")).boolean("ok", false),
        }
    }
    fn addrs(&mut self, p: &IdPriv) -> &mut Line {
        if let Some(a) = addr_text(p.id.src_storage()) {
            self.str("local", &a);
        }
        if let Some(a) = addr_text(p.id.dst_storage()) {
            self.str("peer", &a);
        }
        if let Some(d) = p.id.device_name() {
            self.str("dev", &d);
        }
        self
    }
    fn finish(mut self) {
        self.0.push('}');
        let mut b = std::mem::take(&mut self.0).into_bytes();
        st::write_line(&mut b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// man/rdmacm-trace.schema.json lists every call step and `of`.
    #[test]
    fn schema_names_every_step() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man/rdmacm-trace.schema.json");
        let schema = std::fs::read_to_string(p).unwrap();
        let steps = [Step::CreateId, Step::ResolveAddr, Step::ResolveRoute, Step::CreateQp, Step::Connect, Step::Listen, Step::Accept, Step::Disconnect, Step::DestroyId];
        let of_line = schema.lines().find(|l| l.contains("\"of\"")).unwrap();
        for s in steps {
            assert!(schema.contains(&format!("\"{}\"", s.name())), "schema lacks step {}", s.name());
            assert_eq!(of_line.contains(&format!("\"{}\"", s.name())), s.asynchronous(), "schema's of and {}", s.name());
        }
        assert!(schema.contains("\"destroy_id_blocked\""));
    }

    #[test]
    fn names_and_outcomes() {
        assert_eq!(event_step(RDMA_CM_EVENT_ROUTE_ERROR), "ROUTE_ERROR");
        assert!(event_ok(RDMA_CM_EVENT_ESTABLISHED, 0));
        assert!(!event_ok(RDMA_CM_EVENT_ESTABLISHED, -110));
        assert!(!event_ok(RDMA_CM_EVENT_UNREACHABLE, 0));
        let mut l = Line::start(3, "connect", "call");
        l.result(Some(Errno::ETIMEDOUT)).str("peer", "a\"b");
        assert!(l.0.contains(",\"id\":3,\"kind\":\"call\",\"step\":\"connect\",\"result\":110,\"errno\":\"ETIMEDOUT\",\"ok\":false,\"peer\":\"a\\\"b\""), "{}", l.0);
    }
}
