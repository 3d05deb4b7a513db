# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# hostile_peer.sh - an rsocket server of the library under test facing a peer that breaks the
# rsocket protocol (ctest/vm/rs_hostile.c: connection data missing, of another version, cut
# short or describing buffers that point nowhere; data messages claiming more than was written
# and more than the buffer holds; reserved ops and unknown controls; an SGL update that points
# nowhere; more messages than credits). Ours must neither crash nor hang (exit 1 otherwise);
# upstream's outcomes are recorded. Under valgrind memcheck (addressability only: the buffers
# are written by the RDMA device, which valgrind cannot see) any read or write of the library
# outside its allocations also fails ours.
t rs_hostile 420 /extra/bin/rs_hostile
t rs_hostile_memcheck 900 valgrind -q --error-exitcode=9 --undef-value-errors=no /extra/bin/rs_hostile
