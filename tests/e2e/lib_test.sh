#!/usr/bin/env bash
# The e2e check layer's crash scan (tests/e2e/lib.sh) and its Python twin
# (tests/api/console_scan.py) on made-up consoles: no KVM, a second.
#   lib_test.sh [LIB]   (LIB: the layer under test, tests/e2e/lib.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/lib.sh}
t_pass=0
t_fail=0
t_ok() { t_pass=$((t_pass + 1)); echo "ok   $1"; }
t_bad() { t_fail=$((t_fail + 1)); echo "FAIL $1"; sed 's/^/     | /' "$work/out"; }
work=$(mktemp -d)
trap 'exec 7>&- 2> /dev/null; rm -rf "$work"' EXIT
tmp=$work/e2e
mkdir -p "$tmp"
vmm=/bin/false
# shellcheck source=tests/e2e/lib.sh
. "$lib"

# expect DESC WANT_PASS WANT_FAIL GREP...: runs the check just made
# (output in $work/out) and compares the counters' change and the output.
expect() {
	local desc=$1 dp=$2 df=$3 p
	shift 3
	if [ "$((pass - p0))" != "$dp" ] || [ "$((fail - f0))" != "$df" ]; then
		t_bad "$desc: $((pass - p0)) passed, $((fail - f0)) failed; expected $dp, $df"
		return
	fi
	for p in "$@"; do
		grep -qF -- "$p" "$work/out" || { t_bad "$desc: no '$p' in the output"; return; }
	done
	t_ok "$desc"
}
begin() { p0=$pass f0=$fail; }

boot_lines='[    0.000000] Linux version 6.12.117 (vmm@build) #1 SMP PREEMPT_DYNAMIC
[    0.000000] Command line: console=ttyS0 reboot=k panic=-1 noxsave clearcpuid=smap,popcnt,cx16
[    0.101000] Spectre V2 : Mitigation: Retpolines
[    0.120000] x86/bugs: no problem here
[    1.500000] Run /sbin/init as init process
vmm-init: API ready on vsock port 1024'
segv='[   40.123456] cat[65]: segfault at 0 ip 00000000004a4d02 sp 00007ffc0e3e8a40 error 4 in busybox[401000+122000]'

# A clean console passes.
printf '%s\r\n' "$boot_lines" > "$tmp/a.console"
begin; ok "clean boot" > "$work/out"
expect "a clean console: the check passes" 1 0 "ok   clean boot"

# A segfault written during the check fails it, whatever its verdict, and
# the failure quotes the line.
printf '%s\r\n' "$segv" >> "$tmp/a.console"
begin; ok "cat the mark" > "$work/out"
expect "a planted 'segfault at' line: a passing check fails, quoting it" 0 1 \
	"FAIL cat the mark (its own test passed): a guest crashed" "a.console: $segv"

# A crash from before the check began is not this check's.
begin; ok "the next check" > "$work/out"
expect "a crash line from before the check began: not counted again" 1 0 "ok   the next check"

# `A && ok || bad` with a crash: one FAIL, never ok and bad both.
echo "$segv" >> "$tmp/a.console"
begin; { true && ok "chained" || bad "chained (else)"; } > "$work/out"
expect "cond && ok || bad on a crash: exactly one failure" 0 1 "FAIL chained"
grep -q "chained (else)" "$work/out" && t_bad "cond && ok || bad ran bad too"

# Each kind of crash line, each in a check of its own.
while IFS= read -r line; do
	echo "$line" >> "$tmp/a.console"
	begin; ok "kind" > "$work/out"
	expect "fails on: ${line:0:60}" 0 1 "FAIL kind"
done <<'EOF'
[   41.000000] traps: sh[587] general protection fault ip:41b9e4 sp:7ffd2c1e8f30 error:0 in busybox[401000+122000]
[   41.000000] traps: x[9] trap invalid opcode ip:401000 sp:7ffd2c1e8f30 error:0 in x[401000+1000]
[   41.100000] general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP NOPTI
[   41.200000] Oops: 0002 [#1] PREEMPT SMP NOPTI
[   41.300000] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   41.400000] kernel BUG at mm/slub.c:123!
[   41.500000] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
[   41.600000] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [sh:91]
[   41.700000] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1
[   41.800000] rcu: INFO: rcu_preempt self-detected stall on CPU
[   41.800000] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
[   41.900000] INFO: task sync:77 blocked for more than 122 seconds.
[   42.000000] potentially unexpected fatal signal 11.
EOF

# A line still being written is scanned once it is finished.
printf '[   43.000000] sh[585]: segf' >> "$tmp/a.console"
begin; ok "half a line" > "$work/out"
expect "half a crash line: not judged yet" 1 0 "ok   half a line"
printf 'ault at 8 ip 000000000041b9e4 sp 00007ffd error 4 in busybox\n' >> "$tmp/a.console"
begin; ok "the rest of the line" > "$work/out"
expect "the same line finished: fails the check that saw it finished" 0 1 "sh[585]: segfault at 8"

