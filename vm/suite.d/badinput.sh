# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# badinput.sh - the bad-input matrix over every export (ctest/vm/badinput.c). Each case
# runs in its own child; the upstream run records upstream's outcomes (crashes included: they are
# expected for use-after-free and garbage input) and always passes unless the program itself
# breaks. The ours run records ours and compares with upstream's outcomes of the same boot
# (out/badinput.upstream.out): it fails when ours crashes, hangs or leaks, or differs from
# upstream where upstream survives (outside the deviations in ctest/vm/badinput_devs.h); its
# stdout is the markdown table of docs/bad-input.md (ctest/badinput/gendoc.sh).
# badinput_leaks runs ours' cases again with the AddressSanitizer build and LeakSanitizer in every
# child (BADINPUT_LEAKS=1: the child destroys its fixtures and runs a leak check), against the
# same upstream outcomes. Its upstream run only states that (the check is of ours).
t badinput 900 bash -c '
  if [ "$RDMACM_VARIANT" = upstream ]; then exec /extra/bin/badinput; fi
  /extra/bin/badinput > /tmp/badinput.ours || exit 2
  /extra/bin/badinput --compare /host/out/badinput.upstream.out /tmp/badinput.ours'
t badinput_leaks 900 bash -c '
  if [ "$RDMACM_VARIANT" = upstream ]; then echo "the leak check is of ours; upstream outcomes: badinput"; exit 0; fi
  BADINPUT_LEAKS=1 ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 /extra/bin/badinput_asan > /tmp/badinput.asan 2> /tmp/badinput.asan.err || exit 2
  grep -B2 -A30 "ERROR: \(Leak\|Address\)Sanitizer" /tmp/badinput.asan.err | head -200 >&2
  /extra/bin/badinput --compare /host/out/badinput.upstream.out /tmp/badinput.asan'
