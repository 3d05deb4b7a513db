// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Unit tests of the typed kernel protocol: encodings against the kernel's
//! layouts, decodings, and the kernel adapter's handling of short writes.

use super::*;

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}
fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes(b[off..off + 2].try_into().unwrap())
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

fn v4(a: [u8; 4], port: u16) -> SockAddr {
    let mut b = [0u8; 16];
    b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    b[2..4].copy_from_slice(&port.to_be_bytes());
    b[4..8].copy_from_slice(&a);
    SockAddr::from_bytes(&b).unwrap()
}

#[test]
fn header_sizes() {
    let c = enc_create_id(0x1122, 0x3344, 0x0106, 2);
    let b = bytes_of(&c);
    assert_eq!(b.len(), 32);
    assert_eq!(u32_at(b, 0), cmd::CREATE_ID);
    assert_eq!(u16_at(b, 4), 24);
    assert_eq!(u16_at(b, 6), 4);
    assert_eq!(u64_at(b, 8), 0x1122);
    assert_eq!(u64_at(b, 16), 0x3344);
    assert_eq!(u16_at(b, 24), 0x0106);
    assert_eq!(b[26], 2);
}

#[test]
fn destroy_and_migrate() {
    let c = enc_destroy_id(7, 0x1000);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u16_at(b, 6)), (cmd::DESTROY_ID, 16, 4));
    assert_eq!(u64_at(b, 8), 0x1000);
    assert_eq!(u32_at(b, 16), 7);
    let c = enc_migrate_id(9, 5, 0x2000);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u16_at(b, 6)), (cmd::MIGRATE_ID, 16, 4));
    assert_eq!((u32_at(b, 16), u32_at(b, 20)), (9, 5));
}

#[test]
fn bind_families() {
    let a = v4([192, 0, 2, 1], 7471);
    let c = enc_bind(3, a.as_bytes());
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u16_at(b, 6)), (cmd::BIND, 136, 0));
    assert_eq!(u32_at(b, 8), 3);
    assert_eq!(u16_at(b, 12), 16);
    assert_eq!(&b[16..32], a.as_bytes());
    let c = enc_bind_ip(3, a.as_bytes());
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::BIND_IP, 40));
    assert_eq!(&b[16..32], a.as_bytes());
    assert_eq!(u32_at(b, 44), 3);
}

#[test]
fn resolve_families() {
    let d = v4([192, 0, 2, 2], 0);
    let s = v4([192, 0, 2, 1], 0);
    let c = enc_resolve_addr(4, s.as_bytes(), d.as_bytes(), 2000);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::RESOLVE_ADDR, 272));
    assert_eq!((u32_at(b, 8), u32_at(b, 12)), (4, 2000));
    assert_eq!((u16_at(b, 16), u16_at(b, 18)), (16, 16));
    assert_eq!(&b[24..40], s.as_bytes());
    assert_eq!(&b[152..168], d.as_bytes());
    assert!(b[40..152].iter().chain(&b[168..]).all(|&x| x == 0), "zero past the addresses");
    let c = enc_resolve_addr(4, &[], d.as_bytes(), 1);
    assert_eq!(u16_at(bytes_of(&c), 16), 0);
    assert!(bytes_of(&c)[24..152].iter().all(|&x| x == 0), "no source");
    let c = enc_resolve_ip(4, &[], d.as_bytes(), 500);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::RESOLVE_IP, 64));
    assert_eq!(&b[8..36], &[0u8; 28]);
    assert_eq!(&b[36..52], d.as_bytes());
    assert_eq!((u32_at(b, 64), u32_at(b, 68)), (4, 500));
    // The legacy sockaddr_in6 fields carry a whole IPv6 address (the
    // scope id is its last field).
    let d6 = SockAddr::v6([0xfe; 16], 7);
    let b = bytes_of(&enc_resolve_ip(4, d6.as_bytes(), d6.as_bytes(), 1)).to_vec();
    assert_eq!((&b[8..36], &b[36..64]), (d6.as_bytes(), d6.as_bytes()));
    let b = bytes_of(&enc_bind(4, d6.as_bytes())).to_vec();
    assert_eq!(u16_at(&b, 12), 28);
    assert_eq!(&b[16..44], d6.as_bytes());
    assert!(b[44..].iter().all(|&x| x == 0), "zero past the address");
    let c = enc_resolve_route(4, 2000);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u32_at(b, 8), u32_at(b, 12)), (cmd::RESOLVE_ROUTE, 8, 4, 2000));
}

