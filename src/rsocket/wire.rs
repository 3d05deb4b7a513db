// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The stream protocol's decisions over plain values, apart from the verbs
//! that carry them: what a message word from the peer means, where the
//! bytes of received messages are copied from, which half of the receive
//! buffer a credit hands back, what a descriptor the peer wrote into our
//! tables lets a send or riowrite target, and what the peer's connect data
//! says.
//!
//! Everything here is driven by a peer we do not trust: message words,
//! lengths, descriptor tables and connect data are whatever it sends. The
//! invariant, held for any input: a copy never leaves the receive buffer's
//! data region, a hand-back never names bytes outside it, and nothing
//! panics. The stream calls these functions with its
//! registered buffers; the unit tests below and the fuzz target
//! `rsocket_wire` (fuzz/) call them with byte slices.
#![deny(unsafe_code)]

pub const OP_DATA: u32 = 0;
pub const OP_WRITE: u32 = 2;
pub const OP_SGL: u32 = 4;
pub const OP_IOMAP_SGL: u32 = 6;
pub const OP_CTRL: u32 = 7;

/// Entries of the descriptor table the peer writes credits into.
pub const RS_SGL_SIZE: u32 = 2;
/// One riomap entry of the peer-written table: offset (8) + `RsSge` (16).
pub const IOMAP_ENTRY_SIZE: u32 = 24;
/// The send low-water mark: a stream is writable with this much room in
/// its send buffer (upstream's RS_SNDLOWAT), also a datagram send slot.
pub const RS_SNDLOWAT: u32 = 2048;
/// A work request id's flags: a receive; the send carrying a message's
/// word after its write (OPT_MSG_SEND).
pub const WR_RECV: u64 = 1 << 63;
pub const WR_MSG_SEND: u64 = 1 << 62;
/// A connection's option bits: the peer's descriptors come byte-swapped;
/// messages go as sends after their writes (no immediate data: iWARP).
pub const OPT_SWAP_SGL: u32 = 1;
pub const OPT_MSG_SEND: u32 = 2;
/// Length of the connect private data.
pub const CONN_DATA_LEN: usize = 40;
pub const CONN_FLAG_NET: u8 = 1;
pub const CONN_FLAG_IOMAP: u8 = 2;

#[inline]
pub fn msg_set(op: u32, data: u32) -> u32 {
    (op << 29) | (data & 0x1FFF_FFFF)
}
#[inline]
pub fn msg_op(m: u32) -> u32 {
    m >> 29
}
#[inline]
pub fn msg_data(m: u32) -> u32 {
    m & 0x1FFF_FFFF
}

/// Read access to a buffer the peer may write into: a registered buffer in
/// the real path, a byte slice in tests. Reads out of range panic (the
/// real buffer asserts its bounds); the functions here never ask for one.
pub trait Buf {
    fn read(&self, off: usize, out: &mut [u8]);
    fn read_u32(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        self.read(off, &mut b);
        u32::from_ne_bytes(b)
    }
    fn read_u64(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read(off, &mut b);
        u64::from_ne_bytes(b)
    }
    /// The 16 bytes at `off`, read once (a descriptor table entry).
    fn read16(&self, off: usize) -> [u8; 16] {
        let mut b = [0u8; 16];
        self.read(off, &mut b);
        b
    }
}

impl Buf for [u8] {
    fn read(&self, off: usize, out: &mut [u8]) {
        out.copy_from_slice(&self[off..off + out.len()]);
    }
}

/// An entry of a descriptor table the peer writes into: `struct rs_sge`
/// (16 bytes: addr, key, length, native byte order unless swapped).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct RsSge {
    pub addr: u64,
    pub key: u32,
    pub length: u32,
}

