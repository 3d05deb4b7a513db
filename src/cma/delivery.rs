// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Events: [`get_event`] (`rdma_get_cm_event`) reads the channel's next
//! event and completes the library's part of it (address and route
//! queries, parameters, the connection and multicast steps of
//! [`super::conn`]), [`ack_event`] (`rdma_ack_cm_event`) releases it;
//! [`Cm::let_reader_take`] gives a thread reading the channel the chance
//! to take a queued event before a destroy or migrate drops it.
//! [`EventPriv`] is declared in [`super::base`].
#![deny(unsafe_code)]

use super::alloc;
use super::base::{Channel, Cm, EventPriv, IdPriv, IdRef, Mc, EVENTS, IDS};
use super::conn;
use super::events;
use super::trace;
use super::public::PubEvent;
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What the caller of [`get_event`] learns besides the event's address.
#[derive(Clone, Copy, Debug)]
pub struct Got {
    /// The address C receives (`struct rdma_cm_event *`).
    pub ptr: *mut rdma_cm_event,
    pub event: u32,
    pub status: i32,
    /// `event->id`.
    pub id: *mut rdma_cm_id,
}

impl EventPriv {
    /// Back to a new event's state (all zero, no id, no membership).
    pub(super) fn reset(&mut self) {
        self.id_priv = None;
        self.mc = None;
        self.event = PubEvent::zeroed();
        self.private_data = [0; kabi::RDMA_MAX_PRIVATE_DATA];
    }
}

impl Cm {
    fn process_addr_resolved(&self, p: &IdPriv, evt: &mut EventPriv) {
        let r = if self.af_ib() {
            self.query_addr(p).and_then(|_| {
                if p.id.verbs().is_null() {
                    Err(Errno::ENODEV)
                } else if self.verbs.transport_is_ib(p.id.verbs() as usize) {
                    self.query_gid(p)
                } else {
                    Ok(())
                }
            })
        } else {
            self.query_route(p).and_then(|_| if p.id.verbs().is_null() { Err(Errno::ENODEV) } else { Ok(()) })
        };
        evt.event.0.status = 0;
        if let Err(e) = r {
            // Upstream stores its helpers' -1 here, not the errno.
            log::debug!(target: "rdmacm", "address resolved, but querying it failed: {e}");
            evt.event.0.status = -1;
            evt.event.0.event = RDMA_CM_EVENT_ADDR_ERROR;
        }
    }

    fn process_route_resolved(&self, p: &IdPriv, evt: &mut EventPriv) {
        if !self.verbs.transport_is_ib(p.id.verbs() as usize) {
            return;
        }
        let r = if self.af_ib() { self.query_path(p) } else { self.query_route(p) };
        evt.event.0.status = 0;
        if let Err(e) = r {
            log::debug!(target: "rdmacm", "route resolved, but querying it failed: {e}");
            evt.event.0.status = -1;
            evt.event.0.event = RDMA_CM_EVENT_ROUTE_ERROR;
        }
    }

    /// The live id the kernel reports by `uid` (its address) or, for old
    /// kernels' uid 0, by handle.
    fn reported_id(&self, uid: u64, handle: u32) -> Option<IdRef> {
        if uid != 0 {
            self.live.ids.get(uid as usize)
        } else {
            // Rare (a bug of old kernels): searched, not indexed (see Live).
            self.live.ids.find(|p| p.handle() == handle && std::ptr::eq(p.channel().cm, self))
        }
    }

    /// The live membership the kernel reports by `uid` (its address).
    fn reported_mc(&self, uid: u64) -> Option<Arc<Mc>> {
        self.live.mcs.get(uid as usize)
    }
}

fn copy_ud(evt: &mut EventPriv, src: &kabi::UdParam) {
    let len = src.private_data_len;
    let pd = if len > 0 {
        evt.private_data[..len as usize].copy_from_slice(&src.private_data[..len as usize]);
        evt.private_data.as_ptr() as *const c_void
    } else {
        ptr::null()
    };
    let a = &src.ah_attr;
    evt.event.0.param.ud = rdma_ud_param {
        private_data: pd,
        private_data_len: len,
        ah_attr: ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: a.grh.dgid },
                flow_label: a.grh.flow_label,
                sgid_index: a.grh.sgid_index,
                hop_limit: a.grh.hop_limit,
                traffic_class: a.grh.traffic_class,
            },
            dlid: a.dlid,
            sl: a.sl,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            is_global: a.is_global,
            port_num: a.port_num,
        },
        qp_num: src.qp_num,
        qkey: src.qkey,
    };
}

