# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# preload.sh - unmodified TCP programs (iperf3, socat) under librspreload.so over rxe:
# *_up with upstream's librspreload (the guest's rdma-core package), *_rs with ours
# (/extra/bin/librspreload.so, from preload/). Each test runs in both variants, so each
# preload library runs over upstream's librdmacm (variant upstream) and over ours (variant
# ours: the preload library's librdmacm.so.1 then resolves to /extra/ours/lib).
# Every exchange must prove it went over RDMA: rxe0's sent-packet counter grew by at least
# the data's size in packets, and no TCP connection was opened in the root namespace or in
# ns1 (/proc/net/snmp ActiveOpens + PassiveOpens unchanged). A silent fallback to TCP fails.
# The *_unix and *_tcp_fallback tests check the other side: sockets librspreload must not
# take over (a UNIX socket) or cannot (a peer reachable only over plain IP) still work
# through libc's functions. No --cmp: iperf3 prints timings, the data is checked with cmp.
PL_UP=$(dpkg -L librdmacm1t64 2>/dev/null | grep '/rsocket/librspreload\.so$' | head -1)
PL_UP=${PL_UP:-/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so}
PL_RS=/extra/bin/librspreload.so
cat > /tmp/pl_lib.sh <<'EOF'
# helpers for suite.d/preload.sh, sourced by the test commands
# rxe0's sent packets
rxe_pkts(){ cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts; }
# TCP connections opened in this network namespace so far
tcp_opens(){ awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 }
                           else print $c["ActiveOpens"] + $c["PassiveOpens"] }' /proc/net/snmp; }
# pl_lib LIB: the librdmacm that preloading LIB brings in is the variant's
pl_lib(){ local got; got=$(LD_PRELOAD=$1 /extra/bin/whichlib | sed -n 's/^librdmacm //p')
  case $RDMACM_VARIANT in upstream) [[ $got == /usr/lib/*/librdmacm.so.1* ]];; *) [[ $got == /extra/ours/lib/librdmacm.so.1* ]];; esac ||
    { echo "FAIL: preloading $1 brought in librdmacm '$got' (variant $RDMACM_VARIANT)" >&2; return 1; }
  echo "preload library $1 over $got"; }
# over_rdma PKTS0 TCP0 MINPKTS: since the two snapshots, rxe0 sent at least MINPKTS packets
# and no TCP connection was opened here
over_rdma(){ local p=$(( $(rxe_pkts) - $1 )) t=$(( $(tcp_opens) - $2 ))
  echo "rxe0 sent $p packets, $t TCP connections opened"
  [ "$t" = 0 ] || { echo "FAIL: $t TCP connection(s) opened: not over RDMA" >&2; return 1; }
  [ "$p" -ge "$3" ] || { echo "FAIL: rxe0 sent only $p packets (expected >= $3): not over RDMA" >&2; return 1; }; }
# no_tcp TCP0: no TCP connection opened here since the snapshot (server side, ns1)
no_tcp(){ local t=$(( $(tcp_opens) - $1 )); echo "server: $t TCP connections opened"
  [ "$t" = 0 ] || { echo "FAIL: server opened $t TCP connection(s): not over RDMA" >&2; return 1; }; }
# hang_limit SECS LIB: a step's time limit under preload library LIB: SECS, but 12 in the
# upstream variant for the steps where upstream's pair hangs for good (vm/upstream-failures.txt
# lists each, with what its threads wait in): the known hang is shown after 12 s
hang_limit(){ if [ "$RDMACM_VARIANT" = upstream ] && [ -n "$2" ]; then echo 12; else echo $1; fi; }
# pl_watch SECS CMD...: runs CMD; if it is still running after SECS seconds, prints where each
# of its threads waits (wchan, system call, kernel stack) to stderr, kills it, returns 124
pl_watch(){ local n=$1 end=$((SECONDS + $1)) p t; shift; "$@" & p=$!
  while [ $SECONDS -lt $end ]; do kill -0 $p 2>/dev/null || { wait $p; return; }; sleep 0.2; done
  kill -0 $p 2>/dev/null || { wait $p; return; }
  echo "HANG: $* still running after $n s; its threads (and its children's):" >&2
  for t in /proc/$p/task/* $(for c in $(cat /proc/$p/task/*/children); do echo /proc/$c/task/*; done); do
    echo "-- $t $(cat $t/comm) $(cat $t/wchan) syscall: $(cut -d' ' -f1 $t/syscall)" >&2
    cat $t/stack >&2 2>/dev/null; done
  kill -9 $p $(cat /proc/$p/task/*/children); wait $p; return 124; }
# tcp_segs: TCP segments sent in this network namespace so far
tcp_segs(){ awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["OutSegs"] }' /proc/net/snmp; }
EOF
# An epoll echo server (Python's selectors: epoll_create1/epoll_ctl/epoll_wait, a non-blocking
# listener and connection) and a blocking client that sends 500 lines and reads them back.
cat > /tmp/pl_epoll_srv.py <<'EOF'
import selectors, socket, sys
sel = selectors.EpollSelector()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("192.0.2.2", 5305)); ls.listen(4); ls.setblocking(False)
sel.register(ls, selectors.EVENT_READ)
got = 0
while True:
    events = sel.select(timeout=30)
    if not events:
        sys.exit("server: no event for 30 s")
    for key, _ in events:
        if key.fileobj is ls:
            conn, _ = ls.accept(); conn.setblocking(False); sel.register(conn, selectors.EVENT_READ)
            continue
        data = key.fileobj.recv(65536)
        if not data:
            print(f"server: echoed {got} bytes, then EOF"); sys.exit(0)
        got += len(data); key.fileobj.sendall(data)
EOF
cat > /tmp/pl_epoll_cli.py <<'EOF'
import socket, sys
msg = b"".join(b"line %d\n" % i for i in range(500))
c = socket.create_connection(("192.0.2.2", 5305)); c.sendall(msg)
back = b""
while len(back) < len(msg):
    b = c.recv(65536)
    if not b: break
    back += b
