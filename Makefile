# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# rdmacm-rs: build, test, install.
#
#   make               build build/lib/librdmacm.so.1 (release) and
#                      build/lib/rsocket/librspreload.so (make preload)
#   make deps          install what building and testing need (scripts/deps.sh)
#   make check         everything: Rust tests, ABI/header/table checks, the C
#                      harness (plain and ASan), install test, the VM test bed
#   make check-host    the same without the VM
#   make vm-check      the real-kernel test bed only (vm/)
#   make demo          boot the VM and show ours beside upstream
#   make bench         benchmarks, as ratios against upstream
#   make soak          10-minute leak soak of ours in the VM (fds, threads, RSS per minute)
#   make install       PREFIX=/usr/local DESTDIR= LIBDIR=$(PREFIX)/lib
#   make static        build/lib/librdmacm.a (installed by install-dev)
#   make deb / rpm     Debian packages (build/deb) / RPM packages (build/rpm), see docs/packaging.md

VERSION    := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
ABI        := 1.5
REALNAME   := librdmacm.so.$(ABI).$(VERSION)
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
BINDIR     ?= $(PREFIX)/bin
DATADIR    ?= $(PREFIX)/share
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR    ?=
CARGO      ?= cargo
CC         ?= cc
CBINDGEN_VERSION := 0.29.2
B          := build

CWARN   := -Wall -Wextra -Werror
OURS_INC := -Iinclude
.PHONY: all lib preload header check check-host test-rust check-symbols check-header \
        check-compat check-layout ctest ctest-asan check-install check-static check-ldd ctest-valgrind check-gai fuzz-smoke vm-bin \
        check-symbols-upstream check-constants check-ratchet deps check-setuid check-badinput-rows badinput-doc fuzz \
        vm-check demo bench install uninstall clean tools check-preload-cancel
.PHONY: check-link-order miri
.PHONY: static check-static rpm check-rpm check-msrv check-newest-deps check-api check-package
.PHONY: install-lib install-preload install-tools install-dev install-man check-man check-layout-abi deb check-deb vm-debs

all: lib preload static

# No path of the build machine in the library: panic locations and debug info name the
# sources as /usr/src/rdmacm-rs/... and /usr/share/cargo/... (ctest/check-install.sh checks).
CARGO_HOME_DIR := $(or $(CARGO_HOME),$(HOME)/.cargo)
REMAP_FLAGS := --remap-path-prefix=$(CURDIR)=/usr/src/rdmacm-rs --remap-path-prefix=$(CARGO_HOME_DIR)=/usr/share/cargo
# the environment of every cargo build of the library (lib, static, the examples): one set of
# flags, so that cargo does not rebuild the crate between them
BUILD_ENV = RUSTFLAGS="$(strip $(RUSTFLAGS) $(REMAP_FLAGS))" CFLAGS="$(strip $(CFLAGS) -ffile-prefix-map=$(CURDIR)=/usr/src/rdmacm-rs)"
# Link order (capi/build.rs): every cargo run of this Makefile links librdmacm.so.1 with the
# functions capi/hot.txt names first and side by side; `lib` remakes the list from the library
# it has just linked and links again when the list changed (a fresh tree: twice).
export RDMACM_LINK_ORDER := $(CURDIR)/target/release/librdmacm.order
lib:
	$(BUILD_ENV) $(CARGO) build --release --locked
	scripts/link-order.sh target/release/librdmacm_capi.so capi/hot.txt > $(RDMACM_LINK_ORDER).new
	@if cmp -s $(RDMACM_LINK_ORDER).new $(RDMACM_LINK_ORDER); then rm -f $(RDMACM_LINK_ORDER).new; else \
	    mv -f $(RDMACM_LINK_ORDER).new $(RDMACM_LINK_ORDER); \
	    echo 'RUSTFLAGS=... $(CARGO) build --release --locked   # again, in capi/hot.txt order'; \
	    $(BUILD_ENV) $(CARGO) build --release --locked; fi
	@mkdir -p $(B)/lib
	cp -f target/release/librdmacm_capi.so $(B)/lib/$(REALNAME)
	ln -sf $(REALNAME) $(B)/lib/librdmacm.so.1
	ln -sf librdmacm.so.1 $(B)/lib/librdmacm.so
	@# the identity of what cargo built (GNU build-id), read from cargo's output, not from the copy:
	@# the VM test bed checks that the "ours" variant loads a library with this very build-id
	readelf -n target/release/librdmacm_capi.so | sed -n 's/^ *Build ID: //p' > $(B)/lib/librdmacm.build-id
	@test -s $(B)/lib/librdmacm.build-id || { echo "lib: target/release/librdmacm_capi.so has no GNU build-id" >&2; exit 1; }

