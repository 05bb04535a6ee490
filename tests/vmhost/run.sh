#!/usr/bin/env bash
# Runs a command inside a QEMU TCG virtual machine whose emulated CPU has
# AMD SVM, so that it has a /dev/kvm even where this host has none (a host
# that is itself a guest without nested KVM). The VM runs Debian 12's
# kernel, sees the host's / read-only (virtio-9p) and chroots into it, so
# the command runs the host's binaries at the same paths. See README.md.
#   tests/vmhost/run.sh [-w DIR]... CMD [ARG...]
#   tests/vmhost/run.sh --check     exit 0 if the VM can be used here; says
#                                   which kernel it boots (kernel.pin)
#   tests/vmhost/run.sh --prepare   fetch the kernel, build the initramfs
# Exit status: the command's, or 125 if the VM itself failed.
# Environment: VMHOST_MEM (MiB, 4096), VMHOST_CPUS (1: two froze the VM's
# kernel, README.md), VMHOST_TCG_THREAD (multi), VMHOST_TIMEOUT
# (seconds, 3600), VMHOST_BOOT_TIMEOUT (300) and VMHOST_FREEZE_TIMEOUT
# (180): a VM that does not reach the command or stops its heartbeat,
# started again VMHOST_RETRIES times (1), VMHOST_CACHE
# ($VMM_CACHE/vmhost, VMM_CACHE as vmm picks it: ~/.cache/vmm/vmhost),
# VMHOST_SLOTS (VMs at once: cores / VMHOST_CPUS), VMHOST_LOCK
# (VMHOST_CACHE/vmhost.lock, a file .N per slot), VMHOST_VERBOSE=1
# (the VM's kernel log on stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${VMHOST_CACHE:-${VMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmm}/vmhost}
qemu=qemu-system-x86_64

die() { echo "vmhost: $*" >&2; exit 125; }

