#!/usr/bin/env bash
# Tier 3: the project's Linux kernel booted to the test init, on 1 and on 2
# vCPUs. Each boot costs 30-50 s where guest ring 0 is emulated, so each
# boot serves many checks: boot 1 runs from the initramfs, boot 2 from the
# ext4 root image on virtio-blk with a read-only and a scratch disk, boot 3
# (guest-init on the root image) is snapshotted at API-ready and every
# later sandbox is restored from it (snapshot.sh), boot 4 is `vmm run --
# CMD`, boot 5 has shared drives (virtio-fs) and is snapshotted too (fs.sh).
#   run.sh VMM KERNEL INITRD ROOTFS [ASAN_VMM]
set -u
vmm=$1
kernel=$2
initrd=$3
rootfs=$4
asan_vmm=${5:-$1}
tmp=$(mktemp -d)
pass=0
fail=0
trap 'exec 3>&- 2>/dev/null; rm -rf "$tmp"' EXIT
# ok/bad/check, run_in/run_cmd: every check fails on a guest crash during
# it (tests/e2e/lib.sh).
. "$(dirname "$0")/lib.sh"

if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "skip all: /dev/kvm is not usable on this host; the e2e tier needs KVM"
	echo "e2e: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
emulating=0
[ -d /sys/module/kvm_pvm ] && emulating=1
# VMM_E2E_ONLY="jail net": only those parts (boots lifecycle egress jail
# fcapi fs drives drives-nfs net images devloop workloads builtin inner readme); the gold
# snapshot (snapshot.sh) always, as the parts restore it. For a targeted
# rerun; CI runs them all.
# Each part that runs says when it starts (seconds since the tier began),
# so a CI log shows where the time goes.
e2e_part() {
	[ -z "${VMM_E2E_ONLY:-}" ] || [[ " $VMM_E2E_ONLY " == *" $1 "* ]] || return 1
	echo "---- e2e: $1 at ${SECONDS} s (/tmp: $(df -m --output=used,size /tmp 2> /dev/null | awk 'NR == 2 { print $1 " of " $2 " MiB used" }'))"
}
base="console=ttyS0 reboot=k panic=-1 vmm_selftest=1 rdinit=/sbin/vmm-selftest init=/sbin/vmm-selftest"