impl RsSge {
    pub fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.addr.to_ne_bytes());
        b[8..12].copy_from_slice(&self.key.to_ne_bytes());
        b[12..16].copy_from_slice(&self.length.to_ne_bytes());
        b
    }

    /// The entry at `off`, read in one piece (the peer may rewrite it).
    #[inline]
    pub fn read<B: Buf + ?Sized>(buf: &B, off: usize) -> RsSge {
        let b = buf.read16(off);
        let [a0, a1, a2, a3, a4, a5, a6, a7, k0, k1, k2, k3, l0, l1, l2, l3] = b;
        RsSge { addr: u64::from_ne_bytes([a0, a1, a2, a3, a4, a5, a6, a7]), key: u32::from_ne_bytes([k0, k1, k2, k3]), length: u32::from_ne_bytes([l0, l1, l2, l3]) }
    }

    pub fn swapped(&self) -> RsSge {
        RsSge { addr: self.addr.swap_bytes(), key: self.key.swap_bytes(), length: self.length.swap_bytes() }
    }

    /// What is left of a send target after writing `n` of its bytes (`n`
    /// is at most the length the sender read; the peer may have rewritten
    /// the entry since, so nothing here may overflow).
    pub fn advance(&self, n: u32) -> RsSge {
        RsSge { addr: self.addr.wrapping_add(u64::from(n)), key: self.key, length: self.length.saturating_sub(n) }
    }
}

/// A message word received from the peer (immediate data, or the word of
/// a send on iWARP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// Credits: the sender may use sequence numbers up to this one.
    Credits(u16),
    /// A riowrite or an iomap table update: nothing to receive.
    Write,
    /// A control message (disconnect, keepalive, shutdown).
    Ctrl(u32),
    /// Data: `len` bytes at the receive position (any op the protocol does
    /// not name counts as data, as upstream).
    Data { op: u32, len: u32 },
}

pub fn decode(m: u32) -> Msg {
    match msg_op(m) {
        OP_SGL => Msg::Credits(msg_data(m) as u16),
        OP_IOMAP_SGL | OP_WRITE => Msg::Write,
        OP_CTRL => Msg::Ctrl(msg_data(m)),
        op => Msg::Data { op, len: msg_data(m) },
    }
}

/// The receive side of a stream: the ring of received messages (op,
/// length) and the position in the receive buffer, whose data region is
/// `size` bytes, handed to the peer half at a time.
#[derive(Debug)]
pub struct Rx {
    size: u32,
    ring: Vec<(u32, u32)>,
    head: usize,
    tail: usize,
    /// Where the next received byte is read.
    pub offset: u32,
    /// Bytes consumed and not handed back to the peer yet.
    pub bytes_avail: u32,
    /// Start of the next half to hand back.
    pub free_offset: u32,
    /// Messages consumed (the peer's sequence numbers).
    pub seq_no: u16,
}

/// A read of the receive buffer planned under the stream's lock (see
/// [`Rx::plan`]): `n` bytes from `offset`, finishing `msgs` messages and
/// taking `partial` bytes of the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxPlan {
    pub offset: u32,
    pub n: usize,
    pub msgs: u32,
    pub partial: u32,
}

/// Copies a planned read out of a receive buffer whose data region is
/// `size` bytes (wrapping at its end); needs no [`Rx`], so it runs
/// without the stream's lock.
pub fn copy_planned<B: Buf + ?Sized>(size: u32, rbuf: &B, plan: &RxPlan, out: &mut [u8]) {
    let mut o = plan.offset;
    let mut done = 0usize;
    while done < plan.n && size > 0 {
        if o >= size {
            o = 0;
        }
        let k = (plan.n - done).min((size - o) as usize);
        rbuf.read(o as usize, &mut out[done..done + k]);
        done += k;
        o += k as u32;
    }
}

impl Default for Rx {
    fn default() -> Rx {
        Rx::new(0, 0)
    }
}

impl Rx {
    /// A receive side over a data region of `size` bytes (rounded down to
    /// an even size: the peer writes into two equal halves) for up to
    /// `rq_size` outstanding messages. The first half is the peer's at
    /// once (the connect data names it).
    pub fn new(size: u32, rq_size: u32) -> Rx {
        let size = size & !1;
        Rx { size, ring: vec![(0, 0); rq_size as usize + 1], head: 0, tail: 0, offset: 0, bytes_avail: size >> 1, free_offset: size >> 1, seq_no: 0 }
    }