# librdmacm.a: the C API crate as a staticlib (cargo rustc --crate-type staticlib), built without
# the symver feature: objects that carry both `f` and the `.symver` alias `f@@RDMACM_1.x` link
# with gold and lld but not with GNU ld (bfd: "multiple definition of `rdma_create_id'"), and a
# static link has no use for symbol versions. The native libraries rustc says the archive needs
# go to $(B)/lib/librdmacm.a.native-libs (ctest/check-static.sh holds librdmacm.pc's
# Libs.private against them). Other Rust code must not be linked into the same program
# statically (two copies of std and of the allocator shims).
static:
	@mkdir -p $(B)/lib
	$(BUILD_ENV) \
	    $(CARGO) rustc --release --locked -p rdmacm-capi --lib --crate-type staticlib --no-default-features \
	    -- --print native-static-libs 2> $(B)/lib/librdmacm.a.log; rc=$$?; cat $(B)/lib/librdmacm.a.log >&2; exit $$rc
	sed -n 's/^note: native-static-libs: //p' $(B)/lib/librdmacm.a.log > $(B)/lib/librdmacm.a.native-libs
	@test -s $(B)/lib/librdmacm.a.native-libs || { echo "static: rustc printed no native-static-libs" >&2; exit 1; }
	cp -f target/release/librdmacm_capi.a $(B)/lib/librdmacm.a

# librspreload.so (preload/, a second cdylib of the workspace), linked against the
# librdmacm.so.1 just built; installed as upstream's: $(LIBDIR)/rsocket/librspreload.so
# (no SONAME) with librspreload.so.1 and .so.1.0.0 links to it.
preload: lib
	RSPRELOAD_RDMACM_DIR=$(CURDIR)/$(B)/lib RUSTFLAGS="$(strip $(RUSTFLAGS) $(REMAP_FLAGS))" $(CARGO) build --release --locked -p rspreload
	@mkdir -p $(B)/lib/rsocket
	cp -f target/release/librspreload.so $(B)/lib/rsocket/librspreload.so
	ln -sf librspreload.so $(B)/lib/rsocket/librspreload.so.1

# cbindgen at a pinned version; installed into build/tools when missing.
CBINDGEN := $(shell command -v cbindgen 2>/dev/null)
ifneq ($(shell $(or $(CBINDGEN),false) --version 2>/dev/null),cbindgen $(CBINDGEN_VERSION))
CBINDGEN := $(CURDIR)/$(B)/tools/bin/cbindgen
endif
$(B)/tools/bin/cbindgen:
	$(CARGO) install --locked --root $(B)/tools cbindgen --version $(CBINDGEN_VERSION)

tools: $(if $(filter $(CURDIR)/%,$(CBINDGEN)),$(B)/tools/bin/cbindgen)

header: tools
	$(CBINDGEN) --quiet --config cbindgen.toml --crate rdmacm-capi -o include/rdma/rdma_cma.h
	$(CBINDGEN) --quiet --config cbindgen-rsocket.toml --crate rdmacm-capi -o include/rdma/rsocket.h
	$(CBINDGEN) --quiet --config cbindgen-gid.toml --crate rdmacm-capi -o include/infiniband/gid_reachable.h

# make check and make demo first make sure the machine has what they need (deps), then run.
deps:
	scripts/deps.sh

check: deps
	$(MAKE) check-host vm-check

check-host: check-ratchet check-msrv check-newest-deps test-rust check-link-order check-api check-symbols check-symbols-upstream check-header check-constants check-compat check-layout ctest ctest-asan check-install check-static check-ldd ctest-valgrind check-gai fuzz-smoke check-man check-layout-abi check-deb check-rpm check-setuid check-badinput-rows check-preload-cancel check-tool-host

# The hot path's link order held (capi/hot.txt, scripts/link-order.sh): its functions side by
# side in the library `make lib` built.
check-link-order: lib
	ctest/check-link-order.sh