# boot CPUS STOP INPUT [VMM ARGS...]: boots, waits for it to end; files
# $tmp/CPUS.{out,err,st}
boot() {
	local cpus=$1 stop=$2 input=$3 pid st start end
	shift 3
	local cmdline="$base vmm_stop=$stop $extra"
	[ -n "$input" ] && cmdline="$cmdline vmm_input=1"
	rm -f "$tmp/in"
	mkfifo "$tmp/in"
	console_watch "$tmp/$cpus.out"
	exec 3<> "$tmp/in"
	start=$(date +%s.%N)
	timeout 600 "$vmm" run --kernel "$kernel" --cpus "$cpus" --mem 256 \
		--cmdline "$cmdline" "$@" < "$tmp/in" > "$tmp/$cpus.out" 2> "$tmp/$cpus.err" &
	pid=$!
	if [ -n "$input" ]; then
		for _ in $(seq 1200); do
			grep -q "vmm-selftest: waiting-input" "$tmp/$cpus.out" && break
			kill -0 $pid 2>/dev/null || break
			sleep 0.5
		done
		echo "$input" >&3
	fi
	# A host-side driver runs once the guest prints its marker.
	if [ -n "$driver" ]; then
		for _ in $(seq 1200); do
			grep -q "$driver_marker" "$tmp/$cpus.out" && break
			kill -0 $pid 2>/dev/null || break
			sleep 0.5
		done
		$driver > "$tmp/$cpus.driver" 2>&1
		echo "$?" > "$tmp/$cpus.driver.st"
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

if e2e_part boots; then
# Disks for boot 2: a copy of the root image, a read-only disk with known
# content, a scratch disk for discard.
cp "$rootfs" "$tmp/root.img"
head -c 1048576 /dev/urandom > "$tmp/ro.img"
ro_md5=$(md5sum < "$tmp/ro.img" | cut -d' ' -f1)
truncate -s 1M "$tmp/scratch.img"
zero_md5=$(head -c 524288 /dev/zero | md5sum | cut -d' ' -f1)

# Boot 1 also serves the vsock tests: vsock_test in the guest, the host
# side in vsock_host.py (64 MiB each way, 100 concurrent streams, guest-
# initiated connections, refused ports).
extra="vmm_vsock=5000"
driver="python3 $(dirname "$0")/vsock_host.py $tmp/v.sock 5000 ${VMM_E2E_VSOCK_MIB:-64}"
driver_marker="vsock_test: listening"
boot 1 poweroff "" --initrd "$initrd" --vsock "cid=3,uds=$tmp/v.sock"
extra="vmm_blk=42"
driver=""
boot 2 reboot "typed-by-the-host" --disk "path=$tmp/root.img,root" \
	--disk "path=$tmp/ro.img,ro,id=e2e-ro-disk" --disk "path=$tmp/scratch.img"

for cpus in 1 2; do
	out="$tmp/$cpus.out"
	err="$tmp/$cpus.err"
	tr -d '\r' < "$out" > "$out.txt"
	out="$out.txt"
	check "$cpus vCPU: kernel booted to the test init" "$out" "vmm-sandbox: ready"
	check "$cpus vCPU: guest sees $cpus CPU(s)" "$out" "vmm-selftest: nproc=$cpus\$"
	check "$cpus vCPU: fork and exec work" "$out" "vmm-selftest: fork-exec=ok"
	# CONFIG_HIGH_RES_TIMERS: a guest's sleeps are not rounded up to a tick.
	check "$cpus vCPU: high-resolution timers (1 ns clock event resolution)" "$out" "vmm-selftest: timer-resolution=1 nsecs"
	check "$cpus vCPU: boot marker recorded" "$err" "boot marker: guest ready [0-9.]+ ms"
	check "$cpus vCPU: hypervisor bit visible" "$out" "vmm-selftest: flags=.* hypervisor"
	flags=$(grep "vmm-selftest: flags=" "$out")
	if [ "$emulating" = 1 ]; then
		hidden=1
		for f in popcnt cx16 xsave smap avx erms fsrm; do
			if echo " $flags " | grep -q " $f "; then hidden=0; echo "     flag $f visible"; fi
		done
		if [ "$hidden" = 1 ]; then ok "$cpus vCPU: popcnt, cx16, xsave, smap, avx, erms, fsrm hidden from the guest"
		else bad "$cpus vCPU: features the emulator lacks are visible"; fi
		check "$cpus vCPU: host parameters appended" "$out" "vmm-selftest: cmdline=.*noxsave clearcpuid=smap,popcnt,cx16,erms,fsrm clocksource=kvm-clock"
	fi
	check "$cpus vCPU: test init finished" "$out" "vmm-selftest: done"
done
check "2 vCPU: all CPUs online" "$tmp/2.out.txt" "vmm-selftest: cpus-online=0-1"
check "2 vCPU: console input reaches the guest" "$tmp/2.out.txt" "vmm-selftest: got=typed-by-the-host"
fi
# Boot 3: guest-init as PID 1 (the root image's /sbin/init) serving the
# sandbox API over vsock, snapshotted at API-ready; the snapshot tests and
# the API suite run on clones restored from it (tests/e2e/snapshot.sh).
echo "---- e2e: gold snapshot at ${SECONDS} s"
. "$(dirname "$0")/snapshot.sh"
! e2e_part lifecycle || . "$(dirname "$0")/lifecycle.sh"
# The egress proxy on clones of the same gold snapshot (tests/e2e/egress.sh).
! e2e_part egress || . "$(dirname "$0")/egress.sh"
# The jailer on clones of the gold snapshot (tests/e2e/jail.sh).
! e2e_part jail || . "$(dirname "$0")/jail.sh"
# The Firecracker-compatible HTTP API on the control socket (tests/e2e/fc_api.sh).
! e2e_part fcapi || . "$(dirname "$0")/fc_api.sh"
# Boot 5: a sandbox with shared drives (virtio-fs), snapshotted at
# API-ready; the checks run in clones restored from it (tests/e2e/fs.sh).
! e2e_part fs || . "$(dirname "$0")/fs.sh"
# Boots: drives, two sandboxes on one named drive (tests/e2e/drives.sh).
! e2e_part drives || . "$(dirname "$0")/drives.sh"
# A drive on NFSv4, exported and mounted on this machine, in a mount
# namespace of its own (tests/e2e/drives_nfs.sh): its checks counted here.
if e2e_part drives-nfs; then
	while IFS= read -r line; do
		case $line in
		"ok   "*) ok "${line#ok   }" ;;
		"FAIL "*) bad "${line#FAIL }" ;;
		"e2e drives-nfs:"*) nfs_end=$line ;;
		*) echo "$line" ;;
		esac
	done < <(timeout -k 60 1800 bash "$(dirname "$0")/drives_nfs.sh" "$vmm" "$kernel" "$rootfs" 2>&1)
	[ -n "${nfs_end:-}" ] || bad "drives-nfs: ended early (timed out or killed)"
fi
# Boot 6: virtio-net in a network namespace (tests/e2e/net.sh).
! e2e_part net || . "$(dirname "$0")/net.sh"
# Boots 7-9: sandbox images, cold and warm (tests/e2e/images.sh).
! e2e_part images || . "$(dirname "$0")/images.sh"
# Boots 10-11: the base image as an agent's work loop uses it (tests/e2e/devloop.sh).
! e2e_part devloop || . "$(dirname "$0")/devloop.sh"
# Boot 12: what agents run (namespaces, cgroups, overlayfs, seccomp,
# io_uring, netfilter...) in a Debian sandbox (tests/e2e/workloads.sh).
! e2e_part workloads || . "$(dirname "$0")/workloads.sh"
# Boots 13-14: a developer's loop in the built-in python and node images
# (tests/e2e/builtin.sh; made on the host by builtin_images.sh).
! e2e_part builtin || . "$(dirname "$0")/builtin.sh"
# Boot 15: Podman and headless Chromium inside a sandbox (tests/e2e/inner.sh;
# the image made on the host by inner_image.sh).
! e2e_part inner || . "$(dirname "$0")/inner.sh"
# The README's and docs/cli.md's examples as an operator types them, the
# build's artefacts byte-identical afterwards (tests/e2e/readme_replay.sh,
# its own state and image directories).
if e2e_part readme; then
bash "$(dirname "$0")/readme_replay.sh" "$(dirname "$vmm")" > "$tmp/readme.log" 2>&1
while IFS= read -r line; do
	case $line in
	"ok   "*) ok "${line#ok   }" ;;
	"FAIL "*) bad "${line#FAIL }" ;;
	skip*) echo "$line" ;;
	esac