    /// The data region's size.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Half the data region: what the peer gets at a time, and the largest
    /// message it can have written.
    pub fn half(&self) -> u32 {
        self.size >> 1
    }

    pub fn has_data(&self) -> bool {
        self.head != self.tail
    }

    /// Data messages received so far (wrapping): those consumed and those
    /// queued. Only a new message changes it (a partial read does not).
    pub fn arrived(&self) -> u16 {
        let queued = if self.tail >= self.head { self.tail - self.head } else { self.tail + self.ring.len() - self.head };
        self.seq_no.wrapping_add(queued as u16)
    }

    /// Queues a received data message. A length beyond half the buffer
    /// would make recv read outside it: it is cut there. A peer that sends
    /// more messages than it has credits overwrites the oldest (as
    /// upstream): what it gets is its own garbage, never memory outside the
    /// buffer.
    pub fn push(&mut self, op: u32, len: u32) {
        let half = self.half();
        if let Some(e) = self.ring.get_mut(self.tail) {
            *e = (op, len.min(half));
        }
        self.tail += 1;
        if self.tail >= self.ring.len() {
            self.tail = 0;
        }
    }

    /// What a read of up to `max` bytes takes, as `read` would take it:
    /// the bytes from the current position (wrapping at the buffer's end),
    /// the messages it finishes and how much of the next one it takes.
    /// The bytes planned stay the reader's: nothing hands them back to the
    /// peer until [`Rx::consume`], so they can be copied out of the buffer
    /// without the stream's lock (the producer only appends messages).
    pub fn plan(&self, max: usize) -> RxPlan {
        let mut left = max;
        let mut head = self.head;
        let mut p = RxPlan { offset: self.offset, n: 0, msgs: 0, partial: 0 };
        while left > 0 && head != self.tail {
            let data = self.ring[head].1;
            if (left as u64) < u64::from(data) {
                p.partial = left as u32;
                p.n += left;
                break;
            }
            p.msgs += 1;
            p.n += data as usize;
            left -= data as usize;
            head += 1;
            if head >= self.ring.len() {
                head = 0;
            }
        }
        p
    }

    /// Copies the planned bytes into `out` (at least `plan.n` long).
    pub fn copy<B: Buf + ?Sized>(&self, rbuf: &B, plan: &RxPlan, out: &mut [u8]) {
        copy_planned(self.size, rbuf, plan, out)
    }

    /// Consumes what `plan` (made by [`Rx::plan`] on this ring, with no
    /// consume since) took: the bytes count as free for the next credit.
    pub fn consume(&mut self, plan: &RxPlan) {
        for _ in 0..plan.msgs {
            if !self.has_data() {
                return;
            }
            self.seq_no = self.seq_no.wrapping_add(1);
            self.head += 1;
            if self.head >= self.ring.len() {
                self.head = 0;
            }
        }
        if plan.partial > 0 && self.has_data() {
            let e = &mut self.ring[self.head].1;
            *e = e.saturating_sub(plan.partial);
        }
        // The position advances as message-by-message reads would: a read
        // that ends exactly at the end leaves it there, the next one wraps.
        let mut rem = plan.n as u32;
        while rem > 0 && self.size > 0 {
            let end = self.size - self.offset;
            if rem > end {
                self.offset = 0;
                self.bytes_avail = self.bytes_avail.wrapping_add(end);
                rem -= end;
            } else {
                self.offset += rem;
                self.bytes_avail = self.bytes_avail.wrapping_add(rem);
                rem = 0;
            }
        }
    }

    /// Copies received bytes into `buf` and consumes them; returns how many.
    pub fn read<B: Buf + ?Sized>(&mut self, rbuf: &B, buf: &mut [u8]) -> usize {
        let p = self.plan(buf.len());
        self.copy(rbuf, &p, buf);
        self.consume(&p);
        p.n
    }

    /// Copies received bytes into `buf` without consuming them (MSG_PEEK).
    pub fn peek<B: Buf + ?Sized>(&self, rbuf: &B, buf: &mut [u8]) -> usize {
        let p = self.plan(buf.len());
        self.copy(rbuf, &p, buf);
        p.n
    }