# The kernel: the Debian package kernel.pin names, downloaded, checked
# against its SHA-256 and extracted into the cache (never installed);
# delete $cache/kernel-VERSION to fetch it again.
# shellcheck source=kernel.pin
. "$here/kernel.pin"
kname="$VMHOST_KERNEL_PKG $VMHOST_KERNEL_VERSION"
find_kernel() {
	local d=$cache/kernel-$VMHOST_KERNEL_VERSION
	[ -f "$d/.done" ] && [ "$(cat "$d/.sha256" 2> /dev/null)" = "$VMHOST_KERNEL_SHA256" ] && echo "$d"
}
# Into the current directory: apt's own download (from the configured
# mirror, signature-checked), else the archive's pool, else
# snapshot.debian.org (for a version the archive has dropped).
download_kernel() {
	local sudo= url deb=${VMHOST_KERNEL_POOL##*/}
	[ "$(id -u)" = 0 ] || sudo=sudo
	apt-get download -q "$VMHOST_KERNEL_PKG=$VMHOST_KERNEL_VERSION" > /dev/null 2>&1 && return 0
	# Stale package lists name versions the mirror no longer has.
	$sudo apt-get update -q > /dev/null 2>&1
	apt-get download -q "$VMHOST_KERNEL_PKG=$VMHOST_KERNEL_VERSION" > /dev/null 2>&1 && return 0
	for url in "http://deb.debian.org/$VMHOST_KERNEL_POOL" \
		"https://snapshot.debian.org/archive/${VMHOST_KERNEL_POOL%%/*}/$VMHOST_KERNEL_SNAPSHOT/${VMHOST_KERNEL_POOL#*/}"; do
		echo "  VMHOST  apt has no $kname; trying $url" >&2
		curl -fsSL --retry 2 -o "$deb" "$url" && return 0
		rm -f "$deb"
	done
	return 1
}
fetch_kernel() {
	local tmp kv sum
	tmp=$(mktemp -d "$cache/fetch.XXXXXX")
	echo "  VMHOST  fetching $kname (tests/vmhost/kernel.pin) into $cache" >&2
	(cd "$tmp" && download_kernel) || { rm -rf "$tmp"; die "cannot download the kernel package $kname"; }
	sum=$(sha256sum "$tmp"/*.deb | cut -d' ' -f1)
	[ "$sum" = "$VMHOST_KERNEL_SHA256" ] ||
		{ rm -rf "$tmp"; die "$kname: SHA-256 $sum, kernel.pin says $VMHOST_KERNEL_SHA256: refused"; }
	dpkg -x "$tmp"/*.deb "$tmp/root" || { rm -rf "$tmp"; die "dpkg -x failed"; }
	kv=$(ls "$tmp/root/lib/modules")
	# Nothing the VM has or the tests use (some 200 MB).
	(cd "$tmp/root/lib/modules/$kv/kernel" && rm -rf sound drivers/{gpu,media,infiniband,usb,iio,staging,hwmon,hid,scsi,net/wireless})
	busybox depmod -b "$tmp/root" "$kv" || { rm -rf "$tmp"; die "depmod failed"; }
	rm -f "$tmp"/*.deb
	rm -rf "$cache/kernel-$VMHOST_KERNEL_VERSION"
	chmod 755 "$tmp"
	echo "$sum" > "$tmp/.sha256"
	mv "$tmp" "$cache/kernel-$VMHOST_KERNEL_VERSION"
	touch "$cache/kernel-$VMHOST_KERNEL_VERSION/.done"
}

# The initramfs: static busybox, the init script and the modules that mount
# 9p; keyed by the kernel, busybox and this builder.
build_initramfs() {
	local kdir=$1 kv key out tmp m
	kv=$(ls "$kdir/root/lib/modules")
	key=$( (echo "$kdir"; cat "$here/init"; sed -n '/^build_initramfs/,/^}/p' "$0"; busybox 2>&1 | head -1) | sha256sum | cut -c1-16)
	out=$cache/initramfs-$key.cpio
	if [ ! -f "$out" ]; then
		tmp=$(mktemp -d "$cache/initramfs.XXXXXX")
		mkdir -p "$tmp"/{bin,dev,proc,sys,newroot,lib/modules/"$kv"}
		cp /bin/busybox "$tmp/bin/"
		for a in $(busybox --list); do [ "$a" = busybox ] || ln -s busybox "$tmp/bin/$a"; done
		cp "$here/init" "$tmp/init"
		for m in $(grep -E '^kernel/(fs/9p/9p|net/9p/9pnet_virtio|drivers/virtio/virtio_pci)\.ko:' \
			"$kdir/root/lib/modules/$kv/modules.dep" | tr -d :); do
			mkdir -p "$tmp/lib/modules/$kv/$(dirname "$m")"
			cp "$kdir/root/lib/modules/$kv/$m" "$tmp/lib/modules/$kv/$m"
		done
		busybox depmod -b "$tmp" "$kv" &&
			(cd "$tmp" && find . | busybox cpio -o -H newc 2> /dev/null) > "$out.tmp" ||
			{ rm -rf "$tmp" "$out.tmp"; die "cannot build the initramfs"; }
		rm -rf "$tmp"
		mv "$out.tmp" "$out"
	fi
	echo "$out"
}

# Says which kernel the VM boots and whether it is in the cache yet.
check() {
	command -v $qemu > /dev/null || { echo "no $qemu (apt-get install qemu-system-x86)"; return 1; }
	command -v busybox > /dev/null || { echo "no busybox (apt-get install busybox-static)"; return 1; }
	if find_kernel > /dev/null; then
		echo "kernel: Debian $kname (tests/vmhost/kernel.pin), in $cache"
	else
		command -v apt-get > /dev/null || command -v curl > /dev/null ||
			{ echo "no kernel in $cache, and neither apt-get nor curl to fetch $kname"; return 1; }
		echo "kernel: Debian $kname (tests/vmhost/kernel.pin), fetched into $cache on first use"
	fi
}

prepare() {
	mkdir -p "$cache"
	kdir=$(find_kernel) || { fetch_kernel; kdir=$(find_kernel); }
	initrd=$(build_initramfs "$kdir") || exit 125
}

case ${1:-} in
--check) check; exit ;;
--prepare) why=$(check) || die "$why"; prepare; echo "kernel $kdir, initramfs $initrd"; exit 0 ;;
esac

rw=()
while [ "${1:-}" = -w ]; do
	[ -d "${2:-}" ] || die "-w ${2:-}: not a directory"
	rw+=("$(cd "$2" && pwd)")
	shift 2
done
[ $# -gt 0 ] || die "usage: $0 [-w DIR]... CMD [ARG...]"
# The VM's /tmp, /run, /var/tmp and /dev/shm are fresh: a working directory
# under one of them (a checkout in /tmp, as CI may make) is shared into the
# VM read-write at its own path, unless a -w share already holds it.
case $PWD/ in
/tmp/* | /run/* | /var/tmp/* | /dev/shm/*)
	covered=0
	for d in ${rw[@]+"${rw[@]}"}; do
		case $PWD/ in "$d"/*) covered=1 ;; esac
	done
	[ $covered = 1 ] || rw+=("$PWD")
	;;
esac
why=$(check) || die "$why"
prepare
kv=$(ls "$kdir/root/lib/modules")
echo "  VMHOST  kernel: Debian $kname (Linux $kv)" >&2

ctl=$(mktemp -d "$cache/run.XXXXXX")
qpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2> /dev/null
	rm -rf "$ctl"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pyenv's python3 shim runs some 40 processes per call, a second under
# TCG: the VM gets the interpreter it resolves to instead.
mkdir "$ctl/bin"
for c in python3 python; do
	p=$(command -v $c 2> /dev/null) || continue
	case $p in */shims/*) p=$(pyenv which $c 2> /dev/null) && ln -s "$p" "$ctl/bin/$c" ;; esac
done
PATH=$ctl/bin:$PATH

# The command, with this environment (but make's jobserver and TMPDIR) and
# working directory.
{
	echo "cd $(printf %q "$PWD") || exit 125"
	for n in $(compgen -e); do
		case $n in MAKEFLAGS | MFLAGS | MAKELEVEL | MAKE_TERMOUT | MAKE_TERMERR | TMPDIR | _ | SHLVL | OLDPWD | PWD) continue ;; esac
		printf 'export %s=%q\n' "$n" "${!n}"
	done
	echo "export VMHOST=1"
	printf 'exec'
	printf ' %q' "$@"
	echo
} > "$ctl/cmd"

args=(-accel "tcg,thread=${VMHOST_TCG_THREAD:-multi}" -cpu max -smp "${VMHOST_CPUS:-1}" -m "${VMHOST_MEM:-4096}"
	-nodefaults -no-user-config -display none -no-reboot
	-kernel "$kdir/root/boot/vmlinuz-$kv" -initrd "$initrd"
	-chardev "file,id=log,path=$ctl/console.log" -serial chardev:log
	-chardev stdio,id=out,signal=off -serial chardev:out
	-monitor "unix:$ctl/mon,server=on,wait=off"
	-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap
	-virtfs "local,path=$ctl,mount_tag=ctl,security_model=passthrough,multidevs=remap")
i=0
for d in "${rw[@]}"; do
	args+=(-virtfs "local,path=$d,mount_tag=rw$i,security_model=passthrough,multidevs=remap")
	i=$((i + 1))
done
rwlist=$(IFS=,; echo "${rw[*]}")
append="console=ttyS0 panic=-1 quiet loglevel=5 nokaslr vmhost.ctl=$ctl vmhost.modules=$kdir/root/lib/modules"
[ -n "$rwlist" ] && append+=" vmhost.rw=$rwlist"
append+=" ${VMHOST_APPEND:-}"

# As many VMs at once as the host has cores for (VMHOST_SLOTS, its cores
# over VMHOST_CPUS: one each on a 2-core host). Two TCG VMs of two vCPUs
# each on 2 cores starved each other (soft lockups in the VMs' kernels);
# one vCPU each is one TCG thread each. A run takes the first free slot,
# a lock file VMHOST_LOCK.N, and holds it until this script ends (fd 9
# stays open); with none free it waits and says so. VMHOST_LOCK names
# other lock files, for runs with caches of their own on one host.
lock=${VMHOST_LOCK:-$cache/vmhost.lock}
slots=${VMHOST_SLOTS:-$(( $(nproc) / ${VMHOST_CPUS:-1} ))}
[ "$slots" -ge 1 ] 2> /dev/null || slots=1
take_slot() {
	local i
	for ((i = 0; i < slots; i++)); do
		exec 9>> "$lock.$i"
		flock -n 9 && return 0
		exec 9>&-
	done
	return 1
}
if ! take_slot; then
	echo "  VMHOST  waiting for one of the $slots VM runs on this host to end ($lock.*)" >&2
	until take_slot; do sleep 1; done
fi
set +e
if [ "${VMHOST_VERBOSE:-0}" = 1 ]; then
	tail -F "$ctl/console.log" 2> /dev/null >&2 &
	tpid=$!
fi

# The command's exit status, from the control directory or, if its 9p
# channel did not answer, from the console (init writes it to both).
cmd_status() {
	[ -f "$ctl/status" ] && { cat "$ctl/status"; return 0; }
	local st
	st=$(tr -d '\r' < "$ctl/console.log" 2> /dev/null | sed -n 's/^vmhost: status \([0-9][0-9]*\)$/\1/p' | tail -1)
	[ -n "$st" ] && echo "$st"
}

# One VM run; its outcome in $q (qemu's status) and $why (empty, "boot"
# or "froze"). The init's heartbeat (a "vmhost: beat N" line on the
# console every 15 s) must appear within VMHOST_BOOT_TIMEOUT of the start
# and then go on at least every VMHOST_FREEZE_TIMEOUT: a VM whose kernel
# stopped (seen under TCG, once in a while) is cut off in minutes rather
# than at the tier's time limit.
run_vm() {
	local t0 last beat=0 now
	rm -f "$ctl/ps" "$ctl/status" "$ctl/error" "$ctl/console.log" "$ctl/cpus" "$ctl/mon" "$ctl/kallsyms"
	timeout "${VMHOST_TIMEOUT:-3600}" $qemu "${args[@]}" -append "$append" < /dev/null &
	qpid=$!
	t0=$SECONDS
	last=$SECONDS
	why=
	while kill -0 "$qpid" 2> /dev/null; do
		sleep 2
		now=$(grep -c "^vmhost: beat" "$ctl/console.log" 2> /dev/null)
		if [ "${now:-0}" -gt "$beat" ]; then
			beat=$now
			last=$SECONDS
		elif [ "$beat" = 0 ] && [ $((SECONDS - t0)) -ge "${VMHOST_BOOT_TIMEOUT:-300}" ]; then
			why=boot
		elif [ "$beat" != 0 ] && [ $((SECONDS - last)) -ge "${VMHOST_FREEZE_TIMEOUT:-180}" ]; then
			why=froze
		fi
		if [ -n "$why" ]; then
			cmd_status > /dev/null && { why=; continue; }
			vm_cpus > "$ctl/cpus" 2>&1
			kill "$qpid" 2> /dev/null
			break
		fi
	done
	wait "$qpid"
	q=$?
	qpid=
}

# The vCPUs of a VM that hangs, from QEMU's monitor: halted or not, where,
# and their local APICs' pending and in-service interrupts (a halted CPU
# with an interrupt pending is a lost wakeup).
vm_cpus() {
	python3 - "$ctl/mon" "$ctl/kallsyms" << 'PY'
import bisect, re, socket, sys, time
syms = []
try:
    for l in open(sys.argv[2]):
        a, t, n = l.split()[:3]
        if int(a, 16) == 0:
            continue
        if t in "tTwW":
            syms.append((int(a, 16), n))
    syms.sort()
except OSError:
    pass
def name(a):
    """symbol+offset of a kernel text address, or None"""
    i = bisect.bisect_right(syms, (a, "~")) - 1
    return "%s+0x%x" % (syms[i][1], a - syms[i][0]) if i >= 0 and a - syms[i][0] < 0x10000 else None
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
def cmd(c):
    s.sendall(c.encode() + b"\n")
    out, t = b"", time.time() + 5
    while not out.endswith(b"(qemu) ") and time.time() < t:
        try:
            out += s.recv(65536)
        except socket.timeout:
            break
    out = out.decode(errors="replace").replace("\r", "")
    # the monitor echoes the command with terminal escapes: drop that line
    return "\n".join(l for l in out.splitlines() if "\x1b" not in l and l != "(qemu) ")
cmd("")
print(cmd("info cpus").strip())
for i in range(8):
    r = cmd("cpu %d" % i)
    if "invalid" in r.lower():
        break
    regs = cmd("info registers")
    line = " ".join(l.strip() for l in regs.splitlines() if l.startswith(("RIP", "EFL", "CR0")))
    print("cpu %d: " % i + re.sub(r"RIP=([0-9a-f]{16})",
                                  lambda m: m.group(0) + ("(%s)" % name(int(m.group(1), 16)) if name(int(m.group(1), 16)) else ""), line))
    # a poor man's backtrace: kernel text addresses on its stack
    m = re.search(r"RSP=([0-9a-f]{16})", regs)
    if m and syms and int(m.group(1), 16) >> 63:
        words = re.findall(r"0x(ffffffff[0-9a-f]{8})", cmd("x/96gx 0x" + m.group(1)))
        trace = [name(int(w, 16)) for w in words]
        print("  stack: " + " ".join(t for t in trace if t))
    print("\n".join(l for l in cmd("info lapic").splitlines() if l.startswith(("LVTT", "Timer", "IRR", "ISR", "TPR", "PPR"))))
# The 9p channels' rings: requests taken but not answered (inuse), answers
# not signalled to the guest (used_idx past signalled_used).
for l in cmd("info virtio").splitlines():
    if l.startswith("/machine"):
        path = l.split()[0]
        q = cmd("info virtio-queue-status %s 0" % path)
        f = dict(x.strip().split(":", 1) for x in q.splitlines() if ":" in x and not x.startswith("/"))
        print(path, " ".join("%s=%s" % (k, f.get(k, "?").strip()) for k in
              ("inuse", "last_avail_idx", "shadow_avail_idx", "used_idx", "signalled_used")))
PY
}

# What a failed VM leaves: its console's kernel messages past boot (a
# hung task's stack, soft lockups) and its last process list; the whole
# console is kept in the cache's failed/ folder (the newest 20).
vm_report() {
	local keep
	tr -d '\r' < "$ctl/console.log" | awk '/^vmhost: beat/ { next } { print }' | tail -60 | sed 's/^/    | /' >&2
	[ -f "$ctl/ps" ] && { echo "vmhost: its processes at the last heartbeat:" >&2; sed 's/^/    /' "$ctl/ps" >&2; }
	[ -s "$ctl/cpus" ] && { echo "vmhost: its vCPUs when it was cut off (QEMU monitor):" >&2; sed 's/^/    /' "$ctl/cpus" >&2; }
	mkdir -p "$cache/failed"
	keep=$cache/failed/console-$(date +%Y%m%dT%H%M%S)-$$.log
	cp "$ctl/console.log" "$keep" 2> /dev/null && echo "vmhost: its whole console: $keep" >&2
	ls -t "$cache"/failed/console-* 2> /dev/null | tail -n +21 | xargs -r rm -f
}

tries=$((1 + ${VMHOST_RETRIES:-1}))
while :; do
	run_vm
	tries=$((tries - 1))
	cmd_status > /dev/null && break
	case $why in
	boot) echo "vmhost: the VM did not reach the command within ${VMHOST_BOOT_TIMEOUT:-300} s; its console:" >&2 ;;
	froze) echo "vmhost: the VM missed its heartbeat for ${VMHOST_FREEZE_TIMEOUT:-180} s (its kernel hangs, not only the command); its console:" >&2 ;;
	*) break ;;
	esac
	vm_report
	[ $tries -gt 0 ] || break
	echo "vmhost: starting the VM again (the VM failed, not the command; VMHOST_RETRIES=${VMHOST_RETRIES:-1})" >&2
	mv "$ctl/console.log" "$ctl/console.log.prev" 2> /dev/null
done
[ -n "${tpid:-}" ] && kill "$tpid" 2> /dev/null
st=$(cmd_status) && exit "$st"
[ -n "$why" ] && exit 125
[ -f "$ctl/error" ] && echo "vmhost: $(cat "$ctl/error")" >&2
[ $q = 124 ] && echo "vmhost: timed out after ${VMHOST_TIMEOUT:-3600} s" >&2
echo "vmhost: the VM ended without a status (qemu exit $q); its console:" >&2
vm_report
exit 125