c.close()
print("client: %d lines echoed" % back.count(b"\n")); sys.exit(0 if back == msg else 1)
EOF
# Fork mode (RDMAV_FORK_SAFE=1): the server accepts over TCP and hands the connection to a
# child made by fork(); the child's first recv and the client's first send switch the
# connection to an rsocket. 2 MB one way, its SHA-256 back.
cat > /tmp/pl_fork_srv.py <<'EOF'
import hashlib, os, socket, sys
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("192.0.2.2", int(sys.argv[1]) if sys.argv[1:] else 5306)); ls.listen(1)
c, _ = ls.accept()
pid = os.fork()
if pid == 0:
    ls.close(); h = hashlib.sha256(); n = 0
    while n < 2000000:
        b = c.recv(65536)
        if not b: break
        h.update(b); n += len(b)
    c.sendall(h.hexdigest().encode()); c.close()
    print("server child: received %d bytes" % n, flush=True); os._exit(0 if n == 2000000 else 1)
c.close()
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
EOF
# The client of both: sends SIZE random bytes to PORT and compares the SHA-256 the server
# sends back; with "go" it first waits for the server's 2-byte go-ahead; with "epoll" its
# socket is non-blocking and every wait is an epoll_wait on one set, the socket added to it
# before the first byte.
cat > /tmp/pl_sha_cli.py <<'EOF'
import hashlib, os, select, socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
data = os.urandom(size)
c = socket.create_connection(("192.0.2.2", port)); c.settimeout(20)
if sys.argv[3:] == ["go"]:
    print("client: server says", c.recv(2), flush=True)
if sys.argv[3:] == ["epoll"]:
    c.setblocking(False); ep = select.epoll(); ep.register(c, select.EPOLLOUT)
    def wait(ev):
        ep.modify(c, ev)
        if not ep.poll(20): sys.exit("client: no epoll event for 20 s")
    view = memoryview(data)
    while view:
        wait(select.EPOLLOUT)
        try: view = view[c.send(view[:65536]):]
        except BlockingIOError: pass
    def recv():
        while True:
            wait(select.EPOLLIN)
            try: return c.recv(64)
            except BlockingIOError: pass
else:
    c.sendall(data); recv = lambda: c.recv(64)
back = b""
while len(back) < 64:
    b = recv()
    if not b: break
    back += b
ok = back.decode() == hashlib.sha256(data).hexdigest()
print("client: digest", "matches" if ok else "differs"); sys.exit(0 if ok else 1)
EOF

