#!/usr/bin/env bash
# Standby end to end (docs/snapshot.md, "Standby"): one gold boot, then
# restored clones (-d) that are suspended in place and woken.
#   standby.sh VMM KERNEL ROOTFS
# Checks: a counting background process survives suspend/resume with its
# PID unchanged and its count going on; a file written before is there
# after; the VMM exits and the sandbox is `standby`; auto-standby after a
# short --idle-timeout and vmm exec wakes it; two concurrent execs share
# one restore; a connection to a published port wakes it; the second
# suspend (after a resume) writes only the dirty pages, far fewer bytes
# than the first (a booted sandbox); a clone's suspends write only the
# pages that differ from the snapshot it came from, far fewer than that
# snapshot's memory, and it wakes with that snapshot moved away (its base
# is linked into the sandbox's folder); kill -9 of the VMM during an
# in-place diff write (at a step
# before its commit, and at one after), then resume: after the commit the
# new state, its counter going on; before it nothing to resume (the state
# the sandbox last resumed from was consumed then: never restored on the
# disks that moved on since), and the resume refuses.
set -u
vmm=$1
kernel=$2
rootfs=$3
tmp=$(mktemp -d)
pass=0
fail=0
export VMM_STATE_DIR=$tmp/state
cleanup() {
	local n
	for n in $(VMM_STATE_DIR=$tmp/state "$vmm" ls -q 2> /dev/null); do
		"$vmm" rm -f "$n" > /dev/null 2>&1
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "skip all: /dev/kvm is not usable on this host"
	echo "standby: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
x() { timeout 120 "$vmm" exec "$@" < /dev/null; }
state() { "$vmm" ls --format '{{.Name}} {{.State}}' | awk -v n="$1" '$1 == n { print $2 }'; }
now_ms() { date +%s%3N; }

# ---- the gold snapshot ------------------------------------------------------
cp "$rootfs" "$tmp/gold-root.img"
t0=$(now_ms)
if ! timeout 900 "$vmm" run -d --name gold --kernel "$kernel" --mem 256 \
	--disk "path=$tmp/gold-root.img,root" > /dev/null 2> "$tmp/gold.err"; then
	echo "gold boot failed: $(tail -3 "$tmp/gold.err")"
	exit 1
fi
echo "     gold: API ready after $(( $(now_ms) - t0 )) ms"
timeout 300 "$vmm" snapshot --stop gold "$tmp/gold" > /dev/null 2>&1 || { echo "gold snapshot failed"; exit 1; }
for _ in $(seq 100); do [ -e "$VMM_STATE_DIR/gold" ] || break; sleep 0.1; done
"$vmm" rm -f gold > /dev/null 2>&1

# ---- suspend / resume -------------------------------------------------------
timeout 600 "$vmm" restore -d "$tmp/gold" --name sa > /dev/null 2> "$tmp/sa.err" || bad "restore sa: $(tail -2 "$tmp/sa.err")"
x sa sh -c 'echo before > /root/mark.txt; sync
	(i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done) < /dev/null > /dev/null 2>&1 &
	echo $! > /tmp/counter.pid; sleep 1' > /dev/null 2>&1
pid0=$(x sa cat /tmp/counter.pid)
c0=$(x sa cat /tmp/count)
vmm_pid=$(cat "$VMM_STATE_DIR/sa/pid" 2> /dev/null)
t0=$(now_ms)
if timeout 300 "$vmm" suspend sa > "$tmp/susp.out" 2>&1; then
	ok "suspend: done in $(( $(now_ms) - t0 )) ms, memory $(( $(stat -c %b "$VMM_STATE_DIR/sa/standby/memory") * 512 >> 20 )) MiB on disk"
else bad "suspend: $(cat "$tmp/susp.out")"; fi
if [ "$(state sa)" = standby ] && [ -n "$vmm_pid" ] && ! kill -0 "$vmm_pid" 2> /dev/null &&
	[ -e "$VMM_STATE_DIR/sa/token" ]; then
	ok "suspend: ls says standby, its VMM ($vmm_pid) is gone"
else bad "suspend: state '$(state sa)', VMM $vmm_pid alive: $(kill -0 "$vmm_pid" 2>&1 && echo yes)"; fi
# No published port and no time to live: nothing of it runs on the host.
held=$(ps -eo pid=,args= | grep -F -e "__keeper sa " -e "$VMM_STATE_DIR/sa" | grep -v grep)
if [ -z "$held" ]; then ok "suspend: a sandbox on standby (no ports, no TTL) holds no process"
else bad "suspend: processes held on standby: $held"; fi
t0=$(now_ms)
if timeout 300 "$vmm" resume sa > "$tmp/res.out" 2>&1 && [ "$(state sa)" = running ]; then
	ok "resume: running again after $(( $(now_ms) - t0 )) ms"
else bad "resume: $(cat "$tmp/res.out"; tail -3 "$VMM_STATE_DIR/sa/vmm.log")"; fi
pid1=$(x sa cat /tmp/counter.pid)
c1=$(x sa cat /tmp/count)
sleep 1
c2=$(x sa cat /tmp/count)
if [ -n "$pid0" ] && [ "$pid0" = "$pid1" ] && x sa kill -0 "$pid1" && [ -n "$c1" ] &&
	[ "$c1" -ge "$c0" ] && [ "$c2" -gt "$c1" ]; then
	ok "resume: the counter (pid $pid1) goes on: $c0 before, $c1, $c2 after"
else bad "resume: counter pid $pid0 -> $pid1, count $c0 -> $c1 -> $c2"; fi
if [ "$(x sa cat /root/mark.txt)" = before ]; then ok "resume: a file written before is there after"
else bad "resume: /root/mark.txt lost"; fi
# A second suspend on the same disks, then exec wakes it.
if timeout 300 "$vmm" suspend sa > /dev/null 2>&1 && [ "$(state sa)" = standby ] &&
	[ "$(x sa cat /root/mark.txt)" = before ] && [ "$(state sa)" = running ]; then
	ok "second suspend, and vmm exec wakes it transparently"
else bad "second suspend / exec wake: state $(state sa)"; fi

# ---- what each suspend writes ------------------------------------------------
# The VMM's log line per suspend: "suspended: N ms paused, K KiB written,
# full (why)" or "..., diff of M pages".
suspends() { grep -o 'suspended: [0-9]* ms paused, [0-9]* KiB written, [a-z]*[ a-z]*[0-9]*' "$VMM_STATE_DIR/$1/vmm.log"; }
kib() { suspends "$1" | sed -n "${2}p" | sed 's/.* \([0-9]*\) KiB written.*/\1/'; }
# A clone: both suspends are diffs on the gold snapshot it maps.
l1=$(suspends sa | sed -n 1p)
l2=$(suspends sa | sed -n 2p)
k1=$(kib sa 1)
k2=$(kib sa 2)
gold_kib=$(( $(stat -c %b "$tmp/gold/memory") / 2 ))
echo "     clone, 1st suspend: $l1"
echo "     clone, 2nd suspend: $l2 (the gold snapshot's memory: $gold_kib KiB)"
case "$l1/$l2" in
*diff\ of*/*diff\ of*)
	if [ -n "$k1" ] && [ -n "$k2" ] && [ $((k1 * 4)) -lt "$gold_kib" ] && [ $((k2 * 4)) -lt "$gold_kib" ]; then
		ok "a clone's suspends write only what differs from its snapshot: $k1 and $k2 KiB against $gold_kib KiB"
	else bad "a clone's suspends wrote $k1 and $k2 KiB, its snapshot's memory is $gold_kib KiB: not far fewer"; fi ;;
*) bad "a clone's suspend kinds: 1st '$l1', 2nd '$l2' (want two diffs on its snapshot)" ;;
esac
# The snapshot it came from moved away: the clone on standby still wakes.
if timeout 300 "$vmm" suspend sa > /dev/null 2>&1 && ls -d "$VMM_STATE_DIR"/sa/standby.base-* > /dev/null 2>&1 &&
	mv "$tmp/gold" "$tmp/gold.away"; then
	got=$(x sa cat /root/mark.txt)
	mv "$tmp/gold.away" "$tmp/gold"
	if [ "$got" = before ] && [ "$(state sa)" = running ]; then
		ok "a clone on standby wakes with its snapshot moved away (linked into its folder)"
	else bad "wake without the gold snapshot: got '$got', state $(state sa): $(tail -3 "$VMM_STATE_DIR/sa/vmm.log")"; fi
else bad "3rd suspend of the clone: state $(state sa), $(ls "$VMM_STATE_DIR/sa" | tr '\n' ' ')"; fi
# A booted sandbox: the full state first, then the in-place diff of the
# pages dirtied since its resume.
boot_sandbox() { # NAME [MIB]: booted from a copy of the root image
	cp "$rootfs" "$tmp/$1-root.img"
	timeout 900 "$vmm" run -d --name "$1" --kernel "$kernel" --mem "${2:-256}" \
		--disk "path=$tmp/$1-root.img,root" > /dev/null 2> "$tmp/$1.err" || bad "boot $1: $(tail -2 "$tmp/$1.err")"
}
# Suspended as soon as it answers, the guest's first free page reporting
# pass (2 s after the balloon driver loads) may not have ended: it goes
# on after the resume, and the 5 s before the 2nd suspend let it. Its
# buffers are free ranges the host discards, never writes: the 2nd
# suspend wrote all of them (455 MB of a 256 MiB guest) while the
# reporting queue marked them dirty.
boot_sandbox sf
x sf true
timeout 300 "$vmm" suspend sf > /dev/null 2>&1 || bad "sf: 1st suspend failed"
x sf true
sleep 5
timeout 300 "$vmm" suspend sf > /dev/null 2>&1 || bad "sf: 2nd suspend failed"
l1=$(suspends sf | sed -n 1p)
l2=$(suspends sf | sed -n 2p)
k1=$(kib sf 1)
k2=$(kib sf 2)
echo "     booted, 1st suspend: $l1"
echo "     booted, 2nd suspend: $l2"
case "$l1/$l2" in
*full*/*diff\ of*)
	if [ -n "$k1" ] && [ -n "$k2" ] && [ $((k2 * 4)) -lt "$k1" ]; then
		ok "the 2nd suspend is an in-place diff: $k2 KiB written against $k1 KiB for the 1st (full)"
	else bad "the 2nd suspend wrote $k2 KiB, the 1st $k1 KiB: not far fewer"; fi ;;
