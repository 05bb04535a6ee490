#!/usr/bin/env bash
# Runs cmocka unit-test binaries; fails if any fails, prints a total.
set -u
pass=0
fail=0
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t" >&2; fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" = 0 ]
