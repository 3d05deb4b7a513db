// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rsockets over RC connections (SOCK_STREAM), wire-compatible with
//! rdma-core's rsockets.
//!
//! The protocol, as seen on the wire:
//! * Connect private data (40 bytes): version 1, flags (bit 0: big-endian
//!   host, bit 1: iomap supported), receive credits (be16, the receive queue
//!   depth), 3 reserved bytes, the iomap table size (scaled byte), then two
//!   16-byte descriptors {addr be64, key be32, length be32}: the table the
//!   peer RDMA-writes new receive-buffer descriptors into (2 entries), and
//!   the first half of the receive buffer.
//! * Data: an RDMA write with immediate into the peer's receive buffer; the
//!   immediate is `op << 29 | length` (op 0 = data). On iWARP (no immediate
//!   data) a plain RDMA write followed by a 4-byte send carrying the same word.
//! * Credits: when half of the receive buffer has been consumed, the receiver
//!   RDMA-writes a descriptor of the freed half into the sender's table with
//!   immediate `4 << 29 | (rseq + rq_size)` (op SGL); with no buffer to hand
//!   back it sends only the immediate (a zero-length write). The data field
//!   bounds the sender's message sequence number (one receive WR per message).
//! * Control: immediate `7 << 29 | n`, n = 0 disconnect, 2 shutdown (write side).
//!
//! Each rsocket is an rdma_cm id on its own (synchronous) event channel; the
//! rsocket's number is that channel's descriptor, as upstream. The channel
//! is non-blocking: connection manager calls only issue requests, and the
//! service thread ([`svc`]) takes the answers as they arrive, so rconnect on
//! a non-blocking socket returns EINPROGRESS, a listener fills an accept
//! queue in the background, and a peer's disconnect reaches the socket
//! while nobody calls into it. The CQ of the QP has its own completion
//! channel, blocking on a blocking socket (rfcntl switches it).
//!
//! Sleepers: a thread about to sleep on a stream registers its own
//! wake-up descriptor (an eventfd per thread) with the stream under the
//! stream's lock, with what it waits for (send room, data, or any change);
//! whoever then changes the stream (processes completions, consumes a CQ
//! event, a connection manager event, rclose) signals the registered
//! sleepers that wait for that change when it lets go of the lock: room
//! to send wakes a blocked rsend, data a blocked rrecv, anything else
//! every sleeper. So nobody sleeps on a change it waits for and has not
//! seen. On a connected blocking socket the first sleeper is the stream's
//! reader instead: it sleeps in one blocking read of the completion
//! channel, as upstream's waiter does (one system call per sleep, not poll
//! and read), and the others sleep on their wake-up descriptors
//! (`guard::Stream::sleep_token`). The reader that got its event wakes
//! the other sleepers at once, as upstream's waiters all wake with the
//! reader's event (they look again while it takes the completions, and
//! the first of them to sleep again reads next), then either reads the
//! channel again or, when its call is over and nobody has read since (a
//! read that ended without an event), hands the reading on: every sleeper
//! looks again (`blocking::sleep_until_on`, `sleepers::Sleepers::leave`). What must wake the
//! reader comes through the CQ: every change of another thread that it
//! waits for posts a work request (a control message of rshutdown or
//! rclose) or stops the QP (a peer's disconnect), whose completion or
//! flush is the event. rpoll never reads a channel a reader sleeps on.
//!
//! Ownership and locking:
//! * The stream's connection manager id is an `Arc<CmId>` (the safe API of
//!   `cm::api`); its QP, registered buffers and riomap registrations are
//!   owned values of `verbs` that keep the id alive. rclose marks the stream
//!   closed, wakes its sleepers and drops what it owns; a thread that still
//!   sleeps on one of the stream's descriptors holds its own clone of the id
//!   (in its [`guard::WaitToken`]), so nothing it waits on is freed under it, and it
//!   returns EBADF once it re-locks and sees the stream closed.
//! * No lock is held across a blocking wait: every [`state::Stream`] method is
//!   non-blocking; the blocking calls (`send`, `recv`, `iowrite`, `shutdown`,
//!   `accept`, `connect`, `poll`) take what they need under the lock, drop
//!   the guard, sleep in [`guard::wait`] (which takes a token, not a stream) or in a
//!   synchronous CM call on their clone of the id, re-lock and re-check.
//!   Debug builds assert it: [`guard::wait`] panics when the calling thread holds
//!   any stream guard.
//! * Three locks per stream ([`state::StreamCell`]), in this order: the send
//!   path's, the receive path's, the state's. A send reserves credits and
//!   send-ring space under the state's lock, then copies and posts with it
//!   released ([`guard::Guard::unlocked`]); a receive plans its read under it,
//!   copies out released (a small read copies with it held), and consumes
//!   under it again. So a sender and a
//!   receiver on one stream go on at once, as upstream's separate send,
//!   receive and completion locks let them; completions, credits, control
//!   messages, lifecycle and options stay under the state's lock.
//! * Panics: the stream lock is a parking_lot mutex (no poisoning). A
//!   [`guard::Guard`] dropped while its thread unwinds marks the stream broken:
//!   later calls on it fail with EIO (rclose still frees it) instead of
//!   running on state a panic left half-updated.
//!
//! The files, each named for one concern (each imports only files listed
//! before it, never this facade):
//! * [`conf`], [`wire`], [`signal`] (sends without a completion of their
//!   own), [`verbs`] (the one adapter over libibverbs, the
//!   only rsocket module with unsafe code: its QP and its registered
//!   memory), [`fdmap`], [`svc`] (the service
//!   threads), [`options`] (the option values and rgetsockopt's table);
//! * the stream: [`state`] (its fields and states), [`guard`] (locking and
//!   waiting), [`cq`] (completions, credits, control messages),
//!   [`blocking`] (sleeping without the lock), [`send`], [`recv`],
//!   [`iomap`], [`lifecycle`] (create, connect, accept, shutdown, close),
//!   [`stream_opts`] (its socket options, in the one table of [`options`]);
//! * datagram rsockets: [`dgram_wire`] (their headers), [`dgram`], [`dgram_udp`]
//!   (the UDP side);
//! * [`sock`]: one rsocket of either kind and the one table of numbers;
//!   [`poll`](mod@poll) (rpoll) and [`epoll`] (repoll) on top.
#![deny(unsafe_code)]