*) bad "suspend kinds: 1st '$l1', 2nd '$l2' (want full, then diff)" ;;
esac
"$vmm" rm -f sf > /dev/null 2>&1

# ---- memory the guest frees goes back to the host ---------------------------
# Every sandbox has a balloon asking for nothing, with free page reporting
# (vmm run's default): 400 MiB written to /dev/shm and removed come back.
boot_sandbox sm 640
rss_mib() { awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$(cat "$VMM_STATE_DIR/$1/pid")/status" 2> /dev/null; }
# (/dev/shm holds half the RAM by default: room for 400 MiB first)
x sm sh -c 'mount -o remount,size=480m /dev/shm; dd if=/dev/zero of=/dev/shm/big bs=1M count=400 2> /dev/null; sync' > /dev/null 2>&1
r1=$(rss_mib sm)
x sm rm /dev/shm/big
t0=$(now_ms)
r2=$r1
for _ in $(seq 120); do
	r2=$(rss_mib sm)
	[ -n "$r1" ] && [ -n "$r2" ] && [ $((r1 - r2)) -ge 300 ] && break
	sleep 0.5
done
if [ -n "$r1" ] && [ -n "$r2" ] && [ "$r1" -ge 400 ] && [ $((r1 - r2)) -ge 300 ]; then
	ok "the guest freed 400 MiB: the VMM's RSS fell from $r1 to $r2 MiB in $(( $(now_ms) - t0 )) ms (free page reporting, on by default)"
else bad "free page reporting: RSS $r1 MiB with 400 MiB in /dev/shm, $r2 MiB after it was removed"; fi
"$vmm" rm -f sm > /dev/null 2>&1

# ---- kill -9 during the in-place diff write, then resume --------------------
# (booted sandboxes: a clone's suspends are diffs on its snapshot instead)
# VMM_TEST_STANDBY_KILL=N: the VMM raises SIGKILL right after in-place step
# N (vmm/base/snapfmt_diff.h: 1 state.new written, not committed; 3 committed, half
# the pages in the memory file). The variable reaches the VMM through the
# restore, the keeper and the resume alike; only a diff write reads it.
kill_case() { # NAME STEP
	local n=$1 step=$2 c0 pid0 c1 c2 pid1 restores
	export VMM_TEST_STANDBY_KILL=$step
	boot_sandbox "$n"
	x "$n" sh -c '(i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done) < /dev/null > /dev/null 2>&1 &
		echo $! > /tmp/counter.pid; sleep 1' > /dev/null 2>&1
	timeout 300 "$vmm" suspend "$n" > /dev/null 2>&1 || bad "$n: 1st suspend failed"
	timeout 300 "$vmm" resume "$n" > /dev/null 2>&1 || bad "$n: resume failed"
	pid0=$(x "$n" cat /tmp/counter.pid)
	c0=$(x "$n" cat /tmp/count)
	vpid=$(cat "$VMM_STATE_DIR/$n/pid" 2> /dev/null)
	restores=$(grep -c "sandbox $n restored" "$VMM_STATE_DIR/$n/vmm.log")
	timeout 300 "$vmm" suspend "$n" > "$tmp/$n.susp" 2>&1
	for _ in $(seq 100); do kill -0 "$vpid" 2> /dev/null || break; sleep 0.1; done
	unset VMM_TEST_STANDBY_KILL
	if grep -q "VMM_TEST_STANDBY_KILL: SIGKILL after in-place step $step" "$VMM_STATE_DIR/$n/vmm.log" &&
		! kill -0 "$vpid" 2> /dev/null; then
		ok "kill -9 after in-place step $step: the VMM ($vpid) died in the diff write"
	else bad "kill at step $step: not hit ($(cat "$tmp/$n.susp"); $(tail -2 "$VMM_STATE_DIR/$n/vmm.log"))"; return; fi
	for _ in $(seq 50); do [ "$(state "$n")" = running ] || break; sleep 0.1; done
	if [ "$step" -ge 2 ]; then # committed: the new state
		if [ "$(state "$n")" = standby ] && timeout 300 "$vmm" resume "$n" > "$tmp/$n.res" 2>&1; then
			pid1=$(x "$n" cat /tmp/counter.pid)
			c1=$(x "$n" cat /tmp/count)
			sleep 1
			c2=$(x "$n" cat /tmp/count)
			if [ -n "$pid0" ] && [ "$pid0" = "$pid1" ] && [ -n "$c1" ] && [ "$c1" -ge "$c0" ] &&
				[ -n "$c2" ] && [ "$c2" -gt "$c1" ]; then
				ok "kill -9 after the commit (step $step): resume gives the new state, counter $c0 -> $c1 -> $c2, pid $pid1"
			else bad "kill after commit: counter pid $pid0 -> $pid1, count $c0 -> $c1 -> $c2"; fi
		else bad "kill after commit: state $(state "$n"), resume: $(cat "$tmp/$n.res" 2> /dev/null)"; fi
	else # not committed: nothing to resume, and nothing resumed
		timeout 300 "$vmm" resume "$n" > "$tmp/$n.res" 2>&1
		rs=$?
		if [ "$(state "$n")" != standby ] && [ "$rs" != 0 ] &&
			[ "$(grep -c "sandbox $n restored" "$VMM_STATE_DIR/$n/vmm.log")" = "$restores" ] &&
			[ -e "$VMM_STATE_DIR/$n/standby/state.consumed" ]; then
			ok "kill -9 before the commit (step $step): no state to resume ($(state "$n")), resume refused: $(head -1 "$tmp/$n.res")"
		else bad "kill before commit: state $(state "$n"), resume status $rs: $(cat "$tmp/$n.res")"; fi
	fi
	"$vmm" rm -f "$n" > /dev/null 2>&1
}
kill_case sk 1
kill_case sl 3

# ---- auto-standby, concurrent wakers ---------------------------------------
timeout 600 "$vmm" restore -d "$tmp/gold" --name sb --idle-timeout 3s > /dev/null 2> "$tmp/sb.err" ||
	bad "restore sb: $(tail -2 "$tmp/sb.err")"
for _ in $(seq 300); do [ "$(state sb)" = standby ] && break; sleep 0.2; done
if [ "$(state sb)" = standby ]; then ok "--idle-timeout 3s: on standby by itself"
else bad "--idle-timeout: still $(state sb): $(tail -3 "$VMM_STATE_DIR/sb/vmm.log")"; fi
x sb echo one > "$tmp/w1" 2> "$tmp/w1.err" &
p1=$!
x sb echo two > "$tmp/w2" 2> "$tmp/w2.err" &
p2=$!
wait $p1; s1=$?
wait $p2; s2=$?
restores=$(grep -c "sandbox sb restored" "$VMM_STATE_DIR/sb/vmm.log")
if [ "$s1" = 0 ] && [ "$s2" = 0 ] && [ "$(cat "$tmp/w1")" = one ] && [ "$(cat "$tmp/w2")" = two ] &&
	[ "$restores" = 2 ]; then # the clone's own restore, then one wake
	ok "two concurrent execs wake it with one restore"
else bad "concurrent execs: $s1 '$(cat "$tmp/w1")' / $s2 '$(cat "$tmp/w2")', $((restores - 1)) wake restores;" \
	"stderr: $(tail -2 "$tmp/w1.err" | tr '\n' ' ') / $(tail -2 "$tmp/w2.err" | tr '\n' ' ');" \
	"log: $(grep -E 'wak|restor|standby|error' "$VMM_STATE_DIR/sb/vmm.log" | tail -4 | tr '\n' ' ')"; fi

# ---- a published port wakes it ---------------------------------------------
port=$((20000 + RANDOM % 20000))
timeout 600 "$vmm" restore -d "$tmp/gold" --name sc --publish "127.0.0.1:$port:8080" > /dev/null 2> "$tmp/sc.err" ||
	bad "restore sc: $(tail -2 "$tmp/sc.err")"
# busybox httpd daemonizes: it survives the exec, and the standby.
x sc sh -c 'mkdir -p /root/www && echo hello > /root/www/index.html && httpd -p 8080 -h /root/www' > /dev/null 2>&1
get_port() { # the page through the published port (the first request wakes it)
	timeout 150 python3 -c "
import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$port/', timeout=120).read().decode().strip())" 2>&1 | tail -1
}
# The port works while it runs (else a failed wake below says nothing).
pre=$(get_port)
if [ "$pre" = hello ]; then ok "the published port answers while the sandbox runs"
else bad "published port before standby: got '$pre'"; fi
timeout 300 "$vmm" suspend sc > /dev/null 2>&1
if [ "$(state sc)" = standby ]; then
	got=$(get_port)
	if [ "$got" = hello ] && [ "$(state sc)" = running ]; then
		ok "a connection to a published port wakes it (got '$got')"
	else bad "published port wake: got '$got', state $(state sc): $(tail -3 "$VMM_STATE_DIR/sc/vmm.log"); keepers: $(ps -eo pid,args | grep -c '[_]_keeper'); folder: $(ls "$VMM_STATE_DIR/sc" | tr '\n' ' ')"; fi
else bad "published port: suspend failed, state $(state sc)"; fi

echo "standby: $pass passed, $fail failed"
[ "$fail" = 0 ]
