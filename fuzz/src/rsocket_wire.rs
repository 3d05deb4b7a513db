// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The rsocket stream protocol against a hostile peer: the input is a
//! script of what the peer sends (message words with any op and length,
//! connect data of any length and content, descriptors written into our
//! credit and riomap tables) interleaved with what our side does (recv and
//! MSG_PEEK of any size, credit hand-backs, sends and riowrites that take
//! their target from those tables). Every step goes through
//! `rdmacm::internal::rsocket::wire`, the functions the stream itself calls.
//!
//! Checked for every input: a copy out of the receive buffer never reads
//! outside its data region (the buffer below panics if asked to: one byte
//! past it, the message slots of iWARP, are not data), a peek shows what
//! the next read returns, a hand-back names bytes inside the data region,
//! a send or riowrite never takes more than the descriptor it read holds,
//! and nothing panics or aborts.

use crate::Reader;
use rdmacm::internal::rsocket::wire::{self, Buf, Msg, RsSge, Rx};

/// The receive buffer: `limit` bytes of data region inside a larger
/// allocation (as the registered buffer, which holds the message slots
/// past the data). A read past `limit` is a finding.
struct Rbuf {
    bytes: Vec<u8>,
    limit: usize,
}

impl Buf for Rbuf {
    fn read(&self, off: usize, out: &mut [u8]) {
        let end = off.checked_add(out.len()).expect("read offset overflows");
        assert!(end <= self.limit, "read [{off}, {end}) outside the receive buffer's data region of {} bytes", self.limit);
        out.copy_from_slice(&self.bytes[off..end]);
    }
}

fn u16_(r: &mut Reader) -> u16 {
    u16::from_le_bytes([r.u8(), r.u8()])
}
fn u32_(r: &mut Reader) -> u32 {
    r.i32() as u32
}
fn u64_(r: &mut Reader) -> u64 {
    u64::from(u32_(r)) | u64::from(u32_(r)) << 32
}
fn sge(r: &mut Reader) -> RsSge {
    RsSge { addr: u64_(r), key: u32_(r), length: u32_(r) }
}

/// Sizes the stream could have: defaults, small and odd ones, and any.
fn rbuf_size(r: &mut Reader) -> u32 {
    match r.u8() % 8 {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 64,
        5 => 65,
        6 => 4096,
        _ => u32::from(u16_(r)),
    }
}