# The public Rust API is a stated surface: api/rdmacm.api lists it, and a change without the
# listing fails (ctest/check-api.sh --update regenerates it); `cargo doc` of the crate warns about
# nothing, with and without the tokio feature; `cargo package` of `rdmacm` succeeds with only what
# the library needs.
check-api:
	ctest/check-api.sh
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --locked --no-deps -q -p rdmacm
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --locked --no-deps -q -p rdmacm --features tokio
	$(CARGO) test --locked --lib -q -p rdmacm --features tokio api::
	ctest/check-package.sh

# Miri over the unit tests that need no foreign call (nightly Rust with miri; not part of
# make check: docs/rust-api.md, "Checked by Miri").
miri:
	ctest/miri.sh

# The declared minimum Rust version (Cargo.toml's rust-version) is true: the workspace crates
# and the locked dependencies agree with it, clippy's incompatible_msrv finds nothing newer.
check-msrv:
	ctest/check-msrv.sh

# The crate builds without a warning against the newest dependencies its Cargo.toml allows (what
# a new project resolves today: `cargo update` in a copy; the tree's Cargo.lock is not touched).
check-newest-deps:
	ctest/check-newest-deps.sh

# The unit tests, and tests/own_allocator.rs: a Rust program with a #[global_allocator] of its
# own builds and runs with `rdmacm` (the crate declares none; the C library's crate does).
test-rust:
	$(CARGO) test --locked --lib
	$(CARGO) test --locked -p rdmacm --test own_allocator
	$(CARGO) test --locked --lib -p rspreload

# A thread cancelled in a call librspreload.so forwards ends as it would without it: no frame
# of the library a forced unwind passes has an exception table, and preload/tests/cancel.c's
# cases pass preloaded over the system's librdmacm and over ours, plain and in fork mode (no
# RDMA device needed: the sockets stay real ones, or fork mode's stand-ins for them).
PRELOAD_RUN = LD_PRELOAD=$(CURDIR)/$(B)/lib/rsocket/librspreload.so
check-preload-cancel: preload
	@mkdir -p $(B)/ctest
	$(CC) $(CWARN) -O2 -pthread -o $(B)/ctest/preload-cancel preload/tests/cancel.c
	preload/tests/check-frames.sh $(B)/lib/rsocket/librspreload.so
	$(PRELOAD_RUN) $(B)/ctest/preload-cancel
	$(PRELOAD_RUN) RDMAV_FORK_SAFE=1 $(B)/ctest/preload-cancel
	$(PRELOAD_RUN) LD_LIBRARY_PATH=$(CURDIR)/$(B)/lib $(B)/ctest/preload-cancel
	$(PRELOAD_RUN) LD_LIBRARY_PATH=$(CURDIR)/$(B)/lib RDMAV_FORK_SAFE=1 $(B)/ctest/preload-cancel

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

# The documents agree with the code and hold together: the compatibility table
# (docs/compatibility.md) against the exports and the ENOSYS stubs; README.md under 300 lines,
# every page of docs/ linked from it, every relative link resolving (ctest/check-docs.sh).
check-compat:
	ctest/check-compat-table.sh
	ctest/check-docs.sh

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

# Bounded fuzz run of every target in fuzz/ (the time is shared; docs/behaviour.md: Fuzzing).
FUZZ_SECONDS ?= 60
fuzz-smoke:
	ctest/fuzz-smoke.sh $(FUZZ_SECONDS)

# The long fuzz run: FUZZ_TIME seconds per target (docs/behaviour.md: Fuzzing).
FUZZ_TIME ?= 600
FUZZ_TARGETS ?= rdma_getaddrinfo acm_response gid_reachable events rsocket_wire af_ib_hdr
fuzz:
	FUZZ_TARGETS="$(FUZZ_TARGETS)" nice -n 19 ctest/fuzz-smoke.sh $$(( $(FUZZ_TIME) * $(words $(FUZZ_TARGETS)) ))

# A setuid-root program run by nobody with RDMACM_RS_LOG/_FILE set creates
# no log file (secure_getenv); ours and upstream's.
check-setuid: lib
	ctest/setuid-env.sh $(CURDIR)/$(B)/lib/librdmacm.so.1 $(wildcard /usr/lib/x86_64-linux-gnu/librdmacm.so.1)

# Every export has a row in the bad-input matrix (ctest/vm/badinput.c).
check-badinput-rows:
	ctest/badinput/check-rows.sh