/// `rdma_get_cm_event`: blocks for the channel's next event and completes
/// the library's part of it (address and route queries, parameters).  No
/// lock is held while the kernel read blocks.
///
/// The common event (of a live id, that the library only hands on: a user
/// event, a connection's establishment or end, an error) takes the path
/// inline here; the others, and events the library discards, go through
/// [`complete`].
#[inline(always)]
pub fn get_event(ch: &Channel) -> Result<Got, Errno> {
    let (cm, fd) = (ch.cm, ch.fd());
    let mut g = Getting::begin(ch)?;
    // The kernel fills the response for each event (see wait_event_into).
    let mut resp = MaybeUninit::uninit();
    loop {
        // The wait for the kernel's next event: a cancellation of the
        // thread is acted on there (ECANCELED; the event stays queued).
        let r = if cm.direct { crate::sys::ucma::wait_event(fd, &mut resp) } else { cm.ucma.wait_event_into(fd, &mut resp) };
        ch.wait_done();
        match g.take(cm, r?)? {
            Taken::Got(got) => return Ok(got),
            Taken::Again(next) => g = next,
        }
    }
}

/// A call of [`get_event`] between its waits: the event's slot, taken
/// before the kernel hands an event over, and whether an event discarded
/// before left it to be cleared.  The C API's `rdma_get_cm_event` makes
/// the waits itself ([`crate::sys::ucma::wait_event_unwinding`]) and
/// hands each response to [`Getting::take`]; [`get_event`] is the same
/// loop with the library's own wait.
pub struct Getting {
    evt: crate::sys::slab::Own<EventPriv>,
    first: bool,
}

/// What [`Getting::take`] made of a response.
pub enum Taken {
    /// The event, published: the caller hands it to C.
    Got(Got),
    /// The kernel's event was the library's alone (discarded): wait for
    /// the next one with the same slot.
    Again(Getting),
}

impl Getting {
    /// Starts a read of `ch`'s next event: the channel's CM initialised,
    /// the event's slot (out of memory, the call fails with ENOMEM and the
    /// event stays queued in the kernel, as upstream, which allocates its
    /// event first), the thread recorded as the channel's reader (a
    /// destroy by another thread lets it take an event already queued:
    /// [`Cm::let_reader_take`]).
    #[inline(always)]
    pub fn begin(ch: &Channel) -> Result<Getting, Errno> {
        ch.cm.init()?;
        let evt = alloc::try_new_event()?;
        ch.reader.store(crate::sys::trace::thread_key(), Ordering::Relaxed);
        Ok(Getting { evt, first: true })
    }

    /// Completes the library's part of the kernel's response `resp` (see
    /// [`get_event`]).
    #[inline(always)]
    pub fn take(self, cm: &'static Cm, resp: &kabi::EventResp) -> Result<Taken, Errno> {
        let Getting { mut evt, first } = self;
        // A new event is clean; one left by a discarded event is cleared
        // (upstream clears its event before each read).
        if !first {
            evt.reset();
        }
        evt.event.0.event = resp.event;
        let p = if resp.uid != 0 && passes_through(resp.event) {
            // The kernel reports ids we created and have not freed (destroy
            // waits for every reported event to be acked); the uid is still
            // checked as a slot of the id store.
            let Some(p) = IDS.get(resp.uid as usize) else {
                log::debug!(target: "rdmacm", "discarding an event for an unknown id {}", resp.id);
                return Ok(Taken::Again(Getting { evt, first: false }));
            };
            evt.event.0.id = p.raw();
            evt.event.0.status = resp.status as i32;
            if resp.event == RDMA_CM_EVENT_USER {
                evt.event.0.param.arg = resp.arg();
            } else {
                copy_params(&p, &mut evt, resp);
            }
            p
        } else {
            match complete(cm, resp, &mut evt)? {
                Some(p) => p,
                None => return Ok(Taken::Again(Getting { evt, first: false })),
            }
        };
        // (no earlier id to drop: a new event has none, a discarded one's
        // was taken back by `complete` or never set)
        debug_assert!(evt.id_priv.is_none());
        std::mem::forget(evt.id_priv.replace(p));
        if trace::on() || log::log_enabled!(target: "rdmacm", log::Level::Debug) {
            report(cm, &evt, resp);
        }
        evt.holder = crate::sys::trace::thread_key();
        let got = Got { ptr: &evt.event.0 as *const rdma_cm_event as *mut rdma_cm_event, event: evt.event.0.event, status: evt.event.0.status, id: evt.event.0.id };
        evt.publish();
        Ok(Taken::Got(got))
    }
}

impl Channel {
    /// Counts a wait of a reader of the channel as over (whatever it
    /// returned): [`Cm::let_reader_take`] stops waiting for that reader.
    #[inline(always)]
    pub fn wait_done(&self) {
        self.waits_done.fetch_add(1, Ordering::Release);
    }
}