    /// Whether half of the buffer has been consumed (a credit can hand it back).
    pub fn can_grant(&self) -> bool {
        self.bytes_avail >= self.half()
    }

    /// Hands back the next half of the buffer once that much has been
    /// consumed: its (offset, length) within the data region.
    pub fn grant(&mut self) -> Option<(u32, u32)> {
        if !self.can_grant() {
            return None;
        }
        let half = self.half();
        let at = self.free_offset;
        self.bytes_avail -= half;
        self.free_offset += half;
        if self.free_offset >= self.size {
            self.free_offset = 0;
        }
        Some((at, half))
    }
}

/// The peer's connect private data (40 bytes; see the parent module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnData {
    /// The peer's receive queue depth: our first credits.
    pub credits: u16,
    /// The peer's byte order differs from ours: descriptors we write into
    /// its tables are byte-swapped.
    pub swap: bool,
    /// The table the peer wants our credits in (addr, key, entries).
    pub sgl: RsSge,
    /// The peer's riomap table (addr, key, entries), if it supports riomap.
    pub iomap: Option<RsSge>,
    /// The first half of the peer's receive buffer.
    pub data_buf: RsSge,
}

/// Reads a peer's connect data: None when shorter than the 40 bytes or of
/// another version.
pub fn parse_conn_data(d: &[u8]) -> Option<ConnData> {
    let d: &[u8; CONN_DATA_LEN] = d.get(..CONN_DATA_LEN)?.try_into().ok()?;
    if d[0] != 1 {
        return None;
    }
    let be64 = |o: usize| u64::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3], d[o + 4], d[o + 5], d[o + 6], d[o + 7]]);
    let be32 = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
    let sgl = RsSge { addr: be64(8), key: be32(16), length: be32(20) };
    let peer_net = d[1] & CONN_FLAG_NET != 0;
    // The riomap table follows the credit table in the peer's memory.
    let iomap = (d[1] & CONN_FLAG_IOMAP != 0).then(|| RsSge {
        addr: sgl.addr.wrapping_add(16u64.wrapping_mul(u64::from(sgl.length))),
        key: sgl.key,
        length: scale_to_value(u32::from(d[7]), 8),
    });
    Some(ConnData {
        credits: u16::from_be_bytes([d[2], d[3]]),
        swap: peer_net != cfg!(target_endian = "big"),
        sgl,
        iomap,
        data_buf: RsSge { addr: be64(24), key: be32(32), length: be32(36) },
    })
}

/// The 40 bytes of our connect data: our receive queue depth, riomap table
/// size, credit table and the first half of our receive buffer.
pub fn format_conn_data(rq_size: u32, iomap_size: u32, target: (u64, u32), rbuf: (u64, u32), half: u32) -> [u8; CONN_DATA_LEN] {
    let mut d = [0u8; CONN_DATA_LEN];
    d[0] = 1;
    d[1] = CONN_FLAG_IOMAP | if cfg!(target_endian = "big") { CONN_FLAG_NET } else { 0 };
    d[2..4].copy_from_slice(&(rq_size as u16).to_be_bytes());
    d[7] = value_to_scale(iomap_size, 8) as u8;
    d[8..16].copy_from_slice(&target.0.to_be_bytes());
    d[16..20].copy_from_slice(&target.1.to_be_bytes());
    d[20..24].copy_from_slice(&RS_SGL_SIZE.to_be_bytes());
    d[24..32].copy_from_slice(&rbuf.0.to_be_bytes());
    d[32..36].copy_from_slice(&rbuf.1.to_be_bytes());
    d[36..40].copy_from_slice(&half.to_be_bytes());
    d
}

/// The next entry of the peer's credit table after `cur`, in a table of
/// `len` entries (the peer says how many; 0 or 1 keep us at entry 0).
pub fn next_sge(cur: u32, len: u32) -> u32 {
    let n = cur.wrapping_add(1);
    if n >= len {
        0
    } else {
        n
    }
}

