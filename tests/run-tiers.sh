#!/usr/bin/env bash
# `make test`'s runner: runs each tier (a make target) in turn, goes on
# after a tier that fails, keeps each tier's output in RESULTS/TIER.log,
# and ends with a summary: every tier with its counts, summed from the
# "NAME: N passed, N failed" lines its own runners print (each listed
# under it), and FAIL where a count failed or make did.
#   MAKE=make tests/run-tiers.sh RESULTS [--beside "TIER..."] TIER...
# --beside names the tiers of a second lane: of those asked for, they run
# one after another beside the others (the Makefile's TEST_BESIDE: where
# the VM tiers run in tests/vmhost's VM, one vCPU and so one of the host's
# cores, the tiers that boot no VM and, where the host has a core for a
# second such VM, half of the VM tiers). The caller has built what both
# lanes share first; a side tier's output goes to its log and is printed
# once the main lane is done.
# Exit status: 0 if every tier passed, 1 otherwise.
set -uo pipefail
usage() { echo "usage: $0 RESULTS [--beside \"TIER...\"] TIER..." >&2; exit 2; }
[ $# -ge 2 ] || usage
results=$1
shift
beside=
if [ "$1" = --beside ]; then
	[ $# -ge 3 ] || usage
	beside=" $2 "
	shift 2
fi
mkdir -p "$results"
rm -f "$results"/*.log "$results"/*.sum

# The count lines of a tier's log: at the start of a line (a guest's own
# lines and sub-runs' come indented or prefixed), not a check's own
# ok/FAIL/skip line, carriage returns from the harness's serial port dropped.
counts() {
	tr -d '\r' < "$1" | grep -E '^[A-Za-z][A-Za-z0-9 _./-]*: [0-9]+ passed, [0-9]+ failed' |
		grep -vE '^(ok|FAIL|skip) '
}

# What a failing tier says of its failures: check lines starting FAIL
# (with the indented detail lines after each), lines starting
# "diagnosis:" (what a runner found out about a failure: the machine's
# memory, a sandbox's log), sanitizer and libFuzzer reports' headline and
# first frames; at most 40 lines, each cut at 200 characters.
failures() {
	tr -d '\r' < "$1" | awk '
		/^FAIL/ { print; detail = 3; next }
		/^diagnosis: / { print; next }
		detail > 0 && /^ +[|]/ { print; detail--; next }
		{ detail = 0 }
		/ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|SUMMARY: |^==[0-9]+== *ERROR|Test unit written to|deadly signal|runtime error:/ { print; frames = 4; next }
		frames > 0 && /^ +#[0-9]+ / { print; frames--; next }
	' | cut -c1-200 | head -40
}

# Runs one tier and leaves its summary lines in RESULTS/TIER.sum (the
# first line "ok" or "FAIL"). TEE=1: its output on stdout too.
run_tier() {
	local t=$1 t0=$SECONDS st pass=0 fail=0 lines verdict what why p f
	if [ "${TEE:-1}" = 1 ]; then
		${MAKE:-make} --no-print-directory "$t" 2>&1 | tee "$results/$t.log"
		st=${PIPESTATUS[0]}
	else
		${MAKE:-make} --no-print-directory "$t" > "$results/$t.log" 2>&1
		st=$?
	fi
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
		[ "$st" != 0 ] && what="$what; make's status $st"
	fi
	{
		echo "$verdict"
		printf '  %-4s  %-18s %s (%d s)\n' "$verdict" "$t" "$what" $((SECONDS - t0))
		[ -n "$lines" ] && echo "$lines" | sed 's/^/              | /'
		# A failing tier's own FAIL lines (and a fuzzer's crash report), so
		# that the summary, the part of a CI log that is kept, says what failed.
		# A tier that failed with no such line (make stopped, a script
		# died): the end of its log, or that the log is empty.
		if [ "$verdict" = FAIL ]; then
			why=$(failures "$results/$t.log")
			[ -n "$why" ] || why=$(tr -d '\r' < "$results/$t.log" | tail -8 | cut -c1-200)
			[ -n "$why" ] || why="its log is empty ($(df -h --output=avail "$results" 2> /dev/null | tail -1 | tr -d ' ') free where it is written)"
			echo "$why" | sed 's/^/              ! /'
		fi
	} > "$results/$t.sum"
}

main=() side=()
for t in "$@"; do
	case $beside in *" $t "*) side+=("$t") ;; *) main+=("$t") ;; esac
done
t_all=$SECONDS
side_pid=
if [ ${#side[@]} -gt 0 ]; then
	echo "  BESIDE  ${side[*]} (in a second lane, output in $results/TIER.log)"
	# An interrupted run stops both lanes (the side one is in this
	# process group).
	trap 'trap - INT TERM; kill 0; exit 130' INT TERM
	(for t in "${side[@]}"; do TEE=0 run_tier "$t"; done) < /dev/null &
	side_pid=$!
fi
for t in ${main[@]+"${main[@]}"}; do
	echo "  TIER    $t"
	run_tier "$t"
done
if [ -n "$side_pid" ]; then
	wait "$side_pid"
	for t in "${side[@]}"; do
		echo "  TIER    $t (beside)"
		cat "$results/$t.log"
	done
fi

failed_tiers=0
summary=()
for t in "$@"; do
	[ -f "$results/$t.sum" ] || printf 'FAIL\n  FAIL  %s: no result\n' "$t" > "$results/$t.sum"
	[ "$(head -1 "$results/$t.sum")" = ok ] || failed_tiers=$((failed_tiers + 1))
	summary+=("$(tail -n +2 "$results/$t.sum")")
done

echo
echo "  SUMMARY $# tiers, $failed_tiers failed in $((SECONDS - t_all)) s (each tier's output: $results/TIER.log)"
printf '%s\n' "${summary[@]}"
[ "$failed_tiers" = 0 ]
