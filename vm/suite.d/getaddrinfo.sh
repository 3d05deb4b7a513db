# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# getaddrinfo.sh - the rdma_getaddrinfo/rdma_freeaddrinfo differential corpus
# (ctest/vm/gai_corpus.c, built into /extra/bin/gai_corpus). Deterministic output: the host
# diffs upstream's and ours (--cmp).
#   gai_corpus_root    root netns (rxe0, siw0), no ibacm
#   gai_corpus_ns1     netns ns1 (rxe1), no ibacm
#   gai_corpus_ibacm   root netns with a fake ibacm daemon on /run/ibacm.sock (the python
#                      server below, started and stopped inside the test, so no other test
#                      sees it). Its answers encode the request (entry count, dest flags
#                      such as ACM_FLAGS_NODELAY, the path entry sent), so requests are
#                      compared too; some destinations get an error status or no path.
# The upstream output of the root-ns run is the recorded expectation in
# ctest/data/gai_corpus.expected (see ctest/data/README.gai_corpus).
cat > /tmp/fake_ibacm.py <<'PYEOF'
import os, socket, socketserver, struct, sys
PATH = sys.argv[1]
HDR, EP = 16, 72
def ep(flags, typ, info):
    return struct.pack('=IHH', flags, typ, 0) + info.ljust(64, b'\0')
def answer(req):
    ver, op, status = req[0], req[1], req[2]
    length = struct.unpack_from('=H', req, 6)[0]
    ents = [req[HDR + i * EP: HDR + (i + 1) * EP] for i in range((length - HDR) // EP)]
    dst = None; dflags = 0; pathreq = None
    for e in ents:
        flags, typ = struct.unpack_from('=IH', e, 0)
        if typ in (2, 3) and flags & 2:
            dst = (typ, e[8:8 + (4 if typ == 2 else 16)]); dflags = flags
        if typ == 0x10:
            pathreq = bytearray(e[8:72])
    out = []; st = 0
    if dst is None and pathreq is None:
        st = 2                                   # EINVAL: nothing to resolve
    elif dst and dst[0] == 2 and dst[1] == bytes([198, 51, 100, 1]):
        st = 3                                   # ENODATA
    elif dst and dst[0] == 2 and dst[1] == bytes([127, 0, 0, 1]):
        out.append(ep(1, 2, bytes([127, 0, 0, 1])))   # source only, no path
    else:
        if dst and dst[0] == 3:
            out.append(ep(1, 3, bytes.fromhex('20010db8000000000000000000000077')))
        else:
            out.append(ep(1, 2, bytes([192, 0, 2, 77])))
        p = pathreq if pathreq is not None else bytearray(64)
        struct.pack_into('=Q', p, 0, dflags | (len(ents) << 32))
        if pathreq is None:
            d = dst[1] if dst else b''
            p[8:24] = (bytes(10) + b'\xff\xff' + d) if len(d) == 4 else d.ljust(16, b'\0')
            p[24:40] = bytes.fromhex('fe800000000000000000000000000001')
            struct.pack_into('>IBB', p, 44, 0x12345 << 8 | 64, 3, 0x81)
            struct.pack_into('>H', p, 50, 0xffff)
        out.append(struct.pack('=IHH', 0, 0x10, 0) + bytes(p))
        q = bytearray(p); q[8:24], q[24:40] = p[24:40], p[8:24]
        out.append(struct.pack('=IHH', 0, 0x10, 0) + bytes(q))
    body = b''.join(out)
    return struct.pack('=BBB3sHQ', ver, op | 0x80, st, b'\0\0\0', HDR + len(body), 0) + body
class H(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            req = self.request.recv(592)
            if len(req) < HDR:
                return
            self.request.sendall(answer(req))
class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
if os.path.exists(PATH):
    os.unlink(PATH)
S(PATH, H).serve_forever()
PYEOF
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp gai_corpus_root 300 /extra/bin/gai_corpus
t --cmp gai_corpus_ns1 300 ip netns exec ns1 /extra/bin/gai_corpus
# The first rdma_getaddrinfo of a fresh process asks RDMA netlink for the rdma_cm device and
# reads the answer without waiting (the kernel queues it inside the sendto): ours must log the
# answer it got, not "no answer" (the sysfs fallback); upstream's run only makes the call
t gai_netlink_answer 60 bash -c 'o=$(RDMACM_RS_LOG=debug /extra/bin/bench_resolve first 2>&1); rc=$?; echo "$o" >&2
  [ $rc = 0 ] && echo "$o" | grep -q "^BENCH gai_first_call" || { echo "the call failed"; exit 1; }
  [ "$RDMACM_VARIANT" = upstream ] && { echo "upstream: called"; exit 0; }
  echo "$o" | grep "netlink: " | sed "s/^rdmacm-rs\[[0-9]*\] //"
  echo "$o" | grep -q "netlink: rdma_cm is /dev/infiniband/rdma_cm "'
# the one skip vm/tests.txt allows (skip-ok): a real ibacm in the guest would answer instead
if [ -e /run/ibacm.sock ] || [ -e /run/ibacm.port ]; then
  skip gai_corpus_ibacm "a real ibacm runs in the guest (/run/ibacm.*)"
else
  t --cmp gai_corpus_ibacm 300 bash -c 'python3 /tmp/fake_ibacm.py /run/ibacm.sock & p=$!
    for i in $(seq 50); do [ -S /run/ibacm.sock ] && break; sleep 0.1; done
    /extra/bin/gai_corpus; rc=$?; kill $p; wait $p 2>/dev/null; rm -f /run/ibacm.sock; exit $rc'
fi