impl Cm {
    /// How long a destroy or migrate waits at most for another thread
    /// reading the id's channel to take an event already queued there
    /// ([`Cm::let_reader_take`]).
    pub const READER_TAKE_MS: i32 = 50;

    /// Before the kernel drops the events queued for `p` on its channel
    /// (a destroy drops them, a migrate moves them to the new channel):
    /// when another thread reads that channel and an event is queued, that
    /// thread may already have seen the channel readable (its own poll, or
    /// the wait inside [`get_event`]) and be on its way to take the event.
    /// Dropped under it, the event leaves it waiting for the next one,
    /// which may never come (rping's client ends that way when its
    /// DISCONNECTED arrives while its main thread destroys the id).  So
    /// the call waits until that thread has taken an event (or any call
    /// on the channel returned), the channel is empty, or
    /// [`Cm::READER_TAKE_MS`] passed; the thread then counts as not
    /// reading until its next call.  No wait when the caller is the last
    /// reader itself, when that thread holds an event unacked (it is busy
    /// with it), or for a synchronous id (only the library reads its
    /// channel).
    #[inline(always)]
    pub(super) fn let_reader_take(&self, p: &IdPriv) {
        if p.sync.load(Ordering::Relaxed) {
            return;
        }
        let links = p.links.lock();
        let reader = links.channel.reader.load(Ordering::Relaxed);
        if reader == 0 || reader == crate::sys::trace::thread_key() {
            return;
        }
        let ch = links.channel.clone();
        drop(links);
        self.wait_for_reader(&ch, reader);
    }

    /// [`Cm::let_reader_take`]'s wait, out of line (most destroys have
    /// no other reader to wait for).
    #[cold]
    #[inline(never)]
    fn wait_for_reader(&self, ch: &Channel, reader: usize) {
        let fd = ch.fd();
        if !self.ucma.readable(fd) {
            return;
        }
        let mut busy = false;
        self.live.events.for_each(|e| busy |= e.holder == reader);
        if busy {
            return;
        }
        let start = ch.waits_done.load(Ordering::Acquire);
        for _ in 0..Self::READER_TAKE_MS {
            crate::sys::cancel::raw::pause_ms(1);
            if ch.waits_done.load(Ordering::Acquire) != start || !self.ucma.readable(fd) {
                return;
            }
        }
        let _ = ch.reader.compare_exchange(reader, 0, Ordering::Relaxed, Ordering::Relaxed);
        log::debug!(target: "rdmacm", "an event stayed queued on channel fd {fd} for {} ms with its reader away; the destroy or migrate goes on", Self::READER_TAKE_MS);
    }
}

/// Whether the library hands an event of the kernel's on as it is, but
/// for its parameters: no query, no connection or multicast step.
#[inline(always)]
fn passes_through(event: u32) -> bool {
    !conn::has_step(event)
        && !matches!(
            event,
            RDMA_CM_EVENT_ADDR_RESOLVED
                | RDMA_CM_EVENT_ROUTE_RESOLVED
                | RDMA_CM_EVENT_MULTICAST_JOIN
                | RDMA_CM_EVENT_MULTICAST_ERROR
                | RDMA_CM_EVENT_INTERNAL
                | RDMA_CM_EVENT_ADDRINFO_RESOLVED
                | RDMA_CM_EVENT_ADDRINFO_ERROR
        )
}

/// Connection, multicast and removal events' parameters as the kernel
/// reports them, by the id's QP type.
fn copy_params(p: &IdPriv, evt: &mut EventPriv, resp: &kabi::EventResp) {
    if p.id.qp_type() == IBV_QPT_UD {
        copy_ud(evt, resp.ud());
    } else {
        conn::copy_conn_param(evt, resp.conn());
    }
}

/// The trace line and debug log of a delivered event.
#[cold]
#[inline(never)]
fn report(cm: &Cm, evt: &EventPriv, resp: &kabi::EventResp) {
    let p: &IdPriv = evt.id_priv.as_deref().expect("set by get_event");
    trace::event(cm, evt, p);
    log::debug!(target: "rdmacm", "event {} status {} on id {} (kernel: {} status {})", events::event_name(evt.event.0.event).to_string_lossy(), evt.event.0.status, p.handle(), events::event_name(resp.event).to_string_lossy(), resp.status);
}