# pl_tests SUFFIX LIB REF: the tests for one preload library (REF: the preload library of the
# upstream variant's time-mode iperf3)
pl_tests(){ local s=$1 L=$2 R=$3
  # iperf3, both sides preloaded, 8 MB (at rxe's 1024-byte MTU at least 8192 packets)
  pair --srv-wait 5 preload_iperf3_$s 90 \
    ". /tmp/pl_lib.sh; t0=\$(tcp_opens); pl_watch 70 env LD_PRELOAD=$L iperf3 -s -1 -B 192.0.2.2 -p 5201; r=\$?; no_tcp \$t0 && exit \$r" \
    ". /tmp/pl_lib.sh; pl_lib $L || exit 1; p0=\$(rxe_pkts); t0=\$(tcp_opens)
     pl_watch 60 env LD_PRELOAD=$L iperf3 -c 192.0.2.2 -p 5201 -n 8M -f m; r=\$?; over_rdma \$p0 \$t0 8192 && exit \$r"
  # iperf3 in time mode (-t 3): each test ends with pthread_cancel of the stream threads, which
  # are blocked in a receive on an rsocket (a library whose panic boundary catches that forced unwind aborts the process,
  # "FATAL: exception not rethrown"); both ends must exit 0, the data over RDMA (at least 1000
  # packets on rxe0, no TCP connection). The upstream variant runs upstream's librspreload (R)
  # in both tests: ours over upstream's librdmacm is no reference here (upstream's rrecv leaves
  # its lock taken when canceled: a hang, and a server SIGSEGV, in 2 of 8 runs). A server still
  # running when the harness stops it (TERM) takes iperf3 with it, so a retry finds the port free.
  pair --srv-wait 5 preload_iperf3_time_$s 90 \
    ". /tmp/pl_lib.sh; pl=$L; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$R; trap 'kill -9 \$(jobs -p) 2>/dev/null; exit 143' TERM
     t0=\$(tcp_opens); pl_watch 70 env LD_PRELOAD=\$pl iperf3 -s -1 -B 192.0.2.2 -p 5203; r=\$?; no_tcp \$t0 && exit \$r" \
    ". /tmp/pl_lib.sh; pl=$L; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$R; pl_lib \$pl || exit 1; p0=\$(rxe_pkts); t0=\$(tcp_opens)
     pl_watch 60 env LD_PRELOAD=\$pl iperf3 -c 192.0.2.2 -p 5203 -t 3 -f m; r=\$?; over_rdma \$p0 \$t0 1000 && exit \$r"
  # socat, a line protocol: 2000 lines sent by the client arrive intact at the server
  pair --srv-wait 5 preload_socat_$s 60 \
    ". /tmp/pl_lib.sh; seq 1 2000 > /tmp/pl_socat.exp; rm -f /tmp/pl_socat.out; t0=\$(tcp_opens)
     LD_PRELOAD=$L socat -u TCP-LISTEN:5301,bind=192.0.2.2,reuseaddr CREATE:/tmp/pl_socat.out; r=\$?
     no_tcp \$t0 && cmp /tmp/pl_socat.exp /tmp/pl_socat.out && echo 'server: 2000 lines received' && exit \$r" \
    ". /tmp/pl_lib.sh; pl_lib $L || exit 1; seq 1 2000 > /tmp/pl_socat.in; p0=\$(rxe_pkts); t0=\$(tcp_opens)
     LD_PRELOAD=$L socat -u OPEN:/tmp/pl_socat.in TCP:192.0.2.2:5301; r=\$?; over_rdma \$p0 \$t0 5 && exit \$r"
  # a UNIX socket under the preload library: libc's functions do the work
  t preload_unix_$s 60 bash -c ". /tmp/pl_lib.sh; rm -f /tmp/pl.sock /tmp/pl_unix.out; seq 1 300 > /tmp/pl_unix.in
     LD_PRELOAD=$L socat -u UNIX-LISTEN:/tmp/pl.sock CREATE:/tmp/pl_unix.out & p=\$!
     for i in \$(seq 50); do [ -S /tmp/pl.sock ] && break; sleep 0.1; done
     LD_PRELOAD=$L socat -u OPEN:/tmp/pl_unix.in UNIX-CONNECT:/tmp/pl.sock; r=\$?
     [ \$r = 0 ] || kill \$p 2>/dev/null; wait \$p; sr=\$?
     echo \"client \$r server \$sr\"; [ \$r = 0 ] && [ \$sr = 0 ] && cmp /tmp/pl_unix.in /tmp/pl_unix.out"
  # a peer reachable over IP but not over RDMA (a veth pair without an RDMA device,
  # 203.0.113.0/24): rconnect fails, the preloaded client continues over TCP
  t preload_tcp_fallback_$s 60 bash -c ". /tmp/pl_lib.sh
     ip link show pl0 >/dev/null 2>&1 || { ip link add pl0 type veth peer name pl1 && ip link set pl1 netns ns1 &&
       ip addr add 203.0.113.1/24 dev pl0 && ip link set pl0 up && $N1 ip addr add 203.0.113.2/24 dev pl1 &&
       $N1 ip link set pl1 up && sleep 1; } || exit 1
     rm -f /tmp/pl_fb.out; seq 1 300 > /tmp/pl_fb.in
     $N1 socat -u TCP-LISTEN:5302,bind=203.0.113.2,reuseaddr CREATE:/tmp/pl_fb.out & p=\$!
     sleep 0.5; t0=\$(tcp_opens)
     LD_PRELOAD=$L socat -u OPEN:/tmp/pl_fb.in TCP:203.0.113.2:5302; r=\$?
     [ \$r = 0 ] || kill \$p 2>/dev/null; wait \$p; sr=\$?
     t=\$(( \$(tcp_opens) - t0 )); echo \"client \$r server \$sr, \$t TCP connection(s) opened\"
     [ \$r = 0 ] && [ \$sr = 0 ] && [ \$t = 1 ] && cmp /tmp/pl_fb.in /tmp/pl_fb.out"
  # epoll (repoll sets under the preload library) in a non-blocking echo server
  pair --srv-wait 5 preload_epoll_$s 60 \
    ". /tmp/pl_lib.sh; t0=\$(tcp_opens); LD_PRELOAD=$L python3 /tmp/pl_epoll_srv.py; r=\$?; no_tcp \$t0 && exit \$r" \
    ". /tmp/pl_lib.sh; pl_lib $L || exit 1; p0=\$(rxe_pkts); t0=\$(tcp_opens)
     LD_PRELOAD=$L python3 /tmp/pl_epoll_cli.py; r=\$?; over_rdma \$p0 \$t0 5 && exit \$r"
}
pl_tests up "$PL_UP" "$PL_UP"
pl_tests rs "$PL_RS" "$PL_UP"
# Fork mode with ours only: upstream's librspreload takes only sockets of type exactly
# SOCK_STREAM into fork mode, and Python makes its sockets with SOCK_CLOEXEC; and its accepting
# side listens at the wildcard address, which fails here with EADDRINUSE (see rspreload(7)).
# The named semaphore of fork mode is removed first: a run killed between its sem_wait and
# sem_post would leave it taken, and every later accepting side would wait on it for ever.
# One TCP connection is opened on each side; the 2 MB must go over rxe (>= 1953 packets of
# 1024 bytes) while TCP carries only the handshake (< 40 segments sent by the client). The
# client looks for the TCP listener itself (the harness's wait looks for an rdma_cm one).
pair --srv-wait 1 preload_fork_rs 150 \
  ". /tmp/pl_lib.sh; rm -f /dev/shm/sem.rsocket_fork; pl_watch 130 env LD_PRELOAD=$PL_RS RDMAV_FORK_SAFE=1 python3 /tmp/pl_fork_srv.py" \
  ". /tmp/pl_lib.sh; pl_lib $PL_RS || exit 1
   for i in \$(seq 300); do [ -n \"\$($N1 ss -Hltn 'sport = :5306')\" ] && break; sleep 0.1; done
   p0=\$(rxe_pkts); s0=\$(tcp_segs)
   pl_watch 120 env LD_PRELOAD=$PL_RS RDMAV_FORK_SAFE=1 python3 /tmp/pl_sha_cli.py 5306 2000000; r=\$?
   p=\$(( \$(rxe_pkts) - p0 )); s=\$(( \$(tcp_segs) - s0 )); echo \"rxe0 sent \$p packets, TCP \$s segments\"
   [ \$r = 0 ] && [ \$p -ge 1953 ] && [ \$s -lt 40 ]"
# The same in fork mode with a client that adds its socket to an epoll set before its first byte
# and waits for every send and receive in epoll_wait: its connection becomes an rsocket when it
# is added (the set then watches the rsocket), as an accepting side's does.
pair --srv-wait 1 preload_fork_epoll_rs 150 \
  ". /tmp/pl_lib.sh; rm -f /dev/shm/sem.rsocket_fork; pl_watch 130 env LD_PRELOAD=$PL_RS RDMAV_FORK_SAFE=1 python3 /tmp/pl_fork_srv.py 5309" \
  ". /tmp/pl_lib.sh; pl_lib $PL_RS || exit 1
   for i in \$(seq 300); do [ -n \"\$($N1 ss -Hltn 'sport = :5309')\" ] && break; sleep 0.1; done
   p0=\$(rxe_pkts); s0=\$(tcp_segs)
   pl_watch 120 env LD_PRELOAD=$PL_RS RDMAV_FORK_SAFE=1 python3 /tmp/pl_sha_cli.py 5309 2000000 epoll; r=\$?
   p=\$(( \$(rxe_pkts) - p0 )); s=\$(( \$(tcp_segs) - s0 )); echo \"rxe0 sent \$p packets, TCP \$s segments\"
   [ \$r = 0 ] && [ \$p -ge 1953 ] && [ \$s -lt 40 ]"
# A connection inherited across fork WITHOUT fork mode: the server accepts an rsocket, makes an
# epoll set and calls fork(); in the child poll must report the socket ready at once, its recv,
# send and getpeername must fail at once with ENOTCONN (the rsocket lives in the parent; a
# child that got no data and no error would wait for ever, 5 s alarm here), a new epoll set must
# refuse it (EPERM), the parent's set must fail (EINVAL), its close must leave the parent's
# connection open, and the parent then receives
# 1 MB over it and answers with its SHA-256. Ours runs the server with RDMACM_RS_LOG: its log
# must name the inherited descriptor. The upstream variant runs upstream's pair (its outcome
# recorded: vm/upstream-failures.txt). Each variant has its own port (a server of the other
# variant stopped by the harness may still hold its listening id for a moment).
cat > /tmp/pl_inherit_srv.py <<'EOF2'
import errno, hashlib, os, select, signal, socket, sys
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("192.0.2.2", int(sys.argv[1]))); ls.listen(1)
c, _ = ls.accept(); pe = select.epoll()
pid = os.fork()
if pid == 0:
    def late(*_): raise TimeoutError("no answer within 5 s")
    signal.signal(signal.SIGALRM, late); signal.alarm(5); bad = 0
    p = select.poll(); p.register(c, select.POLLIN); r = p.poll(2000)
    print(f"child: poll says {'ready' if r else 'not ready'}", flush=True); bad += not r
    want = [("recv", lambda: c.recv(100), errno.ENOTCONN), ("send", lambda: c.send(b"x"), errno.ENOTCONN),
            ("getpeername", c.getpeername, errno.ENOTCONN), ("epoll_ctl ADD", lambda: select.epoll().register(c, select.EPOLLIN), errno.EPERM),
            ("epoll_wait on the parent's set", lambda: pe.poll(0), errno.EINVAL)]
    for name, call, err in want:
        try:
            r = call(); print(f"child: {name} returned {r!r}", flush=True); bad += 1
        except TimeoutError as e:
            print(f"child: {name}: {e}", flush=True); bad += 1
        except OSError as e:
            print(f"child: {name} failed: {errno.errorcode.get(e.errno, e.errno)}", flush=True)
            bad += e.errno != err
    signal.alarm(0); c.close(); ls.close(); os._exit(1 if bad else 0)
st = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]); print(f"child exit {st}", flush=True)
c.sendall(b"go"); h = hashlib.sha256(); n = 0
while n < 1000000:
    b = c.recv(65536)
    if not b: break
    h.update(b); n += len(b)