/// Where in the peer's memory entry `i` of a table at `base` lies.
pub fn table_addr(base: u64, i: u32, entry: u32) -> u64 {
    base.wrapping_add(u64::from(i).wrapping_mul(u64::from(entry)))
}

/// Offset of the riomap entries in our target table.
pub const IOMAP_TABLE_OFF: usize = 16 * RS_SGL_SIZE as usize;

/// Size of our target table (credits, then `iomap_size` riomap entries).
pub fn target_table_len(iomap_size: u32) -> usize {
    IOMAP_TABLE_OFF + IOMAP_ENTRY_SIZE as usize * iomap_size as usize
}

/// Whether the riomap entry (start offset `off`, descriptor `e`) covers `offset`.
pub fn iomap_covers(off: u64, e: &RsSge, offset: u64) -> bool {
    offset >= off && offset - off < u64::from(e.length)
}

/// The entry of our riomap table (written by the peer, `entries` long)
/// covering `offset`.
pub fn find_iomap<B: Buf + ?Sized>(table: &B, entries: u32, offset: u64) -> Option<(u64, RsSge)> {
    (0..entries as usize).find_map(|i| {
        let p = IOMAP_TABLE_OFF + i * IOMAP_ENTRY_SIZE as usize;
        let (off, sge) = (table.read_u64(p), RsSge::read(table, p + 8));
        iomap_covers(off, &sge, offset).then_some((off, sge))
    })
}

/// A riowrite chunk at `offset` within the entry (`off`, `e`) that covers
/// it: the peer's address, and how many bytes the entry still holds from
/// there.
pub fn iomap_target(off: u64, e: &RsSge, offset: u64) -> (u64, u32) {
    let into = offset.wrapping_sub(off);
    (e.addr.wrapping_add(into), u64::from(e.length).saturating_sub(into) as u32)
}

pub fn value_to_scale(value: u32, bits: u32) -> u32 {
    if value <= (1 << (bits - 1)) {
        value
    } else {
        (1 << (bits - 1)) | (value >> bits)
    }
}

