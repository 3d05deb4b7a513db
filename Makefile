# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# rdmacm-rs: build, test, install.
#
#   make               build build/lib/librdmacm.so.1 (release)
#   make deps          install what building and testing need (scripts/deps.sh)
#   make check         everything: Rust tests, ABI/header/table checks, the C
#                      harness (plain and ASan), install test, the VM test bed
#   make check-host    the same without the VM
#   make vm-check      the real-kernel test bed only (vm/)
#   make demo          boot the VM and show ours beside upstream
#   make bench         benchmarks, as ratios against upstream
#   make install       PREFIX=/usr/local DESTDIR= LIBDIR=$(PREFIX)/lib

VERSION    := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
ABI        := 1.5
REALNAME   := librdmacm.so.$(ABI).$(VERSION)
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR    ?=
CARGO      ?= cargo
CC         ?= cc
CBINDGEN_VERSION := 0.29.2
B          := build

CWARN   := -Wall -Wextra -Werror
OURS_INC := -Iinclude
.PHONY: all lib header check check-host test-rust check-symbols check-header \
        check-compat check-layout ctest ctest-asan check-install check-ldd ctest-valgrind check-gai fuzz-smoke vm-bin \
        check-symbols-upstream check-constants check-ratchet deps \
        vm-check demo bench install uninstall clean tools

all: lib

lib:
	$(CARGO) build --release --locked
	@mkdir -p $(B)/lib
	cp -f target/release/librdmacm.so $(B)/lib/$(REALNAME)
	ln -sf $(REALNAME) $(B)/lib/librdmacm.so.1
	ln -sf librdmacm.so.1 $(B)/lib/librdmacm.so

# cbindgen at a pinned version; installed into build/tools when missing.
CBINDGEN := $(shell command -v cbindgen 2>/dev/null)
ifneq ($(shell $(or $(CBINDGEN),false) --version 2>/dev/null),cbindgen $(CBINDGEN_VERSION))
CBINDGEN := $(CURDIR)/$(B)/tools/bin/cbindgen
endif
$(B)/tools/bin/cbindgen:
	$(CARGO) install --locked --root $(B)/tools cbindgen --version $(CBINDGEN_VERSION)

tools: $(if $(filter $(CURDIR)/%,$(CBINDGEN)),$(B)/tools/bin/cbindgen)

header: tools
	$(CBINDGEN) --quiet --config cbindgen.toml --crate rdmacm -o include/rdma/rdma_cma.h
	$(CBINDGEN) --quiet --config cbindgen-rsocket.toml --crate rdmacm -o include/rdma/rsocket.h
	$(CBINDGEN) --quiet --config cbindgen-gid.toml --crate rdmacm -o include/infiniband/gid_reachable.h

# make check and make demo first make sure the machine has what they need (deps), then run.
deps:
	scripts/deps.sh

check: deps
	$(MAKE) check-host vm-check

check-host: check-ratchet test-rust check-symbols check-symbols-upstream check-header check-constants check-compat check-layout ctest ctest-asan check-install check-ldd ctest-valgrind check-gai fuzz-smoke

test-rust:
	$(CARGO) test --locked --lib

check-symbols: lib
	ctest/check-symbols.sh $(B)/lib/librdmacm.so.1 abi/rdmacm.symbols

# Every export of the system's (upstream's) librdmacm is exported by ours with the same
# version (vm/testbed.sh also checks against the VM image's newer rdma-core).
check-symbols-upstream: lib
	ctest/check-symbols-upstream.sh $(B)/lib/librdmacm.so.1

# The value of every enum constant and #define of upstream's installed public headers,
# compiled against upstream's headers and against ours, must be the same (also against the
# VM image's rdma-core headers in vm/testbed.sh).
check-constants:
	ctest/check-constants.sh

# A ratchet/allow-list entry added since .ci/ratchet-base must be named (Ratchet-Add: ...)
# in the message of the commit that added it.
check-ratchet:
	ctest/check-ratchet.sh

check-header: tools
	CBINDGEN=$(CBINDGEN) ctest/check-header.sh
	printf '#include <rdma/rdma_cma.h>\n#include <rdma/rdma_verbs.h>\n#include <rdma/rsocket.h>\n#include <infiniband/ib.h>\n#include <infiniband/gid_reachable.h>\n' | \
	    $(CXX) -x c++ -Wall -Wextra -Werror -fsyntax-only $(OURS_INC) -
	@echo "check-header: our headers also compile as C++"

check-compat:
	ctest/check-compat-table.sh

# Struct layouts: the same C program compiled against upstream's installed
# headers and against ours must print abi/layout.txt exactly.
check-layout:
	@mkdir -p $(B)/ctest
	$(CC) $(CWARN) -o $(B)/ctest/layout-upstream ctest/layout.c
	$(CC) $(CWARN) $(OURS_INC) -o $(B)/ctest/layout-ours ctest/layout.c
	$(B)/ctest/layout-upstream | diff -u abi/layout.txt -
	$(B)/ctest/layout-ours | diff -u abi/layout.txt -
	@echo "layout: upstream headers, our headers and src/abi/cma.rs agree"