#[test]
fn queries_and_events() {
    let c = enc_query(cmd::QUERY, 2, kabi::QUERY_GID, 0xabc, 280);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u16_at(b, 6)), (cmd::QUERY, 16, 280));
    assert_eq!((u64_at(b, 8), u32_at(b, 16), u32_at(b, 20)), (0xabc, 2, kabi::QUERY_GID));
    let c = enc_get_event(0x55);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u16_at(b, 6)), (cmd::GET_EVENT, 8, 336));
    let c = enc_set_option(1, 0, 3, 0x77, 1);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::SET_OPTION, 24));
    assert_eq!((u64_at(b, 8), u32_at(b, 16), u32_at(b, 20), u32_at(b, 24), u32_at(b, 28)), (0x77, 1, 0, 3, 1));
    let c = enc_write_cm_event(6, 18, -5, 0xdead_beef_0000_0001);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::WRITE_CM_EVENT, 320));
    assert_eq!((u32_at(b, 8), u32_at(b, 16), u32_at(b, 20) as i32), (6, 18, -5));
    assert_eq!(u64_at(b, 24), 0xdead_beef_0000_0001);
}

/// `write_event` writes enc_write_cm_event's bytes, whether it takes the
/// kept command (whose untouched bytes must stay zero) or, the kept one
/// taken, builds one on its stack.
#[test]
fn write_event_sends_the_encoded_command() {
    let (mut rd, wr) = std::io::pipe().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&wr);
    let mut got = vec![0u8; std::mem::size_of::<Cmd<kabi::WriteCmEvent>>()];
    for (i, &(id, status, arg)) in [(6u32, -5i32, 0xdead_beef_0000_0001u64), (0, 0, 0), (u32::MAX, i32::MIN, u64::MAX)].iter().enumerate() {
        // (the third round with the kept command taken: the stack's path)
        let taken = i == 2 && !WRITE_CMD.busy.swap(true, Ordering::Acquire);
        write_event(fd, id, 18, status, arg).unwrap();
        if taken {
            WRITE_CMD.busy.store(false, Ordering::Release);
        }
        std::io::Read::read_exact(&mut rd, &mut got).unwrap();
        assert_eq!(got, bytes_of(&enc_write_cm_event(id, 18, status, arg)), "round {i}");
    }
}

/// Sets the fields of `k` that are not zero, and its private data up to
/// its length, as a loan does: what it leaves is the scrub's.
fn fill_set(c: &mut kabi::ConnParam, k: &kabi::ConnParam) {
    let n = k.private_data_len as usize;
    c.private_data[..n].copy_from_slice(&k.private_data[..n]);
    for (to, v) in [(&mut c.qp_num, k.qp_num), (&mut c.qkey, k.qkey)] {
        if v != 0 {
            *to = v;
        }
    }
    let bytes = [k.private_data_len, k.srq, k.responder_resources, k.initiator_depth, k.flow_control, k.retry_count, k.rnr_retry_count, k.valid];
    let to = [&mut c.private_data_len, &mut c.srq, &mut c.responder_resources, &mut c.initiator_depth, &mut c.flow_control, &mut c.retry_count, &mut c.rnr_retry_count, &mut c.valid];
    for (to, v) in to.into_iter().zip(bytes) {
        if v != 0 {
            *to = v;
        }
    }
}