pub fn scale_to_value(value: u32, bits: u32) -> u32 {
    if value <= (1 << (bits - 1)) {
        value
    } else {
        (value & !(1 << (bits - 1))) << bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_words() {
        assert_eq!(decode(msg_set(OP_SGL, 0x1_2345)), Msg::Credits(0x2345));
        assert_eq!(decode(msg_set(OP_CTRL, 2)), Msg::Ctrl(2));
        assert_eq!(decode(msg_set(OP_WRITE, 9)), Msg::Write);
        assert_eq!(decode(msg_set(OP_IOMAP_SGL, 9)), Msg::Write);
        for op in [0, 1, 3, 5] {
            assert_eq!(decode(msg_set(op, 77)), Msg::Data { op, len: 77 });
        }
    }

    /// A buffer whose byte i is i (mod 251): what a copy read shows where it read.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn in_order_messages_wrap_around_the_buffer() {
        let rbuf = pattern(64);
        let mut rx = Rx::new(64, 8);
        // Three messages of 24 bytes: the third wraps at 64.
        for _ in 0..3 {
            rx.push(OP_DATA, 24);
        }
        let mut out = vec![0u8; 100];
        assert_eq!(rx.read(&rbuf[..], &mut out), 72);
        assert_eq!(&out[..64], &rbuf[..]);
        assert_eq!(&out[64..72], &rbuf[..8]);
        assert_eq!((rx.offset, rx.seq_no, rx.has_data()), (8, 3, false));
        assert_eq!(rx.bytes_avail, 32 + 72);
    }

    #[test]
    fn a_hostile_length_is_cut_to_half_the_buffer() {
        let rbuf = pattern(64);
        let mut rx = Rx::new(64, 4);
        rx.push(OP_DATA, 0x1FFF_FFFF);
        let mut out = vec![0u8; 1000];
        assert_eq!(rx.peek(&rbuf[..], &mut out), 32);
        assert_eq!(rx.read(&rbuf[..], &mut out), 32);
        // Many more messages than credits: the ring wraps over itself, every
        // copy stays within the 64 bytes.
        for i in 0..1000u32 {
            rx.push(i % 6, i.wrapping_mul(2_654_435_761));
            if i % 7 == 0 {
                let n = (i as usize * 13) % 200;
                rx.read(&rbuf[..], &mut out[..n]);
                assert!(rx.offset <= rx.size());
            }
            while rx.grant().is_some() {}
        }
    }

    #[test]
    fn partial_reads_keep_the_rest() {
        let rbuf = pattern(64);
        let mut rx = Rx::new(64, 4);
        rx.push(OP_DATA, 20);
        let mut out = [0u8; 5];
        assert_eq!(rx.read(&rbuf[..], &mut out), 5);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        assert_eq!(rx.seq_no, 0, "the message is not consumed yet");
        let mut rest = [0u8; 30];
        assert_eq!(rx.read(&rbuf[..], &mut rest), 15);
        assert_eq!(rest[0], 5);
        assert_eq!(rx.seq_no, 1);
    }

    #[test]
    fn grants_alternate_halves_within_the_region() {
        // An odd size: the data region is even, both halves inside it.
        for size in [64u32, 65, 1, 0, 3] {
            let mut rx = Rx::new(size, 4);
            let mut got = Vec::new();
            for _ in 0..4 {
                rx.bytes_avail = rx.bytes_avail.wrapping_add(rx.half());
                if let Some((at, len)) = rx.grant() {
                    assert!(u64::from(at) + u64::from(len) <= u64::from(size), "size {size}: {at}+{len}");
                    got.push(at);
                }
            }
            if size == 64 {
                assert_eq!(got, [32, 0, 32, 0]);
            }
        }
    }

    #[test]
    fn conn_data_round_trip_and_bad_data() {
        let d = format_conn_data(384, 5, (0x1000, 7), (0x2000, 8), 65536);
        let c = parse_conn_data(&d).unwrap();
        assert_eq!(c.credits, 384);
        assert!(!c.swap);
        assert_eq!(c.sgl, RsSge { addr: 0x1000, key: 7, length: RS_SGL_SIZE });
        assert_eq!(c.iomap, Some(RsSge { addr: 0x1000 + 32, key: 7, length: 5 }));
        assert_eq!(c.data_buf, RsSge { addr: 0x2000, key: 8, length: 65536 });
        assert!(parse_conn_data(&d[..39]).is_none());
        assert!(parse_conn_data(&[]).is_none());
        let mut v = d.to_vec();
        v[0] = 2;
        assert!(parse_conn_data(&v).is_none());
        // Addresses at the top of the address space wrap, never panic.
        let mut v = d.to_vec();
        v[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
        v[20..24].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse_conn_data(&v).is_some());
    }

    #[test]
    fn peer_written_descriptors_never_overflow() {
        let e = RsSge { addr: u64::MAX - 1, key: 1, length: 10 };
        assert_eq!(e.advance(4), RsSge { addr: 2, key: 1, length: 6 });
        assert_eq!(e.advance(40).length, 0);
        assert!(iomap_covers(u64::MAX - 2, &e, u64::MAX));
        assert!(!iomap_covers(5, &e, 4));
        assert_eq!(iomap_target(u64::MAX - 2, &e, u64::MAX), (0, 8));
        let mut t = vec![0u8; target_table_len(2)];
        let p = IOMAP_TABLE_OFF + IOMAP_ENTRY_SIZE as usize;
        t[p..p + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
        t[p + 8..p + 24].copy_from_slice(&RsSge { addr: 9, key: 3, length: u32::MAX }.bytes());
        assert_eq!(find_iomap(&t[..], 2, u64::MAX).map(|x| x.0), Some(u64::MAX));
        assert_eq!(find_iomap(&t[..], 2, 1), None);
        assert_eq!(next_sge(1, 2), 0);
        assert_eq!(next_sge(0, 2), 1);
        assert_eq!(next_sge(5, 0), 0);
        assert_eq!(next_sge(u32::MAX, 1), 0);
    }

    /// The message-by-message read the receive path did before it was
    /// split into plan, copy and consume (kept as the reference).
    fn reference_read(rx: &mut Rx, rbuf: &[u8], buf: &mut [u8]) -> usize {
        let mut left = buf.len();
        let mut off = 0usize;
        while left > 0 && rx.has_data() {
            let data = rx.ring[rx.head].1;
            let mut rsize;
            if (left as u64) < u64::from(data) {
                rsize = left as u32;
                rx.ring[rx.head].1 -= rsize;
            } else {
                rx.seq_no = rx.seq_no.wrapping_add(1);
                rsize = data;
                rx.head += 1;
                if rx.head >= rx.ring.len() {
                    rx.head = 0;
                }
            }
            left -= rsize as usize;
            let end = rx.size - rx.offset;
            if rsize > end {
                rbuf.read(rx.offset as usize, &mut buf[off..off + end as usize]);
                rx.offset = 0;
                off += end as usize;
                rsize -= end;
                rx.bytes_avail = rx.bytes_avail.wrapping_add(end);
            }
            rbuf.read(rx.offset as usize, &mut buf[off..off + rsize as usize]);
            rx.offset += rsize;
            off += rsize as usize;
            rx.bytes_avail = rx.bytes_avail.wrapping_add(rsize);
        }
        off
    }

    /// Plan, copy and consume (the receive path with the lock released
    /// around its copy) take exactly the bytes and leave exactly the state
    /// the one-piece read did, for random message and read sizes, zero-
    /// length messages, hostile lengths, peeks, grants and wrap-arounds.
    #[test]
    fn planned_reads_match_the_one_piece_read() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(m)) as u32
        };
        for round in 0..300 {
            let size = [64u32, 96, 1000, 4096][round % 4];
            let rq = [4u32, 8, 16][round % 3];
            let rbuf = pattern(size as usize);
            let (mut a, mut b) = (Rx::new(size, rq), Rx::new(size, rq));
            let mut queued = 0u32;
            for _ in 0..200 {
                match next(4) {
                    0 | 1 if queued < rq => {
                        // Mostly honest lengths, some zero, some beyond half the buffer.
                        let len = match next(8) {
                            0 => 0,
                            1 => size * 3,
                            _ => next(size / 2 + 1),
                        };
                        a.push(0, len);
                        b.push(0, len);
                        queued += 1;
                    }
                    2 => {
                        let want = next(size + 8) as usize;
                        let (mut x, mut y) = (vec![0u8; want], vec![0u8; want]);
                        let pa = a.peek(&rbuf[..], &mut x);
                        let pb = reference_peek(&b, &rbuf, &mut y);
                        assert_eq!((pa, &x), (pb, &y), "round {round}: peek");
                    }
                    _ => {
                        let want = next(size + 8) as usize;
                        let (mut x, mut y) = (vec![0u8; want], vec![0u8; want]);
                        let before = a.head;
                        let na = a.read(&rbuf[..], &mut x);
                        let nb = reference_read(&mut b, &rbuf, &mut y);
                        assert_eq!((na, &x), (nb, &y), "round {round}: read {want}");
                        let done = (a.head + a.ring.len() - before) % a.ring.len();
                        queued -= done as u32;
                        if next(2) == 0 {
                            assert_eq!(a.grant(), b.grant(), "round {round}: grant");
                        }
                    }
                }
                assert_eq!(
                    (a.head, a.tail, a.offset, a.bytes_avail, a.free_offset, a.seq_no, &a.ring),
                    (b.head, b.tail, b.offset, b.bytes_avail, b.free_offset, b.seq_no, &b.ring),
                    "round {round}: state"
                );
            }
        }
    }

    fn reference_peek(rx: &Rx, rbuf: &[u8], buf: &mut [u8]) -> usize {
        let mut copy = Rx { size: rx.size, ring: rx.ring.clone(), head: rx.head, tail: rx.tail, offset: rx.offset, bytes_avail: rx.bytes_avail, free_offset: rx.free_offset, seq_no: rx.seq_no };
        reference_read(&mut copy, rbuf, buf)
    }
}
