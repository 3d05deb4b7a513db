#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# miri.sh: the unit tests of the Rust API and of rsockets that Miri can interpret (make miri;
# nightly Rust with the miri component). They run the real stream, send, receive, credit and
# memory-region code over the fake fabric (src/rsocket/fake.rs), so Miri checks that code for
# undefined behaviour: data races, use after free, out-of-bounds and misaligned accesses,
# invalid values. -Zmiri-ignore-leaks: a region whose deregistration fails is leaked on purpose
# (a test checks it). -Zmiri-disable-isolation: the fake opens /dev/null placeholders.
#
# What Miri cannot run, and so is skipped (the VM test bed runs it on a real kernel):
#   - anything that reaches libibverbs or the library's C shims (no foreign calls under Miri);
#   - poll(2): every test where a thread sleeps and is woken (the wait is a poll);
#   - epoll_create1: the epoll emulation's tests;
#   - AF_NETLINK and UDP sockets: rdma_getaddrinfo's kernel probe, datagram rsockets;
#   - the hostile-peer test's 10,000 random messages and the 300 random rounds of the planned
#     reads' test (each longer than 10 minutes interpreted).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo +nightly miri --version >/dev/null 2>&1 ||
    { echo "miri.sh: needs nightly Rust with miri: rustup toolchain install nightly --component miri rust-src" >&2; exit 1; }
skip=(
    api::gai::tests::failures_are_errors
    api::gai::tests::numeric_passive_lookup_is_owned
    api::gai::tests::udp_port_space_asks_for_ud
    api::id::tests::timed_waits_end_at_the_deadline_or_on_data
    api::verbs::tests::send_and_receive_over_the_fake
    api::verbs::tests::unsignalled_send_completes_silently
    rsocket::dgram::tests::create_bind_close
    rsocket::svc::tests::clients_are_served_and_let_go
    rsocket::tests::a_change_wakes_the_other_sleepers
    rsocket::tests::bad_socket_arguments
    rsocket::tests::close_wakes_a_sleeper
    rsocket::tests::completions_wake_the_sleepers_waiting_for_them
    rsocket::tests::rpoll_on_ordinary_descriptors
    rsocket::tests::wait_refuses_a_held_lock
    rsocket::tests_epoll::a_closed_rsocket_leaves_every_set
    rsocket::tests_epoll::edge_triggered_reports_each_new_arrival_once
    rsocket::tests_epoll::edge_triggered_wait_wakes_on_new_data
    rsocket::tests_epoll::exclusive_as_the_kernel
    rsocket::tests_epoll::level_triggered_after_a_partial_read
    rsocket::tests_epoll::many_sets_on_one_stream
    rsocket::tests_epoll::oneshot_disarms_until_mod
    rsocket::tests_epoll::ordinary_descriptors_follow_the_kernel
    rsocket::tests_epoll::ready_members_take_turns
    rsocket::tests_hostile::both_directions_with_a_thread_per_direction
    rsocket::tests_hostile::hostile_random_messages
    rsocket::tests_iomap::a_riowrite_that_waits_for_room_goes_on_with_the_chunk_size_it_reached
    rsocket::tests_proto::blocked_sender_wakes_on_credits
    rsocket::tests_proto::blocking_transfer_between_threads
    rsocket::tests_proto::data_taken_by_the_reader_wakes_the_receiver_sleeping_beside_it
    rsocket::tests_proto::msg_waitall_collects_several_messages
    rsocket::tests_proto::the_channel_reader_hands_the_reading_on_when_it_leaves
    rsocket::tests_send::a_send_that_came_behind_writes_in_flight_stays_large_after_its_wait
    rsocket::tests_send::a_send_that_waits_for_room_goes_on_with_the_chunk_size_it_reached
    rsocket::tests_send::blocking_small_sends_never_wait_on_a_run
    rsocket::wire::tests::planned_reads_match_the_one_piece_read
)
args=()
for t in "${skip[@]}"; do args+=(--skip "$t"); done
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-ignore-leaks -Zmiri-disable-isolation}"
exec cargo +nightly miri test -p rdmacm --lib -- api:: rsocket:: "${args[@]}"