pub fn wire_one(data: &[u8]) {
    let mut r = Reader(data);
    let size = rbuf_size(&mut r);
    let rq_size = u32::from(r.u8());
    let mut rx = Rx::new(size, rq_size);
    assert!(rx.size() <= size && rx.size() % 2 == 0);
    // The data region, then the iWARP message slots (4 bytes a message).
    let mut bytes: Vec<u8> = (0..size as usize + 4 * rq_size as usize).map(|i| (i % 251) as u8).collect();
    bytes.iter_mut().take(size as usize).for_each(|b| *b ^= 0x5a);
    let rbuf = Rbuf { bytes, limit: rx.size() as usize };
    // Our target table: credits (2 entries), then riomap entries.
    let iomap_size = u32::from(r.u8() % 9);
    let mut table = vec![0u8; wire::target_table_len(iomap_size)];
    let mut target_sge = 0usize;
    let mut remote_sge = 1u32;
    let mut sgl_len = wire::RS_SGL_SIZE;

    let mut steps = 0;
    while !r.0.is_empty() && steps < 2000 {
        steps += 1;
        match r.u8() % 10 {
            // A message word from the peer (immediate data or iWARP send).
            0 | 1 => {
                let m = u32_(&mut r);
                match wire::decode(m) {
                    Msg::Data { op, len } => {
                        assert_eq!((op, len), (wire::msg_op(m), wire::msg_data(m)));
                        rx.push(op, len);
                    }
                    Msg::Credits(c) => assert_eq!(c, wire::msg_data(m) as u16),
                    Msg::Ctrl(d) => assert_eq!(d, wire::msg_data(m)),
                    Msg::Write => {}
                }
            }
            // A burst of data messages of one length (more than credits allow).
            2 => {
                let (n, len) = (r.u8(), u32_(&mut r));
                for _ in 0..n {
                    rx.push(wire::OP_DATA, len);
                }
            }
            // recv (after a peek of the same size: it shows the same bytes).
            3 | 4 => {
                let want = usize::from(u16_(&mut r)) % 70_000;
                let peek_first = r.u8() & 1 != 0;
                let before = (rx.offset, rx.bytes_avail);
                let mut peeked = vec![0u8; want];
                let pn = if peek_first { Some(rx.peek(&rbuf, &mut peeked)) } else { None };
                assert_eq!((rx.offset, rx.bytes_avail), before, "a peek changed the receive state");
                let mut out = vec![0u8; want];
                let n = rx.read(&rbuf, &mut out);
                assert!(n <= want);
                assert!(rx.offset <= rx.size());
                if let Some(pn) = pn {
                    assert_eq!(pn, n, "peek and recv disagree on the count");
                    assert_eq!(peeked[..n], out[..n], "peek and recv disagree on the bytes");
                }
            }
            // A credit hand-back: the half named lies inside the data region.
            5 => {
                if let Some((at, len)) = rx.grant() {
                    assert!(u64::from(at) + u64::from(len) <= u64::from(rx.size()), "hand-back [{at}, +{len}) outside {}", rx.size());
                    assert_eq!(len, rx.half());
                }
                remote_sge = wire::next_sge(remote_sge, sgl_len);
                assert!(remote_sge < sgl_len.max(1));
                let _ = wire::table_addr(u64_(&mut r), remote_sge, 16);
            }
            // The peer writes a credit descriptor (SGL update) into our table.
            6 => {
                let i = usize::from(r.u8() % 2);
                let e = sge(&mut r);
                table[i * 16..i * 16 + 16].copy_from_slice(&e.bytes());
            }
            // A send takes its target from the table (read once).
            7 => {
                let t = RsSge::read(&table[..], target_sge * 16);
                let want = u32_(&mut r);
                let xfer = want.min(t.length);
                let next = t.advance(xfer);
                assert_eq!(next.length, t.length - xfer);
                assert_eq!(next.addr, t.addr.wrapping_add(u64::from(xfer)));
                table[target_sge * 16..target_sge * 16 + 16].copy_from_slice(&next.bytes());
                if next.length == 0 {
                    target_sge = (target_sge + 1) % wire::RS_SGL_SIZE as usize;
                }
            }
            // The peer writes a riomap entry; a riowrite looks one up.
            8 => {
                if iomap_size > 0 {
                    let i = usize::from(r.u8()) % iomap_size as usize;
                    let p = wire::IOMAP_TABLE_OFF + i * wire::IOMAP_ENTRY_SIZE as usize;
                    let off = u64_(&mut r);
                    table[p..p + 8].copy_from_slice(&off.to_ne_bytes());
                    table[p + 8..p + 24].copy_from_slice(&sge(&mut r).bytes());
                }
                let offset = u64_(&mut r);
                if let Some((o, e)) = wire::find_iomap(&table[..], iomap_size, offset) {
                    assert!(wire::iomap_covers(o, &e, offset));
                    let (_, room) = wire::iomap_target(o, &e, offset);
                    assert!(room >= 1 && room <= e.length, "riowrite room {room} of {e:?} at {offset} (entry at {o})");
                }
            }
            // Connect data from the peer: any length and content.
            _ => {
                let n = usize::from(r.u8() % 48);
                let d = r.bytes(n);
                match wire::parse_conn_data(&d) {
                    Some(c) => {
                        assert!(d.len() >= wire::CONN_DATA_LEN && d[0] == 1);
                        sgl_len = c.sgl.length;
                        remote_sge = 1;
                        table[..16].copy_from_slice(&c.data_buf.bytes());
                    }
                    None => assert!(d.len() < wire::CONN_DATA_LEN || d[0] != 1),
                }
                // Ours, read back as the peer would.
                let (rq, io, ta, tk, ra, rk) = (u32_(&mut r), u32_(&mut r), u64_(&mut r), u32_(&mut r), u64_(&mut r), u32_(&mut r));
                let f = wire::format_conn_data(rq, io, (ta, tk), (ra, rk), rx.half());
                let c = wire::parse_conn_data(&f).expect("our own connect data");
                assert_eq!(c.credits, rq as u16);
                assert_eq!(c.sgl, RsSge { addr: ta, key: tk, length: wire::RS_SGL_SIZE });
                assert_eq!(c.data_buf, RsSge { addr: ra, key: rk, length: rx.half() });
                assert!(!c.swap);
                let io_back = c.iomap.expect("we announce riomap").length;
                assert_eq!(io_back, wire::scale_to_value(wire::value_to_scale(io, 8) & 0xff, 8));
            }
        }
    }
}
