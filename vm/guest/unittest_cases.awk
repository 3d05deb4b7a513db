# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# unittest_cases.awk - turns python unittest verbose output (-v) into one line per test case,
#   case <test id> ok|FAIL|ERROR|skipped '<reason>'|expected failure|unexpected success
# sorted, plus "ran N". The suite compares these lines between upstream's run and ours (--cmp),
# so every case must end the same way with both libraries, skips and their reasons included.
# Exits 1 when no case was found or the count differs from unittest's own "Ran N tests".
function result(s) {
  if (s ~ /^(ok|FAIL|ERROR|expected failure|unexpected success)$/ || s ~ /^skipped /) return s
  return ""
}
/^test[A-Za-z0-9_]* \([A-Za-z0-9_.]+\)/ {
  cur = $2; gsub(/[()]/, "", cur)
}
cur != "" {
  r = ""
  if (match($0, / \.\.\. .*$/)) r = result(substr($0, RSTART + 5))
  else r = result($0)
  if (r != "") { out[cur] = r; n++; cur = "" }
}
/^Ran [0-9]+ tests? in / { ran = $2 }
END {
  if (n == 0) { print "no test case results found"; exit 1 }
  k = 0
  for (c in out) keys[++k] = c
  # insertion sort: mawk has no asort
  for (i = 2; i <= k; i++) { v = keys[i]; for (j = i - 1; j >= 1 && keys[j] > v; j--) keys[j + 1] = keys[j]; keys[j + 1] = v }
  for (i = 1; i <= k; i++) print "case " keys[i] " " out[keys[i]]
  print "ran " ran
  if (ran != k) { print "parsed " k " results but unittest ran " ran; exit 1 }
}