# A failing check shows its commands' exit status and stderr.
run_cmd sh -c 'echo the-output; echo cat: /root/mark.txt: Segmentation fault >&2; exit 139' > "$work/cmd.out" 2> "$work/cmd.err"
st=$?
begin; bad "restore: /root/mark.txt missing" > "$work/out"
expect "a failing check lists its commands, their status and stderr" 0 1 \
	"-> exit status 139" "stderr: cat: /root/mark.txt: Segmentation fault"
if [ "$st" = 139 ] && [ "$(cat "$work/cmd.out")" = the-output ] && grep -q "Segmentation fault" "$work/cmd.err"; then
	t_ok "run_cmd: the command's status, stdout and stderr reach the caller unchanged"
else t_bad "run_cmd: status $st, stdout '$(cat "$work/cmd.out")'"; fi
begin; ok "the next one" > "$work/out"
if grep -q "exit status" "$work/out"; then t_bad "a check shows the previous check's commands"
else t_ok "the command log starts empty for each check"; fi

# A detached sandbox's console.log: found by name; a crash written after
# its folder was removed (the VMM still holds the file) still counts.
mkdir -p "$tmp/state/s1"
exec 7>> "$tmp/state/s1/console.log"
printf '%s\n' "$boot_lines" >&7
begin; ok "s1 up" > "$work/out"
expect "a state folder's console.log: found, clean" 1 0 "ok   s1 up"
# Watching it must not change it: vmm logs reads only single-link files.
if [ "$(stat -c %h "$tmp/state/s1/console.log")" = 1 ]; then
	t_ok "a watched console.log keeps one link (vmm logs still reads it)"
else t_bad "the scan linked console.log: $(stat -c %h "$tmp/state/s1/console.log") links"; fi
echo "$segv" >&7
rm -rf "$tmp/state/s1"
begin; ok "s1 gone" > "$work/out"
expect "a crash in a console whose folder is gone: still caught" 0 1 "s1."
exec 7>&-

# A console named with console_watch (a guest on stdio into a file).
printf '%s\n' "$boot_lines" > "$tmp/1.out"
console_watch "$tmp/1.out"
echo "$segv" >> "$tmp/1.out"
begin; ok "stdio console" > "$work/out"
expect "console_watch FILE: its crash lines count" 0 1 "1.out: $segv"

# A console file truncated and written again is scanned from its start.
: > "$tmp/a.console"
echo "$segv" >> "$tmp/a.console"
begin; ok "rewritten" > "$work/out"
expect "a console truncated and rewritten: scanned from its start" 0 1 "a.console"

# After the last check: a half-written line at the end counts too.
printf 'x[1]: segfault at 0 ip 0' >> "$tmp/a.console"
begin; e2e_finish > "$work/out"
expect "e2e_finish: a crash after the last check fails the run" 0 1 "consoles after the last check"

# The Python twin (tests/api/console_scan.py) on the same cases.
if command -v python3 > /dev/null; then
	if python3 - "$here/../api" "$work/py.console" "$segv" > "$work/out" 2>&1 <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from console_scan import Console
path, segv = sys.argv[2], sys.argv[3]
open(path, "w").write("old: " + segv + "\n")  # before the scanner began
c = Console(path)
assert c.scan() == [], "a line from before the start was counted"
open(path, "a").write("[ 1.0] Command line: console=ttyS0 panic=-1\r\n")
assert c.scan() == [], "a clean line was counted"
open(path, "a").write(segv + "\r\n")
assert c.scan() == [segv], "a planted segfault was missed"
assert c.scan() == [], "the same line was counted twice"
open(path, "a").write("[ 2.0] traps: sh[587] general protection fault ip:41b9e4")
assert c.scan() == [], "half a line was judged"
assert len(c.scan(final=True)) == 1, "the final scan missed half a line"
EOF
	then t_ok "console_scan.py: clean, planted, before-the-start, twice, half a line"
	else t_bad "console_scan.py"; fi
fi

# e2e_input: a part's input unset, marked .skip, missing, or there
inp() { begin; e2e_input part "$@" > "$work/out" 2>&1; echo $? >> "$work/out"; }
inp "" VAR maker.sh file
expect "e2e_input: VAR unset: a skip, 1" 0 0 "skip part: VAR is not set (make e2e makes it with tests/e2e/maker.sh)" 1
echo "no debootstrap here" > "$work/img.skip"
inp "$work/img" VAR maker.sh file
expect "e2e_input: IMAGE.skip: its reason as a skip, 1" 0 0 "skip part: no debootstrap here" 1
inp "$work/none" VAR maker.sh file
expect "e2e_input: a missing image: a FAIL, 1" 0 1 "part: the image $work/none is missing" 1
inp "$work/none" VAR maker.sh
expect "e2e_input: a store (no file check): 0" 0 0 0
echo data > "$work/img2"
inp "$work/img2" VAR maker.sh file
expect "e2e_input: an image: 0" 0 0 0

echo "e2e lib: $t_pass passed, $t_fail failed"
[ "$t_fail" = 0 ]