# The bad-input matrix in the VM (both libraries, ours also under ASan+LSan),
# then docs/bad-input.md from its results.
BADINPUT_WORK ?= $(CURDIR)/$(B)/vm-badinput
badinput-doc: lib vm-bin
	RDMACM_VM_WORK=$(BADINPUT_WORK) VM_ONLY="badinput badinput_leaks" vm/testbed.sh run
	ctest/badinput/gendoc.sh $(BADINPUT_WORK)

check-install: lib
	ctest/check-install.sh

# librdmacm.a installed as a user gets it: every export, no symbol version, pkg-config --static
# complete; programs linked -Wl,-Bstatic -lrdmacm and cc -static run with no librdmacm.so.
check-static: lib static
	ctest/check-static.sh install

# Every rdmacm-utils program resolves librdmacm.so.1 to ours, with no
# undefined symbol.
check-ldd: lib
	ctest/check-ldd.sh $(CURDIR)/$(B)/lib

vm-bin: lib $(B)/ctest/harness-ours
	@mkdir -p $(B)/vm-bin
	cp -f $(B)/ctest/harness-ours $(B)/vm-bin/ctest_harness
	$(MAKE) preload
	cp -f $(B)/lib/rsocket/librspreload.so $(B)/vm-bin/librspreload.so
	cp -f target/release/rdma-resolve man/rdma-resolve.schema.json man/rdmacm-trace.schema.json $(B)/vm-bin/
	$(MAKE) check-tool
	cp -f target/release/rdmacm-rs-check $(B)/vm-bin/
	$(MAKE) -C ctest/vm B=$(CURDIR)/$(B)

vm-check: lib vm-bin
	vm/testbed.sh check

demo: deps
	$(MAKE) lib vm-bin
	vm/testbed.sh demo

bench: lib vm-bin
	bench/run.sh

# make soak: test soak_long of vm/suite.d/soak.sh, only run when asked
# (VM_BENCH=soak; flagged bench in vm/tests.txt): ours 10 minutes of rdma_cm + rsocket
# connect/transfer/disconnect cycles over rxe, descriptors/threads/RSS sampled every minute
# and checked against the first sample; upstream a 60 s reference. Prints the samples.
.PHONY: soak
soak: lib vm-bin
	RDMACM_VM_WORK=$(CURDIR)/$(B)/vm-soak VM_BENCH=soak VM_ONLY=soak_long VM_TIMEOUT=$${VM_TIMEOUT:-2400} \
	    vm/testbed.sh run > $(B)/vm-soak.log 2>&1; rc=$$?; tail -n 1 $(B)/vm-soak.log; \
	    for v in upstream ours; do echo "== soak_long ($$v)"; grep -h '^SOAK' $(B)/vm-soak/suite/share/out/soak_long.$$v.out; done; \
	    exit $$rc

# The benchmark's short mode alone (it also runs in every suite run, as test bench_short):
# every case with small counts, upstream then ours; prints the ours run's table.
.PHONY: bench-short
bench-short: lib vm-bin
	RDMACM_VM_WORK=$(CURDIR)/$(B)/vm-bench-short VM_ONLY=bench_short vm/testbed.sh run
	sed -n '/^case (short mode/,$$p' $(B)/vm-bench-short/suite/share/out/bench_short.ours.out

# install = install-lib + install-dev (headers, pkg-config) + install-man; the Debian
# package (make deb) installs through the same targets. Nothing of the build tree ends up in
# an installed file (ctest/check-install.sh checks). UPSTREAM_LEVEL: the rdma-core release whose
# librdmacm ABI (exports, headers) this library provides in full; pkg-config's Version is
# 1.5.$(UPSTREAM_LEVEL), upstream's form (rdma-core writes 1.<ABI minor>.<its release>).
UPSTREAM_LEVEL := 65.0
HEADERS_RDMA := include/rdma/rdma_cma.h include/rdma/rdma_cma_abi.h include/rdma/rdma_verbs.h include/rdma/rsocket.h
HEADERS_IB   := include/infiniband/acm.h include/infiniband/ib.h include/infiniband/gid_reachable.h
install: install-lib install-preload install-dev install-man install-tools

# The library is installed without its debug information (about 9 of its 10 MB): that goes to
# $(LIBDIR)/.debug/$(REALNAME).debug, which the library names in its .gnu_debuglink (with a
# CRC), where gdb and valgrind look for it. The packages split it their own way (dh_strip's
# dbgsym package, rpm's strip): they install with SPLIT_DEBUG= and get the library whole.
SPLIT_DEBUG ?= 1
install-lib: lib
	install -d $(DESTDIR)$(LIBDIR)