c.sendall(h.hexdigest().encode()); c.close()
print(f"parent: received {n} bytes", flush=True); sys.exit(0 if st == 0 and n == 1000000 else 1)
EOF2
pair --srv-wait 10 preload_fork_inherit 60 \
  ". /tmp/pl_lib.sh; pl=$PL_RS port=5307; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP port=5308; t0=\$(tcp_opens)
   pl_watch 40 env LD_PRELOAD=\$pl RDMACM_RS_LOG=1 python3 /tmp/pl_inherit_srv.py \$port 2> /tmp/pl_inh.log; r=\$?
   grep -v '^librspreload' /tmp/pl_inh.log >&2; grep 'inherited' /tmp/pl_inh.log | head -5
   lg=0; [ \$pl = $PL_UP ] || grep -q 'recv: .*inherited across fork' /tmp/pl_inh.log || grep -q 'socket call: .*inherited across fork' /tmp/pl_inh.log || { echo 'FAIL: no log line for the inherited descriptor'; lg=1; }
   no_tcp \$t0 && [ \$r = 0 ] && [ \$lg = 0 ]" \
  ". /tmp/pl_lib.sh; pl=$PL_RS port=5307; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP port=5308; pl_lib \$pl || exit 1
   for i in \$(seq 100); do [ -n \"\$(rdma res show cm_id 2>/dev/null | grep LISTEN | grep \$port)\" ] && break; sleep 0.1; done
   p0=\$(rxe_pkts); t0=\$(tcp_opens)
   pl_watch 40 env LD_PRELOAD=\$pl python3 /tmp/pl_sha_cli.py \$port 1000000 go; r=\$?; over_rdma \$p0 \$t0 900 && exit \$r"
# nginx, unmodified (Debian's package; epoll, accept4, sendfile), serving files over RDMA: in ns1
# two instances, each one process (master_process off: nginx's master makes the listening
# sockets and forks its workers, and an rsocket does not cross a fork), one with sendfile on
# (port 8080), one with sendfile off (8081); the client side fetches from each one large file
# (1 MB) and 20 small ones over one keep-alive connection, then from the first with 3 clients
# at once each the large file and 5 small ones, and compares every file with the original. Both ends' traffic
# must be RDMA's (no TCP connection opened in either namespace, rxe0 received at least the
# data's size in 1024-byte packets); nginx's error logs must hold no [error]/[crit]/[alert]/[emerg].
# The upstream variant runs upstream's pair (upstream's librspreload over upstream's librdmacm):
# its outcome is recorded, not judged (vm/upstream-failures.txt); each curl gives up after 20 s
# (7 s under upstream's pair, which hangs there: hang_limit).
# Timing, for scale (TCG guest): one client's 21 files take about as long over plain TCP
# without the preload library as here (8-9 s, mostly curl's start), 3 clients about twice.
cat > /tmp/pl_nginx_srv.sh <<'EOF'
# pl_nginx_srv.sh LIB [fork]: the nginx side (run in ns1); stops when the client creates
# /tmp/ngx/stop. fork: master_process on, 2 workers, fork mode (ports 8082, 8083)
. /tmp/pl_lib.sh; L=$1; M=${2:-one}; D=/tmp/ngx; rm -rf $D; mkdir -p $D/www $D/tmp
P=8080 MP="master_process off; worker_processes 1;" FE=
[ $M = fork ] && { P=8082; MP="master_process on; worker_processes 2;"; FE=RDMAV_FORK_SAFE=1; rm -f /dev/shm/sem.rsocket_fork; }
head -c 1000000 /dev/urandom > $D/www/big
for i in $(seq 20); do head -c $((i * 197 + 1)) /dev/urandom > $D/www/s$i; done
for sf in on off; do port=$P; [ $sf = off ] && port=$((P + 1))
  cat > $D/$sf.conf <<EOC
daemon off; $MP pid $D/$sf.pid; error_log $D/$sf.err info;
events { use epoll; worker_connections 64; }
http { access_log off; sendfile $sf; keepalive_timeout 10; default_type application/octet-stream;
  client_body_temp_path $D/tmp/b; proxy_temp_path $D/tmp/p; fastcgi_temp_path $D/tmp/f;
  uwsgi_temp_path $D/tmp/u; scgi_temp_path $D/tmp/s;
  server { listen 192.0.2.2:$port; root $D/www; } }
EOC
done
t0=$(tcp_opens); g0=$(tcp_segs)
env LD_PRELOAD=$L $FE ${RS_LOG:+RDMACM_RS_LOG=1} nginx -e $D/on.err -p $D -c $D/on.conf 2> $D/on.log & p1=$!
env LD_PRELOAD=$L $FE ${RS_LOG:+RDMACM_RS_LOG=1} nginx -e $D/off.err -p $D -c $D/off.conf 2> $D/off.log & p2=$!
w0=$SECONDS; end=$((SECONDS + 170)); while [ $SECONDS -lt $end ]; do [ -e $D/stop ] && break; kill -0 $p1 2>/dev/null || break; kill -0 $p2 2>/dev/null || break; sleep 0.1; done
kill -0 $p1 2>/dev/null && kill -0 $p2 2>/dev/null; alive=$? w1=$((SECONDS - w0))
kill -QUIT $p1 $p2 2>/dev/null; for i in $(seq 50); do kill -0 $p1 2>/dev/null || kill -0 $p2 2>/dev/null || break; sleep 0.1; done
kill -9 $p1 $p2 2>/dev/null; wait $p1 $p2 2>/dev/null
echo "server: nginx ran $((SECONDS - w0)) s; the client's end seen $w1 s after its start" >&2
for sf in on off; do grep -E '\[(error|crit|alert|emerg)\]' $D/$sf.err | sed "s/^/nginx sendfile $sf: /" >&2; done
bad=$(cat $D/on.err $D/off.err | grep -cE '\[(error|crit|alert|emerg)\]')
echo "server: nginx ran to the client's end: $([ $alive = 0 ] && echo yes || echo no), $bad error lines"
if [ $M = fork ]; then
  # fork mode: each connection is made over TCP and switched (5 connections: a handshake of a
  # few segments each); the files must not go over TCP (more than 4 MB: thousands of segments)
  t=$(( $(tcp_opens) - t0 )) g=$(( $(tcp_segs) - g0 )); echo "server: $t TCP connections opened, $g TCP segments sent"
  # (nginx points its standard error at its error log: the library's lines land there)
  n=$(cat $D/on.log $D/off.log $D/on.err $D/off.err | grep -c 'accepting side: raccept [0-9]'); echo "server: $n connections switched to rsockets"
  grep -h 'librspreload' $D/on.log $D/off.log $D/on.err $D/off.err | grep -v 'socket: descriptor' | head -30 >&2
  [ $alive = 0 ] && [ $bad = 0 ] && [ $n = 5 ] && [ $g -lt 100 ]
else
no_tcp $t0 && [ $alive = 0 ] && [ $bad = 0 ]
fi
EOF
cat > /tmp/pl_nginx_cli.sh <<'EOF'
# pl_nginx_cli.sh LIB [PORTS [fork]]: the curl side (root ns); creates /tmp/ngx/stop at its end, or at
# the first failure (upstream's pair: its outcome without waiting out every step). fork: fork
# mode (RDMAV_FORK_SAFE=1 for curl too; the server listens on TCP)
. /tmp/pl_lib.sh; L=$1; PORTS=${2:-8080 8081}; M=${3:-one}; D=/tmp/ngx; C=/tmp/ngx_c; rm -rf $C; mkdir -p $C
[ -z "$L" ] || pl_lib $L || { touch $D/stop; exit 1; }
FE=; [ $M = fork ] && FE=RDMAV_FORK_SAFE=1
# both instances listen: two listening rdma_cm ids on 192.0.2.2:808x (fork mode: TCP listeners)
w0=$SECONDS; [ -z "$L" ] || for i in $(seq 150); do
  if [ $M = fork ]; then [ "$(ip netns exec ns1 ss -Hltn | grep -c '192.0.2.2:808[23]')" -ge 2 ] && break
  else [ "$(rdma res show cm_id 2>/dev/null | grep LISTEN | grep -c '192.0.2.2:808[01]')" -ge 2 ] && break; fi; sleep 0.1; done
echo "client: waited $((SECONDS - w0)) s for both listeners" >&2
rxe_rcvd(){ cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts; }
W=$(hang_limit 25 "$L"); get(){ pl_watch $W env ${L:+LD_PRELOAD=$L} $FE curl -sS --max-time $((W - 5)) "$@"; }
ms(){ local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
fail(){ echo "FAIL: $* (at $(( $(ms) - s0 )) ms)" >&2; touch $D/stop; exit 1; }
p0=$(rxe_pkts); r0=$(rxe_rcvd); t0=$(tcp_opens); g0=$(tcp_segs); s0=$(ms)
for port in $PORTS; do sf=on; [ $((port % 2)) = 1 ] && sf=off; s1=$(ms)
  # one client: the large file, then 20 small ones, on one keep-alive connection
  args=(-o $C/big.$port http://192.0.2.2:$port/big); for i in $(seq 20); do args+=(-o $C/s$i.$port http://192.0.2.2:$port/s$i); done
  get "${args[@]}"; n=0; for i in $(seq 20); do cmp -s $D/www/s$i $C/s$i.$port && n=$((n + 1)); done
  cmp -s $D/www/big $C/big.$port || fail "sendfile $sf: the large file"
  [ $n = 20 ] || fail "sendfile $sf: $n of 20 small files intact (one connection)"
  # 3 clients at once (sendfile on): each the large file and 5 small ones
  s2=$(ms); [ $sf = on ] && for k in 1 2 3; do
    ( args=(-o $C/big.$port.$k http://192.0.2.2:$port/big)
      for i in $(seq $k 4 20); do args+=(-o $C/s$i.$port.$k http://192.0.2.2:$port/s$i); done
      get "${args[@]}" ) & done; wait
  n=0; [ $sf = on ] && for k in 1 2 3; do cmp -s $D/www/big $C/big.$port.$k && n=$((n + 1))
    for i in $(seq $k 4 20); do cmp -s $D/www/s$i $C/s$i.$port.$k || n=$((n - 100)); done; done
  [ $sf = off ] || [ $n = 3 ] || fail "sendfile $sf: 3 clients at once: files differ or missing"
  echo "sendfile $sf: all files intact"
  echo "sendfile $sf: one client $((s2 - s1)) ms$([ $sf = on ] && echo ", 3 clients at once $(( $(ms) - s2 )) ms")" >&2
done
touch $D/stop
[ -z "$L" ] && exit 0
size=$(cat $C/* | wc -c); r=$(( $(rxe_rcvd) - r0 )); echo "client: $size bytes fetched in all"
echo "rxe0 received $r packets" >&2
if [ $M = fork ]; then
  # fork mode: 5 TCP connections for the handshakes, a few segments each
  t=$(( $(tcp_opens) - t0 )) g=$(( $(tcp_segs) - g0 )); echo "client: $t TCP connections opened, $g TCP segments sent"
  [ $g -lt 100 ] && [ $r -ge $((size / 1024)) ] || { echo "FAIL: rxe0 received $r packets for $size bytes, TCP $g segments" >&2; exit 1; }
else
over_rdma $p0 $t0 1 && [ $r -ge $((size / 1024)) ] || { echo "FAIL: rxe0 received only $r packets for $size bytes" >&2; exit 1; }
fi
EOF
pair --srv-wait 10 preload_nginx 180 \
  "pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; bash /tmp/pl_nginx_srv.sh \$pl" \
  "pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; bash /tmp/pl_nginx_cli.sh \$pl"
# nginx with its master process (master_process on, 2 workers: the master makes the listening
# sockets, the workers made by fork() accept on them) in fork mode (RDMAV_FORK_SAFE=1 on both
# sides): the same fetches as preload_nginx on ports 8082 (sendfile on) and 8083 (off). Each
# connection is made over TCP and switched to an rsocket when the worker adds it to its epoll
# set (5 connections: 5 switches in nginx's log under RDMACM_RS_LOG); TCP carries only those
# handshakes (fewer than 100 segments sent by either side for more than 4 MB of files), rxe0
# the files. The upstream variant runs upstream's pair. The client looks for the TCP listeners
# itself.
pair --srv-wait 1 preload_nginx_fork 180 \
  "pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; RS_LOG=1 bash /tmp/pl_nginx_srv.sh \$pl fork" \
  "pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; bash /tmp/pl_nginx_cli.sh \$pl '8082 8083' fork"
# The kernel's epoll rules as a server sees them (ctest/vm/epoll_rules.c: epoll_ctl's error
# numbers, level-triggered after a partial read, EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE, a closed
# socket leaving its sets and its number added afresh, two sets on one socket): the transcript on
# kernel sockets and kernel epoll, then under the preload library (rsockets in repoll sets, no
# TCP connection opened) must be the same. The upstream variant runs upstream's pair.
t preload_epoll_rules 60 bash -c ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP
   /extra/bin/epoll_rules 5310 > /tmp/pl_er.kernel || { cat /tmp/pl_er.kernel; exit 1; }
   pl_lib \$pl || exit 1; t0=\$(tcp_opens)
   pl_watch 40 env LD_PRELOAD=\$pl /extra/bin/epoll_rules 5311 > /tmp/pl_er.preload; r=\$?
   t=\$(( \$(tcp_opens) - t0 )); echo \"exit \$r, \$t TCP connection(s) opened; the transcripts:\"
   diff /tmp/pl_er.kernel /tmp/pl_er.preload && echo same; d=\$?; [ \$r = 0 ] && [ \$t = 0 ] && [ \$d = 0 ]"
# What a server does between accept and its first byte (ctest/vm/accept_calls.c: accept4's
# SOCK_NONBLOCK and SOCK_CLOEXEC, fcntl, ioctl(FIONBIO), the socket options a server queries,
# getsockname/getpeername, sendfile from a file, shutdown), on an accepted and a connected
# socket: the transcript on kernel sockets and under the preload library must be the same, no
# TCP connection opened. Ours runs with RDMACM_RS_LOG: its log must say that both sockets
# became rsockets. The upstream variant runs upstream's pair (its outcome recorded:
# vm/upstream-failures.txt).
t preload_accept_calls 60 bash -c ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP
   /extra/bin/accept_calls 5320 > /tmp/pl_ac.kernel || { cat /tmp/pl_ac.kernel; exit 1; }
   pl_lib \$pl || exit 1; t0=\$(tcp_opens)
   pl_watch 40 env LD_PRELOAD=\$pl RDMACM_RS_LOG=1 /extra/bin/accept_calls 5321 > /tmp/pl_ac.preload 2> /tmp/pl_ac.log; r=\$?
   grep librspreload /tmp/pl_ac.log | head -20; t=\$(( \$(tcp_opens) - t0 )); echo \"exit \$r, \$t TCP connection(s) opened; the transcripts:\"
   diff /tmp/pl_ac.kernel /tmp/pl_ac.preload && echo same; d=\$?
   lg=0; [ \$pl = $PL_UP ] || grep -q 'accept: descriptor .* is rsocket' /tmp/pl_ac.log || { echo 'FAIL: no log line for the accepted rsocket'; lg=1; }
   [ \$r = 0 ] && [ \$t = 0 ] && [ \$d = 0 ] && [ \$lg = 0 ]"
# netperf, unmodified (Debian's package): netserver in ns1 (-D: in the foreground; -f: each
# test in the netserver process itself, no child per test), netperf in the root ns, a
# TCP_STREAM and a TCP_RR test of 3 s each. Both ends under the preload library; the control
# connection and the data connection must both be RDMA's (no TCP connection opened in either
# namespace; rxe0 sent at least 1000 packets; each test's result, 10^6 bits/s or transactions/s,
# above 0). The upstream variant runs upstream's pair. netserver logs what it makes of each socket.
pair --srv-wait 10 preload_netperf 120 \
  ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; t0=\$(tcp_opens)
   pl_watch 100 env LD_PRELOAD=\$pl RDMACM_RS_LOG=1 netserver -D -f -4 -L 192.0.2.2 -p 12865; r=\$?
   echo \"netserver exit \$r\"; no_tcp \$t0" \
  ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; pl_lib \$pl || exit 1
   for i in \$(seq 100); do [ -n \"\$($N1 ss -Hltn 'sport = :12865')\$(rdma res show cm_id 2>/dev/null | grep LISTEN | grep 12865)\" ] && break; sleep 0.1; done
   p0=\$(rxe_pkts); t0=\$(tcp_opens); r=0
   for test in TCP_STREAM TCP_RR; do
     pl_watch 40 env LD_PRELOAD=\$pl netperf -4 -H 192.0.2.2 -p 12865 -L 192.0.2.1 -t \$test -l 3 > /tmp/pl_np.out; x=\$?
     cat /tmp/pl_np.out; rate=\$(awk '\$1 ~ /^[0-9]+\$/ && NF >= 5 { v = \$NF } END { print v + 0 }' /tmp/pl_np.out)
     echo \"netperf -t \$test: exit \$x, result \$rate\"; [ \$x = 0 ] && awk -v v=\$rate 'BEGIN { exit !(v > 0) }' || r=1; done
   $N1 pkill -TERM -x netserver; over_rdma \$p0 \$t0 1000 && exit \$r"
# netserver in its default mode (a child made by fork() for each control connection, the
# accepted control socket inherited) in fork mode (RDMAV_FORK_SAFE=1 on both sides): netperf -t
# TCP_STREAM and TCP_RR (3 s each) from the root ns. Each connection (the control connection,
# then each test's data connection) is made over TCP and switched to an rsocket at its first
# use in the process that uses it; TCP carries only those handshakes (fewer than 100 segments
# sent by the client), rxe0 the tests (at least 1000 packets). The upstream variant runs
# upstream's pair. The client looks for the TCP listener itself.
pair --srv-wait 1 preload_netperf_fork 120 \
  ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; rm -f /dev/shm/sem.rsocket_fork
   pl_watch 100 env LD_PRELOAD=\$pl RDMAV_FORK_SAFE=1 netserver -D -4 -L 192.0.2.2 -p 12866; echo \"netserver exit \$?\"" \
  ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; pl_lib \$pl || exit 1
   for i in \$(seq 100); do [ -n \"\$($N1 ss -Hltn 'sport = :12866')\" ] && break; sleep 0.1; done
   p0=\$(rxe_pkts); g0=\$(tcp_segs); r=0; w=\$(hang_limit 40 \$pl)
   for test in TCP_STREAM TCP_RR; do
     pl_watch \$w env LD_PRELOAD=\$pl RDMAV_FORK_SAFE=1 netperf -4 -H 192.0.2.2 -p 12866 -L 192.0.2.1 -t \$test -l 3 > /tmp/pl_npf.out; x=\$?
     cat /tmp/pl_npf.out; rate=\$(awk '\$1 ~ /^[0-9]+\$/ && NF >= 5 { v = \$NF } END { print v + 0 }' /tmp/pl_npf.out)
     echo \"netperf -t \$test: exit \$x, result \$rate\"; [ \$x = 0 ] && awk -v v=\$rate 'BEGIN { exit !(v > 0) }' || r=1; done
   $N1 pkill -TERM -x netserver; p=\$(( \$(rxe_pkts) - p0 )) g=\$(( \$(tcp_segs) - g0 ))
   echo \"rxe0 sent \$p packets, TCP \$g segments sent\"; [ \$r = 0 ] && [ \$p -ge 1000 ] && [ \$g -lt 100 ]"
# An rsync daemon (Debian's rsync: `rsync --daemon`, a process forked per connection) serving a
# module in fork mode (RDMAV_FORK_SAFE=1 on both sides), in ns1; from the root ns a pull of the
# module (a 2 MB file and 10 small ones) and a push of the same files into it, each compared
# with the original. rsync's receiving side (the client of the pull, the daemon's child of the
# push) forks after the connection has carried data: the child reads the socket, the parent
# writes it, and the connection, an rsocket of the parent, is relayed to the child through a
# socket pair (both logs must say so). The daemon runs as user nobody: a daemon started as root
# changes its credentials (setgid, setuid) after the connection has become an rsocket, and the
# kernel then refuses the verbs commands rxe's provider writes to the device file opened
# before (EACCES from write(2): its send doorbell). TCP carries only the two connections'
# handshakes (fewer than 60 segments sent by either side), rxe0 the files (at least their
# size in 1024-byte packets, both ways). The upstream variant runs upstream's pair. The harness
# waits 1 s only (its wait looks for a listening rdma_cm id, and fork mode listens on TCP); the
# client looks for the daemon's TCP listener itself.
cat > /tmp/pl_rsync_srv.sh <<'EOF'
# pl_rsync_srv.sh LIB: the daemon side (ns1); stops when the client creates /tmp/rsd/stop
. /tmp/pl_lib.sh; L=$1; D=/tmp/rsd; rm -rf $D; mkdir -p $D/mod; rm -f /dev/shm/sem.rsocket_fork
head -c 2000000 /dev/urandom > $D/mod/big; for i in $(seq 10); do head -c $((i * 331 + 7)) /dev/urandom > $D/mod/s$i; done
printf 'pid file = %s\nlog file = %s\nuse chroot = no\n[mod]\n  path = %s\n  read only = no\n' \
  $D/rsyncd.pid $D/rsyncd.log $D/mod > $D/rsyncd.conf
chown -R nobody:nogroup $D; g0=$(tcp_segs)
setpriv --reuid=nobody --regid=nogroup --clear-groups env LD_PRELOAD=$L RDMAV_FORK_SAFE=1 RDMACM_RS_LOG=1 \
  rsync --daemon --no-detach --config=$D/rsyncd.conf --address=192.0.2.2 --port=8730 2> $D/daemon.err & p=$!
end=$((SECONDS + 130)); while [ $SECONDS -lt $end ]; do [ -e $D/stop ] && break; kill -0 $p 2>/dev/null || break; sleep 0.1; done
kill -0 $p 2>/dev/null; alive=$?; touch $D/ended; kill $p 2>/dev/null; sleep 0.3; kill -9 $p 2>/dev/null; wait $p
g=$(( $(tcp_segs) - g0 )); echo "server: daemon ran to the client's end: $([ $alive = 0 ] && echo yes || echo no), TCP $g segments sent"
grep -v 'name lookup failed\|rsyncd version\|allowed access\|sent .* bytes\|total size' $D/rsyncd.log >&2
grep 'librspreload' $D/daemon.err | grep -v 'socket: descriptor' | head -30 >&2
n=$(grep -c 'accepting side: raccept [0-9]' $D/daemon.err); r=$(grep -c 'used by a child process: relayed' $D/daemon.err)
echo "server: $n connections switched to rsockets, $r relayed to a child"
! grep -q 'rsync error\|rsync: \[' $D/rsyncd.log && [ $alive = 0 ] && [ $n = 2 ] && [ $r -ge 1 ] && [ $g -lt 60 ]
EOF
pair --srv-wait 1 preload_rsync_fork 150 \
  "pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; bash /tmp/pl_rsync_srv.sh \$pl" \
  ". /tmp/pl_lib.sh; pl=$PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP; pl_lib \$pl || { touch /tmp/rsd/stop; exit 1; }
   for i in \$(seq 100); do [ -n \"\$($N1 ss -Hltn 'sport = :8730')\" ] || [ -e /tmp/rsd/ended ] && break; sleep 0.1; done; echo \"client: \$i looks for the daemon's listener\" >&2
   C=/tmp/rsc; rm -rf \$C; mkdir -p \$C; g0=\$(tcp_segs); p0=\$(rxe_pkts); q0=\$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts)
   rs(){ local t=\${EPOCHREALTIME/./}; pl_watch 50 env LD_PRELOAD=\$pl RDMAV_FORK_SAFE=1 RDMACM_RS_LOG=1 rsync \"\$@\" 2>> \$C/log; local r=\$?
     t=\$(( (\${EPOCHREALTIME/./} - t) / 1000 )); echo \"rsync \$*: exit \$r after \$t ms\" >&2; return \$r; }
   rs -a rsync://192.0.2.2:8730/mod/ \$C/pull/; a=\$?; diff -r /tmp/rsd/mod \$C/pull && echo 'pull: the module arrived intact'; da=\$?
   mkdir \$C/src; cp -a /tmp/rsd/mod/big /tmp/rsd/mod/s* \$C/src/
   rs -a \$C/src/ rsync://192.0.2.2:8730/mod/up/; b=\$?; diff -r \$C/src /tmp/rsd/mod/up && echo 'push: the files arrived intact'; db=\$?
   touch /tmp/rsd/stop; g=\$(( \$(tcp_segs) - g0 )) p=\$(( \$(rxe_pkts) - p0 )) q=\$(( \$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts) - q0 ))
   grep -v '^librspreload\|^rdmacm-rs' \$C/log >&2; grep 'relay' \$C/log >&2
   echo \"client: pull exit \$a, push exit \$b; TCP \$g segments sent; rxe0 sent \$p packets, received \$q\"
   r=\$(grep -c 'used by a child process: relayed' \$C/log); echo \"client: \$r connection relayed to a child\"
   [ \$a = 0 ] && [ \$b = 0 ] && [ \$da = 0 ] && [ \$db = 0 ] && [ \$g -lt 60 ] && [ \$p -ge 1953 ] && [ \$q -ge 1953 ] && [ \$r = 1 ]"
# Why the daemon above runs as nobody: a server started as root that changes its credentials
# (setgid, setuid) after its connection has become an rsocket can no longer send on it. The
# kernel refuses write(2) on a verbs device file opened under other credentials (EACCES), and
# rxe's provider posts its sends with such a write. The server (root, ns1) sends once, calls
# setgid and setuid (nobody), sends again: that send must fail with EACCES. Both variants run
# their own pair (the kernel's rule, not the library's).
cat > /tmp/pl_setuid_srv.py <<'EOF'
import errno, os, socket, sys
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("192.0.2.2", int(sys.argv[1]))); ls.listen(1)
c, _ = ls.accept(); c.settimeout(10)
print("server: got", c.recv(2), flush=True); c.sendall(b"before")
os.setgid(65534); os.setuid(65534)
try:
    c.sendall(b"after"); print("server: send after setuid succeeded"); sys.exit(1)
except OSError as e:
    print("server: send after setuid failed:", errno.errorcode.get(e.errno, e.errno)); sys.exit(e.errno != errno.EACCES)
EOF
cat > /tmp/pl_setuid_cli.py <<'EOF'
import socket, sys
c = socket.create_connection(("192.0.2.2", int(sys.argv[1]))); c.settimeout(15); c.sendall(b"go"); got = b""
try:
    while not got.startswith(b"before"):
        b = c.recv(64)
        if not b: break
        got += b
except OSError as e:
    print("client:", e)
print("client: got", got); sys.exit(0 if got.startswith(b"before") else 1)
EOF
pair --srv-wait 10 preload_setuid_rs 60 \
  ". /tmp/pl_lib.sh; pl=$PL_RS port=5312; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP port=5313; t0=\$(tcp_opens)
   pl_watch 40 env LD_PRELOAD=\$pl python3 /tmp/pl_setuid_srv.py \$port; r=\$?; no_tcp \$t0 && exit \$r" \
  ". /tmp/pl_lib.sh; pl=$PL_RS port=5312; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$PL_UP port=5313; pl_lib \$pl || exit 1
   for i in \$(seq 100); do [ -n \"\$(rdma res show cm_id 2>/dev/null | grep LISTEN | grep \$port)\" ] && break; sleep 0.1; done
   p0=\$(rxe_pkts); t0=\$(tcp_opens); pl_watch 40 env LD_PRELOAD=\$pl python3 /tmp/pl_setuid_cli.py \$port; r=\$?; over_rdma \$p0 \$t0 1 && exit \$r"