CTEST_SRC := $(wildcard ctest/harness/*.c)
$(B)/ctest/harness-ours: $(CTEST_SRC) ctest/harness/harness.h include/rdma/rdma_cma.h
	@mkdir -p $(B)/ctest
	$(CC) $(CWARN) -g $(OURS_INC) -o $@ $(CTEST_SRC) -L$(B)/lib -lrdmacm -libverbs -ldl
$(B)/ctest/harness-upstream-hdr: $(CTEST_SRC) ctest/harness/harness.h
	@mkdir -p $(B)/ctest
	$(CC) $(CWARN) -g -o $@ $(CTEST_SRC) -L$(B)/lib -lrdmacm -libverbs -ldl
$(B)/ctest/harness-asan: $(CTEST_SRC) ctest/harness/harness.h include/rdma/rdma_cma.h
	@mkdir -p $(B)/ctest
	$(CC) $(CWARN) -g -fsanitize=address,undefined -fno-omit-frame-pointer $(OURS_INC) -o $@ $(CTEST_SRC) -L$(B)/lib -lrdmacm -libverbs -ldl

ctest: lib $(B)/ctest/harness-ours $(B)/ctest/harness-upstream-hdr
	LD_LIBRARY_PATH=$(CURDIR)/$(B)/lib $(B)/ctest/harness-ours
	LD_LIBRARY_PATH=$(CURDIR)/$(B)/lib $(B)/ctest/harness-upstream-hdr
	@echo "harness expectations against the system's upstream librdmacm:"
	for t in addrinfo_free ports args verbs_inline; do $(B)/ctest/harness-upstream-hdr $$t || exit 1; done

ctest-asan: lib $(B)/ctest/harness-asan
	LD_LIBRARY_PATH=$(CURDIR)/$(B)/lib ASAN_OPTIONS=detect_leaks=1 $(B)/ctest/harness-asan

ctest-valgrind: lib $(B)/ctest/harness-ours
	LD_LIBRARY_PATH=$(CURDIR)/$(B)/lib valgrind -q --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite $(B)/ctest/harness-ours

# The rdma_getaddrinfo corpus against ours on this (device-less) host,
# compared with upstream's output recorded in the VM; also under ASan and
# valgrind.
check-gai: lib
	ctest/gai-corpus-host.sh --asan --valgrind

# Bounded fuzz run of rdma_getaddrinfo and the ibacm answer parser.
FUZZ_SECONDS ?= 60
fuzz-smoke:
	ctest/fuzz-smoke.sh $(FUZZ_SECONDS)

check-install: lib
	ctest/check-install.sh

# Every rdmacm-utils program resolves librdmacm.so.1 to ours, with no
# undefined symbol.
check-ldd: lib
	ctest/check-ldd.sh $(CURDIR)/$(B)/lib

vm-bin: lib $(B)/ctest/harness-ours
	@mkdir -p $(B)/vm-bin
	cp -f $(B)/ctest/harness-ours $(B)/vm-bin/ctest_harness
	$(MAKE) -C ctest/vm B=$(CURDIR)/$(B)

vm-check: lib vm-bin
	vm/testbed.sh check

demo: deps
	$(MAKE) lib vm-bin
	vm/testbed.sh demo

bench: lib vm-bin
	bench/run.sh

# The benchmark's short mode alone (it also runs in every suite run, as test bench_short):
# every case with small counts, upstream then ours; prints the ours run's table.
.PHONY: bench-short
bench-short: lib vm-bin
	RDMACM_VM_WORK=$(CURDIR)/$(B)/vm-bench-short VM_ONLY=bench_short vm/testbed.sh run
	sed -n '/^case (short mode/,$$p' $(B)/vm-bench-short/suite/share/out/bench_short.ours.out

install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/rdma $(DESTDIR)$(INCLUDEDIR)/infiniband \
	           $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(B)/lib/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/librdmacm.so.1
	ln -sf librdmacm.so.1 $(DESTDIR)$(LIBDIR)/librdmacm.so
	install -m 0644 include/rdma/rdma_cma.h include/rdma/rsocket.h include/rdma/rdma_verbs.h $(DESTDIR)$(INCLUDEDIR)/rdma/
	install -m 0644 include/infiniband/gid_reachable.h include/infiniband/ib.h $(DESTDIR)$(INCLUDEDIR)/infiniband/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
	    librdmacm.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/librdmacm.pc
	for m in man/*.3; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man3/; done; true
	for m in man/*.7; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man7/; done; true

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/librdmacm.so.1 $(DESTDIR)$(LIBDIR)/librdmacm.so
	rm -f $(DESTDIR)$(INCLUDEDIR)/rdma/rdma_cma.h $(DESTDIR)$(INCLUDEDIR)/rdma/rsocket.h $(DESTDIR)$(INCLUDEDIR)/rdma/rdma_verbs.h
	rm -f $(DESTDIR)$(INCLUDEDIR)/infiniband/gid_reachable.h $(DESTDIR)$(INCLUDEDIR)/infiniband/ib.h
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/librdmacm.pc
	for m in man/*.3; do rm -f $(DESTDIR)$(MANDIR)/man3/$$(basename $$m); done; true
	for m in man/*.7; do rm -f $(DESTDIR)$(MANDIR)/man7/$$(basename $$m); done; true

clean:
	$(CARGO) clean
	rm -rf $(B)
