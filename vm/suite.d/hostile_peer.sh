# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# hostile_peer.sh - an rsocket server of the library under test facing a peer that breaks the
# rsocket protocol (ctest/vm/rs_hostile.c: connection data missing, of another version, cut
# short or describing buffers that point nowhere; data messages claiming more than was written
# and more than the buffer holds; reserved ops and unknown controls; an SGL update that points
# nowhere; more messages than credits). Ours must neither crash nor hang (exit 1 otherwise);
# upstream's outcomes are recorded.
t rs_hostile 420 /extra/bin/rs_hostile
# Not run under valgrind: with ours under memcheck every peer connect was rejected (kernel CM
# reject reason 8) and no case reached the data path, so such a run proves nothing.