/// CONNECT and ACCEPT filled in the kept commands write the encoded
/// commands' bytes: a loan that follows one with private data and every
/// field set, and sets fewer of them, finds the rest zero again; the
/// stack's command (the kept one taken) is the same.
#[test]
fn kept_connect_and_accept_commands_send_the_encoded_bytes() {
    let (mut rd, wr) = std::io::pipe().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&wr);
    let mut full = kabi::ConnParam { qp_num: 0x1234, qkey: 9, private_data_len: 200, srq: 1, responder_resources: 2, initiator_depth: 3, flow_control: 1, retry_count: 5, rnr_retry_count: 6, valid: 1, ..Default::default() };
    full.private_data[..200].fill(0xa5);
    let mut sparse = kabi::ConnParam { qp_num: 7, private_data_len: 3, valid: 1, ..Default::default() };
    sparse.private_data[..3].copy_from_slice(b"abc");
    let ece = kabi::Ece { vendor_id: 1, attr_mod: 2 };
    let rounds = [(full, ece), (sparse, kabi::Ece::default()), (kabi::ConnParam::default(), kabi::Ece::default()), (full, ece)];
    for (i, (k, ece)) in rounds.iter().enumerate() {
        let (id, uid) = (40 + i as u32, 0x77 + i as u64);
        // (the last round with both kept commands taken: the stack's path)
        let taken = i == 3 && !CONNECT_CMD.busy.swap(true, Ordering::Acquire) && !ACCEPT_CMD.busy.swap(true, Ordering::Acquire);
        let set_ece = |to: &mut kabi::Ece| {
            if *ece != kabi::Ece::default() {
                *to = *ece;
            }
        };
        with_connect_command(id, |c| {
            fill_set(&mut c.body.conn_param, k);
            set_ece(&mut c.body.ece);
            send(fd, c)
        })
        .unwrap();
        let mut got = vec![0u8; std::mem::size_of::<Cmd<kabi::Connect>>()];
        std::io::Read::read_exact(&mut rd, &mut got).unwrap();
        assert_eq!(got, bytes_of(&enc_connect(id, k, *ece)), "connect, round {i}");
        with_accept_command(id, uid, |c| {
            fill_set(&mut c.body.conn_param, k);
            set_ece(&mut c.body.ece);
            send(fd, c)
        })
        .unwrap();
        let mut got = vec![0u8; std::mem::size_of::<Cmd<kabi::Accept>>()];
        std::io::Read::read_exact(&mut rd, &mut got).unwrap();
        assert_eq!(got, bytes_of(&enc_accept(id, uid, k, *ece)), "accept, round {i}");
        if taken {
            CONNECT_CMD.busy.store(false, Ordering::Release);
            ACCEPT_CMD.busy.store(false, Ordering::Release);
        }
    }
}

#[test]
fn connection_and_multicast_commands() {
    let conn = kabi::ConnParam { qp_num: 0x11, private_data_len: 2, ..Default::default() };
    let c = enc_connect(5, &conn, kabi::Ece { vendor_id: 7, attr_mod: 8 });
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4), u16_at(b, 6)), (cmd::CONNECT, 288, 0));
    assert_eq!(u32_at(b, 8), 0x11);
    assert_eq!(b[8 + 264], 2);
    assert_eq!((u32_at(b, 8 + 272), u32_at(b, 8 + 280), u32_at(b, 8 + 284)), (5, 7, 8));
    let c = enc_accept(5, 0xabcd, &conn, kabi::Ece::default());
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::ACCEPT, 296));
    assert_eq!((u64_at(b, 8), u32_at(b, 16), u32_at(b, 8 + 280)), (0xabcd, 0x11, 5));
    let c = enc_reject(5, 28, &[1, 2, 3]);
    let b = bytes_of(&c);
    assert_eq!((u32_at(b, 0), u16_at(b, 4)), (cmd::REJECT, 264));
    assert_eq!((u32_at(b, 8), b[12], b[13], &b[16..19]), (5, 3, 28, &[1u8, 2, 3][..]));
    let c = enc_reject(5, 0, &[0u8; 400]);
    assert_eq!(bytes_of(&c)[12], 255, "the length is a u8");
    let b = bytes_of(&enc_listen(5, 10)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u32_at(&b, 8), u32_at(&b, 12)), (cmd::LISTEN, 8, 5, 10));
    let b = bytes_of(&enc_disconnect(5)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u32_at(&b, 8)), (cmd::DISCONNECT, 4, 5));
    let b = bytes_of(&enc_init_qp_attr(5, 3, 0x99)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u16_at(&b, 6)), (cmd::INIT_QP_ATTR, 16, 144));
    assert_eq!((u64_at(&b, 8), u32_at(&b, 16), u32_at(&b, 20)), (0x99, 5, 3));
    let b = bytes_of(&enc_notify(5, 9)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u32_at(&b, 12)), (cmd::NOTIFY, 8, 9));
    let a = v4([239, 0, 0, 1], 0);
    let b = bytes_of(&enc_join_mcast(5, 0x77, &a, 1, 0x88)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u16_at(&b, 6)), (cmd::JOIN_MCAST, 152, 4));
    assert_eq!((u64_at(&b, 8), u64_at(&b, 16), u32_at(&b, 24), u16_at(&b, 28), u16_at(&b, 30)), (0x88, 0x77, 5, 16, 1));
    assert_eq!(&b[32..48], a.as_bytes());
    let b = bytes_of(&enc_join_ip_mcast(5, 0x77, &a, 0x88)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u32_at(&b, 52)), (cmd::JOIN_IP_MCAST, 48, 5));
    let b = bytes_of(&enc_leave_mcast(3, 0x88)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u16_at(&b, 6), u32_at(&b, 16)), (cmd::LEAVE_MCAST, 16, 4, 3));
    let ibs = kabi::IbService { service_id: 0x1234, flags: kabi::IB_SERVICE_FLAG_ID, ..Default::default() };
    let b = bytes_of(&enc_resolve_ib_service(5, &ibs)).to_vec();
    assert_eq!((u32_at(&b, 0), u16_at(&b, 4), u32_at(&b, 8), u64_at(&b, 16)), (cmd::RESOLVE_IB_SERVICE, 88, 5, 0x1234));
    assert_eq!(u32_at(&b, 16 + 72), kabi::IB_SERVICE_FLAG_ID);
}