ifeq ($(SPLIT_DEBUG),1)
	install -d $(DESTDIR)$(LIBDIR)/.debug
	objcopy --only-keep-debug $(B)/lib/$(REALNAME) $(DESTDIR)$(LIBDIR)/.debug/$(REALNAME).debug
	objcopy --strip-debug --add-gnu-debuglink=$(DESTDIR)$(LIBDIR)/.debug/$(REALNAME).debug \
	    $(B)/lib/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	chmod 0644 $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/.debug/$(REALNAME).debug
else
	install -m 0644 $(B)/lib/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(REALNAME)
endif
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/librdmacm.so.1
	ln -sf librdmacm.so.1 $(DESTDIR)$(LIBDIR)/librdmacm.so

install-dev: static
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/rdma $(DESTDIR)$(INCLUDEDIR)/infiniband $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0644 $(B)/lib/librdmacm.a $(DESTDIR)$(LIBDIR)/librdmacm.a
	install -m 0644 $(HEADERS_RDMA) $(DESTDIR)$(INCLUDEDIR)/rdma/
	install -m 0644 $(HEADERS_IB) $(DESTDIR)$(INCLUDEDIR)/infiniband/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|; s|@UPSTREAM_LEVEL@|$(UPSTREAM_LEVEL)|' \
	    librdmacm.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/librdmacm.pc

