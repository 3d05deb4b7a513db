# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# ctest.sh - the project's C harness (ctest/), built on the host into build/vm-bin/ and shipped
# as /extra/bin/ctest_harness. Runs once per variant like every other test.
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t ctest_harness 300 /extra/bin/ctest_harness