pub mod blocking;
pub mod conf;
pub mod connector;
pub mod control;
pub mod cq;
pub mod dgram;
pub mod dgram_udp;
pub mod dgram_wire;
pub mod epoll;
#[cfg(test)]
pub(crate) mod fake;
pub mod fdmap;
pub mod guard;
pub mod iomap;
pub mod iomap_table;
pub mod lifecycle;
pub mod listener;
pub mod options;
pub mod poll;
pub mod recv;
pub mod recv_half;
pub mod send;
pub mod send_half;
pub mod signal;
pub mod sleepers;
pub mod sock;
pub mod spin;
pub mod state;
pub mod stream_opts;
pub mod svc;
pub mod verbs;
pub mod wire;

pub use poll::poll;
pub use sock::{close, create, is_rsocket, lookup, Sock};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_proto;
#[cfg(test)]
mod tests_send;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_iomap;
#[cfg(test)]
mod tests_epoll;

/// A connected pair of streams over the fake fabric, entered in the table
/// as rsocket numbers `a` and `b` (numbers the caller holds: no one else
/// gets them meanwhile). For tests outside this module (the async streams').
#[cfg(all(test, feature = "tokio"))]
pub(crate) fn fake_pair(a: std::ffi::c_int, b: std::ffi::c_int) {
    let (x, y) = tests_proto::pair();
    sock::insert(a, Sock::Stream(x));
    sock::insert(b, Sock::Stream(y));
}
