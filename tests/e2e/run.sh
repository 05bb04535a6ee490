#!/usr/bin/env bash
# Tier 3: the project's Linux kernel booted to the test init, on 1 and on 2
# vCPUs. Each boot costs 30-50 s where guest ring 0 is emulated, so each
# boot serves many checks.   run.sh VMM KERNEL INITRD
set -u
vmm=$1
kernel=$2
initrd=$3
tmp=$(mktemp -d)
pass=0
fail=0
trap 'exec 3>&- 2>/dev/null; rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { # check DESCRIPTION FILE PATTERN
	if grep -qE -- "$3" "$2"; then ok "$1"; else bad "$1 (no /$3/ in $(basename "$2"))"; fi
}

if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "skip all: /dev/kvm is not usable on this host; the e2e tier needs KVM"
	echo "e2e: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
emulating=0
[ -d /sys/module/kvm_pvm ] && emulating=1
base="console=ttyS0 reboot=k panic=-1 vmm_selftest=1"

# boot CPUS STOP INPUT: boots, waits for it to end; files $tmp/CPUS.{out,err,st}
boot() {
	local cpus=$1 stop=$2 input=$3 pid st start end
	local cmdline="$base vmm_stop=$stop"
	[ -n "$input" ] && cmdline="$cmdline vmm_input=1"
	rm -f "$tmp/in"
	mkfifo "$tmp/in"
	exec 3<> "$tmp/in"
	start=$(date +%s.%N)
	timeout 600 "$vmm" run --kernel "$kernel" --initrd "$initrd" --cpus "$cpus" --mem 256 \
		--cmdline "$cmdline" < "$tmp/in" > "$tmp/$cpus.out" 2> "$tmp/$cpus.err" &
	pid=$!
	if [ -n "$input" ]; then
		for _ in $(seq 1200); do
			grep -q "vmm-selftest: waiting-input" "$tmp/$cpus.out" && break
			kill -0 $pid 2>/dev/null || break
			sleep 0.5
		done
		echo "$input" >&3
	fi
	wait $pid
	st=$?
	end=$(date +%s.%N)
	exec 3>&-
	echo "$st" > "$tmp/$cpus.st"
	echo "     boot on $cpus vCPU(s): status $st after $(echo "$end - $start" | bc) s"
	if [ "$st" = 124 ]; then
		echo "     (timed out; last console lines:)"
		tail -5 "$tmp/$cpus.out" | sed 's/^/     | /'
	fi
}

boot 1 poweroff ""
boot 2 reboot "typed-by-the-host"

for cpus in 1 2; do
	out="$tmp/$cpus.out"
	err="$tmp/$cpus.err"
	tr -d '\r' < "$out" > "$out.txt"
	out="$out.txt"
	check "$cpus vCPU: kernel booted to the test init" "$out" "vmm-sandbox: ready"
	check "$cpus vCPU: guest sees $cpus CPU(s)" "$out" "vmm-selftest: nproc=$cpus\$"
	check "$cpus vCPU: fork and exec work" "$out" "vmm-selftest: fork-exec=ok"
	check "$cpus vCPU: boot marker recorded" "$err" "boot marker: guest ready [0-9.]+ ms"
	check "$cpus vCPU: hypervisor bit visible" "$out" "vmm-selftest: flags=.* hypervisor"
	flags=$(grep "vmm-selftest: flags=" "$out")
	if [ "$emulating" = 1 ]; then
		hidden=1
		for f in popcnt cx16 xsave smap avx; do
			if echo " $flags " | grep -q " $f "; then hidden=0; echo "     flag $f visible"; fi
		done
		if [ "$hidden" = 1 ]; then ok "$cpus vCPU: popcnt, cx16, xsave, smap, avx hidden from the guest"
		else bad "$cpus vCPU: features the emulator lacks are visible"; fi
		check "$cpus vCPU: host parameters appended" "$out" "vmm-selftest: cmdline=.*noxsave clearcpuid=smap,popcnt,cx16"
	fi
	check "$cpus vCPU: test init finished" "$out" "vmm-selftest: done"
done
check "2 vCPU: all CPUs online" "$tmp/2.out.txt" "vmm-selftest: cpus-online=0-1"
check "2 vCPU: console input reaches the guest" "$tmp/2.out.txt" "vmm-selftest: got=typed-by-the-host"
if [ "$(cat "$tmp/1.st")" = 0 ]; then ok "poweroff through the vmm port: status 0"; else bad "poweroff: status $(cat "$tmp/1.st")"; fi
if [ "$(cat "$tmp/2.st")" = 3 ] && grep -q "guest reset the machine (i8042)" "$tmp/2.err"; then
	ok "guest reboot (reboot=k, i8042): status 3"
else bad "reboot: status $(cat "$tmp/2.st")"; fi

if [ "$fail" != 0 ]; then
	for cpus in 1 2; do
		echo "---- console, $cpus vCPU (last 30 lines)"
		tail -30 "$tmp/$cpus.out.txt"
		echo "---- vmm stderr"
		cat "$tmp/$cpus.err"
	done
fi
echo "e2e: $pass passed, $fail failed"
[ "$fail" = 0 ]
