// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's listening side ([`Listener`]): the connections a listener
//! accepted in the background, established ones waiting for raccept and
//! ones still completing the handshake, and, on such a connection, the
//! link back to its listener. The lifecycle (the service thread's
//! accepts, raccept, rclose) moves connections through its methods;
//! nothing else touches these fields.
//!
//! It holds the streams by their handles (`Arc<C>`, `C` being the
//! stream's cell), so it names nothing of the stream's file.
//!
//! Invariants it keeps:
//! * A connection is in at most one of the two lists: `accepting` until
//!   its handshake ends ([`Listener::settle`]), then `queue` if it
//!   succeeded; `queue` holds only established connections (upstream
//!   queues no other), first in, first out.
//! * `accepts` counts every connection that entered `queue` (wrapping):
//!   what an edge-triggered repoll member of a listener sees change.
//! * A connection leaves only by raccept ([`Listener::pop`]), by its
//!   handshake failing, or with its listener ([`Listener::take_all`]):
//!   until raccept it belongs to the listener.
#![deny(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

/// The listening side of one stream, and an accepting stream's listener
/// (see the module comment for its invariants).
pub(super) struct Listener<C> {
    queue: VecDeque<Arc<C>>,
    accepts: u32,
    accepting: Vec<Arc<C>>,
    parent: Option<Weak<C>>,
}

impl<C> Default for Listener<C> {
    fn default() -> Self {
        Listener { queue: VecDeque::new(), accepts: 0, accepting: Vec::new(), parent: None }
    }
}

impl<C> Listener<C> {
    /// An established connection joins the accept queue.
    pub(super) fn queue(&mut self, h: Arc<C>) {
        self.queue.push_back(h);
        self.accepts = self.accepts.wrapping_add(1);
    }

    /// A connection still completing its handshake.
    pub(super) fn pending(&mut self, h: Arc<C>) {
        self.accepting.push(h);
    }

    /// Connection `h`'s handshake ended: it leaves the pending ones; true
    /// if it was one of them (the listener still owns it).
    pub(super) fn settle(&mut self, h: &Arc<C>) -> bool {
        let known = self.accepting.iter().any(|x| Arc::ptr_eq(x, h));
        self.accepting.retain(|x| !Arc::ptr_eq(x, h));
        known
    }

    /// raccept: the first queued connection.
    pub(super) fn pop(&mut self) -> Option<Arc<C>> {
        self.queue.pop_front()
    }

    /// A connection waits for raccept.
    pub(super) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Connections ever queued (wrapping).
    #[inline]
    pub(super) fn accepts(&self) -> u32 {
        self.accepts
    }

    /// The listener closes: every connection nobody accepted, queued ones
    /// first.
    pub(super) fn take_all(&mut self) -> Vec<Arc<C>> {
        let mut q: Vec<Arc<C>> = self.queue.drain(..).collect();
        q.append(&mut self.accepting);
        q
    }

    /// On an accepting connection: its listener.
    pub(super) fn set_parent(&mut self, l: Weak<C>) {
        self.parent = Some(l);
    }

    /// On an accepting connection: its listener, once (the handshake
    /// ended).
    pub(super) fn take_parent(&mut self) -> Option<Weak<C>> {
        self.parent.take()
    }
}
