# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# ctest.sh - the project's C harness (ctest/), built on the host into build/vm-bin/ and shipped
# as /extra/bin/ctest_harness. Runs once per variant like every other test.
if [ -x /extra/bin/ctest_harness ]; then
  t ctest_harness 300 /extra/bin/ctest_harness
else
  skip ctest_harness "no /extra/bin/ctest_harness (build/vm-bin/ctest_harness not built on the host)"
fi