#[test]
fn decode_addr_and_index() {
    let mut r = kabi::QueryAddrResp { node_guid: 0x1122, port_num: 1, pkey: 0xffff, src_size: 16, dst_size: 200, ibdev_index: 3, ..Default::default() };
    r.src_addr.bytes[0] = 2;
    let a = dec_addr(&r);
    assert_eq!(a.src.len(), 16);
    assert_eq!(a.dst.len(), 128, "sizes are clamped to the storage");
    r.src_addr.bytes[8] = 0xfe;
    r.src_size = 0;
    assert_eq!(dec_gid(&r).src.ib_image().sib_addr.sib_raw[0], 0xfe, "QUERY GID: a sockaddr_ib whatever the size");
    assert_eq!(a.ibdev_index, Some(3));
    assert_eq!(a.src.family(), 2);
    r.ibdev_index = u32::MAX;
    assert_eq!(dec_addr(&r).ibdev_index, None);
}

/// The answer read in place (`QueryAddrResp`'s accessors, what the CM
/// reads after `query_into`) says what the decoded one says, and a test
/// double's answer survives the way through `enc_addr_resp`.
#[test]
fn query_answer_in_place() {
    let mut r = kabi::QueryAddrResp { node_guid: 0x1122, port_num: 1, pkey: 0xffff, src_size: 16, dst_size: 200, ibdev_index: 3, ..Default::default() };
    r.src_addr.bytes[..4].copy_from_slice(&[2, 0, 0x12, 0x34]);
    r.dst_addr.bytes[127] = 9;
    assert_eq!(r.src(), &r.src_addr.bytes[..16]);
    assert_eq!(r.dst().len(), 128, "sizes are clamped to the storage");
    assert_eq!(r.device_index(), Some(3));
    r.src_addr.bytes[8..24].copy_from_slice(&[0xfe; 16]);
    r.dst_addr.bytes[8] = 0x80;
    r.src_size = 0;
    let (sgid, dgid) = r.gids();
    assert_eq!(sgid, dec_gid(&r).src.ib_image().sib_addr.sib_raw, "QUERY GID: the sib_addr whatever the size");
    assert_eq!(dgid, dec_gid(&r).dst.ib_image().sib_addr.sib_raw);
    assert_eq!((sgid[0], sgid[15], dgid[0]), (0xfe, 0xfe, 0x80));
    r.ibdev_index = kabi::INVALID_IBDEV_INDEX;
    assert_eq!(r.device_index(), None);
    let a = dec_addr(&r);
    let back = enc_addr_resp(&a);
    assert_eq!((back.node_guid, back.port_num, back.pkey, back.device_index()), (0x1122, 1, 0xffff, None));
    assert_eq!((back.src(), back.dst()), (r.src(), r.dst()));
    assert_eq!(dec_gid(&back).dst.ib_image().sib_addr.sib_raw, dgid);
}