/// The events [`get_event`] does not pass through (queries, connection
/// and multicast steps, the library's own events, old kernels' uid 0):
/// the event's id when it is to be delivered (its status and parameters
/// set; `evt.id_priv` is set by the caller), None when it is discarded
/// (the next one is read).
#[cold]
#[inline(never)]
fn complete(cm: &'static Cm, resp: &kabi::EventResp, evt: &mut EventPriv) -> Result<Option<IdRef>, Errno> {
    let mcast = matches!(resp.event, RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR);
    let mc = if mcast && resp.uid != 0 { cm.reported_mc(resp.uid) } else { None };
    let p: IdRef = if mcast && resp.uid != 0 {
        // The uid of a multicast event is the membership.
        let Some(p) = mc.as_ref().and_then(|m| m.id.upgrade()) else {
            log::debug!(target: "rdmacm", "discarding an event for an unknown membership");
            return Ok(None);
        };
        p
    } else if resp.uid != 0 {
        let Some(p) = cm.reported_id(resp.uid, resp.id) else {
            log::debug!(target: "rdmacm", "discarding an event for an unknown id {}", resp.id);
            return Ok(None);
        };
        p
    } else {
        // Old kernels could report uid 0; find the id by handle.
        let Some(p) = cm.reported_id(0, resp.id) else {
            log::debug!(target: "rdmacm", "discarding an event for an unknown id {}", resp.id);
            return Ok(None);
        };
        if resp.event != RDMA_CM_EVENT_ESTABLISHED {
            p.complete_event();
            return Ok(None);
        }
        p
    };
    evt.event.0.id = p.raw();
    evt.event.0.status = resp.status as i32;
    match resp.event {
        RDMA_CM_EVENT_ADDR_RESOLVED => cm.process_addr_resolved(&p, evt),
        RDMA_CM_EVENT_ROUTE_RESOLVED => cm.process_route_resolved(&p, evt),
        RDMA_CM_EVENT_USER => evt.event.0.param.arg = resp.arg(),
        RDMA_CM_EVENT_INTERNAL => {
            // The library's own events: the end of a DNS
            // rdma_resolve_addrinfo, which reads as ADDRINFO_RESOLVED,
            // or (a worker's lookup that failed, see ai) ADDRINFO_ERROR.
            if resp.arg() == u64::from(RDMA_CM_EVENT_ADDRINFO_ERROR) {
                evt.event.0.event = RDMA_CM_EVENT_ADDRINFO_ERROR;
                cm.process_addrinfo_error(&p);
            } else if resp.arg() != u64::from(RDMA_CM_EVENT_ADDRINFO_RESOLVED) {
                p.complete_event();
                return Err(Errno::EBADE);
            } else {
                evt.event.0.event = RDMA_CM_EVENT_ADDRINFO_RESOLVED;
                cm.process_addrinfo_resolved(&p, evt)
            }
        }
        RDMA_CM_EVENT_ADDRINFO_RESOLVED => cm.process_addrinfo_resolved(&p, evt),
        RDMA_CM_EVENT_ADDRINFO_ERROR => cm.process_addrinfo_error(&p),
        // The connection code copies these events' parameters itself, as a
        // connection's whatever the id's QP type (upstream's choice), and
        // not for an event it drops: one copy of the private data.
        RDMA_CM_EVENT_CONNECT_RESPONSE | RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {}
        // Connection, multicast and removal events: parameters as the
        // kernel reports them; the connection code (crate::cma::conn)
        // completes them below.
        _ => copy_params(&p, evt, resp),
    }
    // The event holds the id from here on (the connection code reads it
    // there).
    let step = if let Some(mc) = mc {
        let _nc = crate::sys::cancel::NoCancel::new();
        conn::mcast::process_event(resp, evt, mc, &p);
        evt.id_priv = Some(p);
        conn::Step::Deliver
    } else {
        evt.id_priv = Some(p);
        conn::process_event(cm, resp, evt)
    };
    let p = evt.id_priv.take().expect("set just above");
    if step == conn::Step::Retry {
        p.complete_event();
        return Ok(None);
    }
    Ok(Some(p))
}

/// `rdma_ack_cm_event`: releases an event and counts it as completed.
/// Returns false, touching nothing, when `ev` is not an unacked event (a
/// double ack, or an event the caller already released).
#[inline]
pub fn ack_event(cm: &Cm, ev: *mut rdma_cm_event) -> bool {
    let _ = cm;
    ack(ev)
}

/// [`ack_event`] without an instance (the store is the process's).
#[inline]
pub fn ack(ev: *mut rdma_cm_event) -> bool {
    // (the event goes with the taker's reference, in line)
    EVENTS
        .take_with(ev as usize, |evt| {
            if let Some(mc) = &evt.mc {
                mc.acks.add();
            }
            if let Some(p) = &evt.id_priv {
                p.complete_event();
            }
        })
        .is_some()
}

impl Channel {
    /// The channel's next event ([`get_event`]).
    pub fn get_event(&self) -> Result<Got, Errno> {
        get_event(self)
    }
}

impl Cm {
    /// Releases an event of this instance ([`ack_event`]).
    pub fn ack_event(&self, ev: *mut rdma_cm_event) -> bool {
        ack_event(self, ev)
    }
}
