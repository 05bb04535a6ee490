#!/usr/bin/env bash
# `make test`'s runner: runs each tier (a make target) in turn, goes on
# after a tier that fails, keeps each tier's output in RESULTS/TIER.log,
# and ends with a summary: every tier with its counts, summed from the
# "NAME: N passed, N failed" lines its own runners print (each listed
# under it), and FAIL where a count failed or make did.
#   MAKE=make tests/run-tiers.sh RESULTS TIER...
# Exit status: 0 if every tier passed, 1 otherwise.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 RESULTS TIER..." >&2; exit 2; }
results=$1
shift
mkdir -p "$results"
rm -f "$results"/*.log

# The count lines of a tier's log: at the start of a line (a guest's own
# lines and sub-runs' come indented or prefixed), not a check's own
# ok/FAIL/skip line, carriage returns from the harness's serial port dropped.
counts() {
	tr -d '\r' < "$1" | grep -E '^[A-Za-z][A-Za-z0-9 _./-]*: [0-9]+ passed, [0-9]+ failed' |
		grep -vE '^(ok|FAIL|skip) '
}

# What a failing tier says of its failures: check lines starting FAIL
# (with the indented detail lines after each), sanitizer and libFuzzer
# reports' headline and first frames; at most 40 lines, each cut at 200
# characters.
failures() {
	tr -d '\r' < "$1" | awk '
		/^FAIL/ { print; detail = 3; next }
		detail > 0 && /^ +[|]/ { print; detail--; next }
		{ detail = 0 }
		/ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|SUMMARY: |^==[0-9]+== *ERROR|Test unit written to|deadly signal|runtime error:/ { print; frames = 4; next }
		frames > 0 && /^ +#[0-9]+ / { print; frames--; next }
	' | cut -c1-200 | head -40
}

failed_tiers=0
summary=()
for t in "$@"; do
	echo "  TIER    $t"
	t0=$SECONDS
	${MAKE:-make} --no-print-directory "$t" 2>&1 | tee "$results/$t.log"
	st=${PIPESTATUS[0]}
	pass=0
	fail=0
	lines=$(counts "$results/$t.log")
	while read -r p f; do
		pass=$((pass + p))
		fail=$((fail + f))
	done < <(echo "$lines" | sed -nE 's/^[^:]*: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p')
	verdict=ok
	what="$pass passed, $fail failed"
	[ -n "$lines" ] || what="no counts printed"
	if [ "$st" != 0 ] || [ "$fail" != 0 ]; then
		verdict=FAIL
		failed_tiers=$((failed_tiers + 1))
		[ "$st" != 0 ] && what="$what; make's status $st"
	fi
	summary+=("$(printf '  %-4s  %-18s %s (%d s)' "$verdict" "$t" "$what" $((SECONDS - t0)))")
	[ -n "$lines" ] && summary+=("$(echo "$lines" | sed 's/^/              | /')")
	# A failing tier's own FAIL lines (and a fuzzer's crash report), so
	# that the summary, the part of a CI log that is kept, says what failed.
	if [ "$verdict" = FAIL ]; then
		why=$(failures "$results/$t.log")
		[ -n "$why" ] && summary+=("$(echo "$why" | sed 's/^/              ! /')")
	fi
done

echo
echo "  SUMMARY $# tiers, $failed_tiers failed (each tier's output: $results/TIER.log)"
printf '%s\n' "${summary[@]}"
[ "$failed_tiers" = 0 ]