done < "$tmp/readme.log"
grep -q "^readme replay: \|^skip" "$tmp/readme.log" || bad "readme replay ended early: $(tail -3 "$tmp/readme.log")"
fi

if e2e_part boots; then
# Boot 4: vmm run -- CMD, the one-shot form.
timeout 600 "$vmm" run --kernel "$kernel" --initrd "$initrd" --mem 256 --console "file:$tmp/4.console" \
	-- sh -c 'echo hello from $(hostname); exit 3' < /dev/null > "$tmp/4.out" 2> "$tmp/4.err"
st4=$?
if [ "$st4" = 3 ] && [ "$(cat "$tmp/4.out")" = "hello from sandbox" ]; then
	ok "vmm run -- CMD: output, exit status 3 propagated"
else bad "vmm run -- CMD: status $st4, output '$(head -c 200 "$tmp/4.out")' $(tail -3 "$tmp/4.err")"; fi

# virtio-vsock, from boot 1.
if [ -f "$tmp/1.driver" ]; then
	sed 's/^/     | /' "$tmp/1.driver"
	if [ "$(cat "$tmp/1.driver.st")" = 0 ] && grep -q "vsock: [1-9][0-9]* passed, 0 failed" "$tmp/1.driver"; then
		ok "vsock: $(grep -c '^ok' "$tmp/1.driver") host/guest checks (transfers, concurrency, refusals)"
	else bad "vsock: host-side checks failed"; fi
else bad "vsock: the guest's vsock_test never listened"; fi
check "vsock: the guest's server ended cleanly" "$tmp/1.out.txt" "vmm-selftest: vsock-done=0"
if [ ! -e "$tmp/v.sock" ]; then ok "vsock: the host socket is removed when the VM stops"
else bad "vsock: $tmp/v.sock left behind"; fi

# virtio-blk, from boot 2.
out2="$tmp/2.out.txt"
check "blk: booted from the ext4 root on /dev/vda" "$out2" "vmm-selftest: root=/dev/(root|vda)"
check "blk: the guest wrote its root disk" "$out2" "vmm-selftest: root-write=vmm-e2e-content-42"
if command -v debugfs > /dev/null && [ "$(debugfs -R "cat /root/e2e.txt" "$tmp/root.img" 2>/dev/null)" = "vmm-e2e-content-42" ]; then
	ok "blk: the file is in the image on the host"
else bad "blk: /root/e2e.txt not found in the image"; fi
if e2fsck -fn "$tmp/root.img" > "$tmp/fsck.log" 2>&1; then
	ok "blk: e2fsck -fn is clean after the guest stopped"
else bad "blk: e2fsck found problems: $(tail -3 "$tmp/fsck.log")"; fi
check "blk: writes to a read-only disk fail in the guest" "$out2" "vmm-selftest: ro-write=refused"
check "blk: the guest reads the read-only disk's content" "$out2" "vmm-selftest: vdb-md5=$ro_md5"
if [ "$(md5sum < "$tmp/ro.img" | cut -d' ' -f1)" = "$ro_md5" ]; then ok "blk: the read-only image is unchanged"
else bad "blk: the read-only image changed"; fi
check "blk: GET_ID serial reaches the guest" "$out2" "vmm-selftest: vdb-serial=e2e-ro-disk"
check "blk: discard accepted" "$out2" "vmm-selftest: discard=ok"
check "blk: discarded range reads back as zeros" "$out2" "vmm-selftest: vdc-head-md5=$zero_md5"
if [ "$(tail -c 524288 "$tmp/scratch.img" | md5sum | cut -d' ' -f1)" = "$(grep -o "vdc-tail-md5=[0-9a-f]*" "$out2" | cut -d= -f2)" ]; then
	ok "blk: the scratch disk's data landed in the image"
else bad "blk: scratch image content differs from what the guest wrote"; fi
if [ "$(stat -c %b "$tmp/scratch.img")" -le 1100 ]; then
	ok "blk: discard punched a hole in the image ($(stat -c %b "$tmp/scratch.img") blocks)"
else bad "blk: scratch image not sparse after discard"; fi

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
fi # boots
e2e_finish
echo "e2e: $pass passed, $fail failed ($SECONDS s)"
[ "$fail" = 0 ]