#[test]
fn decode_paths() {
    let mut r = kabi::QueryPathResp::default();
    r.hdr.num_paths = 9;
    r.path_data[0].flags = 0x3;
    let p = dec_paths(&r);
    assert_eq!(p.len(), kabi::MAX_PATHS, "clamped");
    let mut d = p[0];
    d.path.flowlabel_hoplimit = ((0x12345u32 << 8) | 0x40).to_be();
    d.path.qosclass_sl = 0x0015u16.to_be();
    d.path.mtu = 0xC4;
    d.path.reversible_numpath = 0x81;
    let s = path_from_data(&d);
    assert_eq!(u32::from_be(s.flow_label), 0x12345);
    assert_eq!(s.hop_limit, 0x40);
    assert_eq!(s.sl, 5);
    assert_eq!(s.mtu, 4);
    assert_eq!(s.reversible, 1);
    assert_eq!(s.preference, 3);
    assert_eq!((s.mtu_selector, s.rate_selector, s.numb_path), (2, 2, 1));
}

#[test]
fn kernel_without_device_file() {
    let k = Kernel { dev_path: "/nonexistent/rdma_cm" };
    assert_eq!(k.open().unwrap_err(), Errno::ENOENT);
    let k = Kernel { dev_path: "/etc/passwd" };
    assert_eq!(k.open().unwrap_err(), Errno::ENODEV, "not a ucma character device");
    // Writing to a closed descriptor reports the kernel's errno.
    assert_eq!(k.resolve_route(-1, 1, 1).unwrap_err(), Errno::EBADF);
}

#[test]
fn event_resp_layout() {
    let mut r = kabi::EventResp::default();
    r.param.arg32 = [1, 2];
    // SAFETY: reading back the union member just written.
    assert_eq!(unsafe { r.param.arg32 }, [1, 2]);
    let b = {
        // SAFETY: plain data; reading its bytes stays within the value.
        unsafe { std::slice::from_raw_parts(&r as *const _ as *const u8, 336) }
    };
    assert_eq!(u32_at(b, 20), 1);
    assert_eq!(u32_at(b, 24), 2);
}

/// The event read clears only the response's tail that kernels without
/// ECE do not write (`reserved` and `ece`), and hands the kernel the
/// buffer's address: here the "device" is a socket, which takes the
/// command and writes nothing, so the bytes before the tail keep what the
/// test put there and the tail reads zero.
#[test]
fn event_read_clears_only_the_tail_the_kernel_may_leave() {
    let mut sv = [0; 2];
    // SAFETY: sv has room for the two descriptors.
    assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, sv.as_mut_ptr()) }, 0);
    let len = std::mem::size_of::<kabi::EventResp>();
    let tail = std::mem::offset_of!(kabi::EventResp, reserved);
    let mut resp = MaybeUninit::<kabi::EventResp>::uninit();
    // SAFETY: the whole buffer, as bytes.
    unsafe { resp.as_mut_ptr().cast::<u8>().write_bytes(0xa5, len) };
    let at = resp.as_ptr() as usize as u64;
    let r = Kernel::default().wait_event_into(sv[0], &mut resp).expect("the command is written whole");
    // SAFETY: EventResp is plain data; every byte was written above.
    let b = unsafe { std::slice::from_raw_parts(r as *const kabi::EventResp as *const u8, len) };
    assert!(b[..tail].iter().all(|&x| x == 0xa5), "what the kernel fills is left to it");
    assert!(b[tail..].iter().all(|&x| x == 0), "the tail an older kernel leaves is cleared");
    let mut cmd = [0u8; 64];
    // SAFETY: cmd is writable for its length.
    let n = unsafe { libc::read(sv[1], cmd.as_mut_ptr().cast(), cmd.len()) };
    assert_eq!(n, 16);
    assert_eq!((u32_at(&cmd, 0), u16_at(&cmd, 6), u64_at(&cmd, 8)), (cmd::GET_EVENT, len as u16, at));
    // SAFETY: the test's own descriptors.
    unsafe {
        libc::close(sv[0]);
        libc::close(sv[1]);
    }
}