# every page of man/ in its section (man/NAME.S -> man<S>/NAME.S)
MAN_SECTIONS := $(sort $(subst .,,$(suffix $(wildcard man/*.[1-8]))))
install-man:
	for s in $(MAN_SECTIONS); do install -d $(DESTDIR)$(MANDIR)/man$$s && \
	    install -m 0644 man/*.$$s $(DESTDIR)$(MANDIR)/man$$s/ || exit 1; done

install-preload: preload
	install -d $(DESTDIR)$(LIBDIR)/rsocket
	install -m 0644 $(B)/lib/rsocket/librspreload.so $(DESTDIR)$(LIBDIR)/rsocket/librspreload.so
	ln -sf librspreload.so $(DESTDIR)$(LIBDIR)/rsocket/librspreload.so.1
	ln -sf librspreload.so $(DESTDIR)$(LIBDIR)/rsocket/librspreload.so.1.0.0

# rdmacm-rs-check (check/: compares ours with upstream's on this machine's RDMA devices; its
# own crate, it does not link the library), built with lib's flags so that the shared
# dependencies are not rebuilt between the two.
.PHONY: check-tool
check-tool:
	$(BUILD_ENV) $(CARGO) build --release --locked -p rdmacm-rs-check

# The checker's unit tests, and the checker on this host, which has no RDMA device: one line
# and exit status 3; over a stand-in sysfs whose port is down, every case skipped and exit 4.
.PHONY: check-tool-host
check-tool-host: lib check-tool
	$(CARGO) test --locked -q -p rdmacm-rs-check
	check/tests/host.sh target/release/rdmacm-rs-check

# rdma-resolve (the resolution explainer and trace reader) and its JSON schemas; its page is man/rdma-resolve.1;
# rdmacm-rs-check, its page man/rdmacm-rs-check.1
install-tools: lib check-tool
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/rdmacm-rs
	install -m 0755 target/release/rdma-resolve $(DESTDIR)$(BINDIR)/rdma-resolve
	install -m 0755 target/release/rdmacm-rs-check $(DESTDIR)$(BINDIR)/rdmacm-rs-check
	install -m 0644 man/rdma-resolve.schema.json man/rdmacm-trace.schema.json $(DESTDIR)$(DATADIR)/rdmacm-rs/

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/librdmacm.so.1 $(DESTDIR)$(LIBDIR)/librdmacm.so
	rm -f $(DESTDIR)$(LIBDIR)/.debug/$(REALNAME).debug
	-rmdir $(DESTDIR)$(LIBDIR)/.debug 2>/dev/null
	rm -f $(DESTDIR)$(LIBDIR)/librdmacm.a
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/rdma/,$(notdir $(HEADERS_RDMA)))
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/infiniband/,$(notdir $(HEADERS_IB)))
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/librdmacm.pc
	for s in $(MAN_SECTIONS); do for m in man/*.$$s; do rm -f $(DESTDIR)$(MANDIR)/man$$s/$${m#man/}; done; done
	rm -f $(DESTDIR)$(LIBDIR)/rsocket/librspreload.so $(DESTDIR)$(LIBDIR)/rsocket/librspreload.so.1 \
	      $(DESTDIR)$(LIBDIR)/rsocket/librspreload.so.1.0.0
	rmdir $(DESTDIR)$(LIBDIR)/rsocket 2>/dev/null || true
	rm -f $(DESTDIR)$(BINDIR)/rdma-resolve $(DESTDIR)$(BINDIR)/rdmacm-rs-check $(DESTDIR)$(DATADIR)/rdmacm-rs/rdma-resolve.schema.json $(DESTDIR)$(DATADIR)/rdmacm-rs/rdmacm-trace.schema.json
	-rmdir $(DESTDIR)$(DATADIR)/rdmacm-rs 2>/dev/null

# make deb: the Debian packages librdmacm-rs1 (the library, in place of librdmacm1t64) and
# librdmacm-rs-dev (headers, pkg-config, man pages; in place of librdmacm-dev) in build/deb/,
# built with debhelper from debian/ around `make lib` and the install targets, then lintian
# (every tag it still reports is explained in debian/*.lintian-overrides and docs/packaging.md).
# Needs debhelper, lintian, fakeroot (scripts/deps.sh). check-deb: what is in them.
deb: lib preload static check-tool
	@$(MAKE) --no-print-directory $(B)/deb/rdmacm-rs.changes
DEB_INPUTS := target/release/librdmacm_capi.so target/release/rdmacm-rs-check target/release/librdmacm_capi.a target/release/librspreload.so $(wildcard debian/* debian/source/*) $(wildcard man/*) \
              $(HEADERS_RDMA) $(HEADERS_IB) librdmacm.pc.in abi/rdmacm.symbols Makefile
$(B)/deb/rdmacm-rs.changes: $(DEB_INPUTS)
	@v=$$(dpkg-parsechangelog -SVersion); [ "$$v" = "$(VERSION)" ] || \
	    { echo "deb: debian/changelog says $$v, Cargo.toml $(VERSION)" >&2; exit 1; }
	rm -rf $(B)/deb; mkdir -p $(B)/deb
	DEBDIR=$(abspath $(B))/deb dpkg-buildpackage --build=binary --no-sign --no-check-builddeps \
	    --buildinfo-file=$(abspath $(B))/deb/rdmacm-rs.buildinfo --changes-file=$(abspath $@) \
	    --changes-option=-u$(abspath $(B))/deb --buildinfo-option=-u$(abspath $(B))/deb --post-clean
	lintian --fail-on warning,error --display-info --pedantic $@ || { rm -f $@; exit 1; }
	@ls -l $(B)/deb/*.deb

# make rpm: RPM packages for the RHEL/Fedora family (rpm/rdmacm-rs.spec: librdmacm-rs,
# librdmacm-rs-devel, rdmacm-rs-tools) in build/rpm/RPMS/, built with rpmbuild in this tree
# (--build-in-place, like make deb around `make lib` and the install targets), then rpmlint with
# rpm/rpmlint.toml (every filtered tag is explained there), which must report nothing. --nodeps:
# the build host need not be an RPM system (Debian's rpm has an empty package database).
# brp-compress is run with bash: it is bash code under #!/bin/sh, and /bin/sh is dash on Debian.
# check-rpm: what is in them, against the .deb (ctest/check-rpm.sh). Needs rpm, rpmlint, file.
RPM_INPUTS := $(filter-out $(wildcard debian/* debian/source/*),$(DEB_INPUTS)) $(wildcard rpm/*)
rpm: lib preload static check-tool
	@$(MAKE) --no-print-directory $(B)/rpm/rpms.stamp
$(B)/rpm/rpms.stamp: $(RPM_INPUTS)
	@v=$$(sed -n 's/^Version: *//p' rpm/rdmacm-rs.spec); [ "$$v" = "$(VERSION)" ] || \
	    { echo "rpm: rpm/rdmacm-rs.spec says Version $$v, Cargo.toml $(VERSION)" >&2; exit 1; }
	@l=$$(sed -n 's/^%global upstream_level *//p' rpm/rdmacm-rs.spec); [ "$$l" = "$(UPSTREAM_LEVEL)" ] || \
	    { echo "rpm: rpm/rdmacm-rs.spec says upstream_level $$l, the Makefile UPSTREAM_LEVEL $(UPSTREAM_LEVEL)" >&2; exit 1; }
	rm -rf $(B)/rpm; mkdir -p $(B)/rpm
	rpmbuild -bb --build-in-place --nodeps --define "_topdir $(abspath $(B))/rpm" \
	    --define "__brp_compress /bin/bash %{_rpmconfigdir}/brp-compress %{?_prefix}" \
	    rpm/rdmacm-rs.spec > $(B)/rpm/rpmbuild.log 2>&1 || { tail -n 40 $(B)/rpm/rpmbuild.log >&2; exit 1; }
	rpmlint -c rpm/rpmlint.toml $(B)/rpm/RPMS/*/*.rpm rpm/rdmacm-rs.spec > $(B)/rpm/rpmlint.log 2>&1; rc=$$?; \
	    grep -v '^$$' $(B)/rpm/rpmlint.log; [ $$rc = 0 ] && grep -q ' 0 errors, 0 warnings' $(B)/rpm/rpmlint.log || \
	    { echo "rpm: rpmlint reports the above (exit $$rc)" >&2; exit 1; }
	@touch $@
	@ls -l $(B)/rpm/RPMS/*/*.rpm

check-rpm: rpm deb
	ctest/check-rpm.sh $(B)/rpm $(B)/deb

# The VM test bed installs the packages into the guest (vm/suite.d/pkg.sh): they travel in
# build/vm-bin/debs (shipped as /extra/bin/debs).
vm-debs: deb
	@mkdir -p $(B)/vm-bin/debs
	rm -f $(B)/vm-bin/debs/*.deb
	cp -f $(B)/deb/librdmacm-rs1_*.deb $(B)/deb/librdmacm-rs-dev_*.deb $(B)/vm-bin/debs/
vm-bin: vm-debs $(B)/vm-bin/nonetlink.so $(B)/vm-bin/cm_conn_static
# cm_conn linked statically against librdmacm.a as a user would (make install, pkg-config
# --static, -Wl,-Bstatic -lrdmacm): vm/suite.d/pkg.sh, pkg_static_link. Relinked every time.
.PHONY: $(B)/vm-bin/cm_conn_static
$(B)/vm-bin/cm_conn_static: lib static
	@mkdir -p $(B)/vm-bin
	ctest/check-static.sh build ctest/vm/cm_conn.c $@
# The Rust examples (examples/*.rs) for vm/suite.d/examples.sh, shipped as
# /extra/bin/examples/. Built with lib's flags, so cargo does not rebuild the crate's shared
# dependencies between the two, and with every feature an example needs (the async ones: tokio).
VM_EXAMPLES := rping async_echo rstream hello_rdma mckey timeouts udaddy bulk rhttp async_rstream
.PHONY: vm-examples
vm-examples: lib
	$(BUILD_ENV) \
	    $(CARGO) build --release --locked -p rdmacm --features tokio $(addprefix --example ,$(VM_EXAMPLES))
	@mkdir -p $(B)/vm-bin/examples
	cp -f $(addprefix target/release/examples/,$(VM_EXAMPLES)) $(B)/vm-bin/examples/
vm-bin: vm-examples
# LD_PRELOAD shim of vm/suite.d/check.sh (checker_broken): rdma_resolve_route fails.
vm-bin: $(B)/vm-bin/failroute.so
$(B)/vm-bin/failroute.so: ctest/shim/failroute.c
	@mkdir -p $(B)/vm-bin
	$(CC) $(CWARN) -O1 -shared -fPIC -o $@ $<
# LD_PRELOAD shim of vm/suite.d/kmod.sh (kmod_sysfs_fallback): no RDMA netlink socket.
$(B)/vm-bin/nonetlink.so: ctest/shim/nonetlink.c
	@mkdir -p $(B)/vm-bin
	$(CC) $(CWARN) -O1 -shared -fPIC -o $@ $< -ldl

check-deb: deb
	ctest/check-deb.sh $(B)/deb
	ctest/check-static.sh deb $(B)/deb

# Every export and inline helper has a man page; rdma_cm.7 lists every environment
# variable; every page renders without warnings.
check-man:
	ctest/check-man.sh

# <rdma/rdma_cma_abi.h> and <infiniband/acm.h>: sizes, offsets and constants as upstream's
# (abi/layout-abi.txt; also against every upstream copy of the headers found on the host).
check-layout-abi:
	ctest/check-layout-abi.sh

clean:
	$(CARGO) clean
	rm -rf $(B)
