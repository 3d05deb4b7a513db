# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# slow_dns.py DELAY READYFILE - a DNS server on 127.0.0.1:53 (in the guest) that answers every
# query after DELAY seconds: A queries with 192.0.2.2, names whose first label starts with
# "nx-" with NXDOMAIN, anything else with an empty answer. Touches READYFILE once it listens.
# Used by vm/suite.d/bench.sh (rdma_resolve_addrinfo timing) and resolve_addrinfo.sh.
import socket, struct, sys, threading, time
delay = float(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[2], "w").close()
def answer(q, a):
    time.sleep(delay)
    i = 12
    while i < len(q) and q[i]:
        i += q[i] + 1
    qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
    nx = q[13:16] == b"nx-"
    ans = b""
    if qtype == 1 and not nx:
        ans = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("192.0.2.2")
    s.sendto(q[:2] + struct.pack(">HHHHH", 0x8183 if nx else 0x8180, 1, 1 if ans else 0, 0, 0) + q[12:i + 5] + ans, a)
while True:
    q, a = s.recvfrom(512)
    threading.Thread(target=answer, args=(q, a), daemon=True).start()
