#!/usr/bin/env bash
# virtio-fs end to end (docs/virtio-fs.md). Sourced by run.sh (uses its
# ok/bad, $vmm, $asan_vmm, $kernel, $rootfs, $tmp), or run alone:
#   tests/e2e/fs.sh VMM KERNEL ROOTFS [ASAN_VMM]
# One boot (a sandbox with a shared drive and a read-only one, snapshotted
# at API-ready and stopped); every check runs in clones restored from it,
# which share the drive's host directory (locks across them use
# build/guest/lockcount, tests/e2e/lockcount.c).
if [ -z "${tmp:-}" ]; then
	set -u
	vmm=$1 kernel=$2 rootfs=$3 asan_vmm=${4:-$1}
	tmp=$(mktemp -d)
	pass=0 fail=0
	trap 'rm -rf "$tmp"' EXIT
	. "$(dirname "$0")/lib.sh"
	fs_alone=1
fi
export VMM_STATE_DIR=$tmp/fsstate
share=$tmp/share
rodir=$tmp/rodir
outside=$tmp/outside
mkdir -p "$share" "$rodir" "$outside"
echo "read-only content" > "$rodir/ro.txt"
echo OUTSIDE-SECRET > "$outside/secret"
echo OUTSIDE-TARGET > "$outside/target"
echo host-parent-marker > "$tmp/host-parent-marker"

fsx() { # fsx NAME CMD: runs CMD in the sandbox's shell, output on stdout
	local n=$1
	shift
	T=300 run_in "$n" sh -c "$*" 2>&1
}
fs_ready() {
	for _ in $(seq 240); do
		timeout 20 "$vmm" exec "$1" -- true > /dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
fs_restore() { # fs_restore NAME SNAPDIR [VMM]
	timeout 900 "${3:-$vmm}" restore "$2" --name "$1" --console "file:$tmp/$1.console" \
		< /dev/null > "$tmp/$1.out" 2> "$tmp/$1.err" &
}
fs_stop() { timeout 60 "$vmm" exec "$1" -- sh -c 'vmmctl poweroff 2>/dev/null || poweroff -f' > /dev/null 2>&1; }

# ---- the boot with two drives, snapshotted at API-ready --------------------
cp "$rootfs" "$tmp/fs-root.img"
start=$(date +%s)
timeout 1200 "$vmm" run --name fsgold --kernel "$kernel" --mem 256 --disk "path=$tmp/fs-root.img,root" \
	--fs "tag=share,path=$share" --fs "tag=rodrive,path=$rodir,ro" \
	--console "file:$tmp/fsgold.console" < /dev/null 2> "$tmp/fsgold.err" &
fsgold_pid=$!
for _ in $(seq 1200); do
	grep -q "API ready" "$tmp/fsgold.console" 2>/dev/null && break
	kill -0 $fsgold_pid 2>/dev/null || break
	sleep 0.5
done
echo "     fs sandbox: API ready after $(( $(date +%s) - start )) s (a full boot)"
if fs_ready fsgold && [ "$(fsx fsgold 'mount | grep -c virtiofs')" = 2 ]; then
	ok "fs: guest-init mounted both drives (virtiofs at /mnt/share, /mnt/rodrive)"
else bad "fs: mounts: $(fsx fsgold 'mount') $(tail -3 "$tmp/fsgold.err")"; fi
if timeout 120 "$vmm" snapshot --stop fsgold "$tmp/fsgold" > "$tmp/fsgold.snap" 2>&1; then
	ok "fs: a sandbox with drives snapshotted"
else bad "fs: snapshot: $(cat "$tmp/fsgold.snap")"; fi
wait $fsgold_pid

fs_restore fsa "$tmp/fsgold"
fs_restore fsb "$tmp/fsgold" "$asan_vmm" # the ASan build serves the second one
if fs_ready fsa && fs_ready fsb; then ok "fs: two clones restored with the drive (one under ASan)"
else bad "fs: clones never answered: $(tail -3 "$tmp/fsa.err" "$tmp/fsb.err")"; fi

# ---- file operations ------------------------------------------------------
out=$(fsx fsa 'cd /mnt/share && echo hello > a.txt && cat a.txt && echo more >> a.txt &&
	wc -l < a.txt && truncate -s 3 a.txt && cat a.txt && echo && mv a.txt b.txt && ln b.txt hard.txt &&
	ln -s b.txt sym.txt && readlink sym.txt && cat sym.txt && echo && chmod 640 b.txt &&
	stat -c "%a %h" b.txt && mkdir -p d1/d2 && echo deep > d1/d2/f && rm hard.txt && ls')
want='hello
2
hel
b.txt
hel
640 2
b.txt
d1
sym.txt'
if [ "$out" = "$want" ]; then ok "fs: create, write, read back, append, truncate, rename, hard and symbolic links, chmod, mkdir, unlink"
else bad "fs: file operations: got '$out'"; fi
if [ "$(cat "$share/b.txt")" = hel ] && [ "$(readlink "$share/sym.txt")" = b.txt ] &&
	[ "$(stat -c %a "$share/b.txt")" = 640 ] && [ "$(cat "$share/d1/d2/f")" = deep ] && [ ! -e "$share/hard.txt" ]; then
	ok "fs: the host sees exactly what the guest did"
else bad "fs: host view: $(ls -lR "$share" 2>&1 | head -20)"; fi

# ---- nothing privileged reaches the host (docs/virtio-fs.md, Ownership) ----
out=$(fsx fsa 'cd /mnt/share && echo x > priv && { chown 0:0 priv 2> /dev/null; chmod 6755 priv &&
	stat -c %a priv; chown 4242:4242 priv 2> /dev/null || echo refused; }')
if [ "$out" = "755
refused" ] && [ "$(stat -c %a "$share/priv")" = 755 ] && [ "$(stat -c %u "$share/priv")" != 4242 ]; then
	ok "fs: a guest chmod 6755 leaves no setuid/setgid on the host, a chown to another user is refused"
else bad "fs: privileges: got '$out', host $(stat -c '%a %u:%g' "$share/priv")"; fi

# ---- 64 MiB byte-exact, both ways -------------------------------------------
# The guest copies it through the drive in 1 MiB requests (1 MiB FUSE
# reads and writes); the host compares the copy's sha256 with the
# original's. Hashing in the guest costs a syscall per 4 KiB (busybox), so
# the guest hashes a 4 MiB file only (on its tmpfs).
head -c 64M /dev/urandom > "$share/big"
host_sum=$(sha256sum < "$share/big" | cut -d' ' -f1)
t0=$(date +%s.%N)
fsx fsa 'dd if=/mnt/share/big of=/mnt/share/big.copy bs=1M 2>/dev/null; sync' > /dev/null
t1=$(date +%s.%N)
if [ "$(sha256sum < "$share/big.copy" | cut -d' ' -f1)" = "$host_sum" ]; then
	ok "fs: a 64 MiB file read and written back by the guest is byte-exact ($(echo "$t1 - $t0" | bc) s)"
else bad "fs: 64 MiB copy: $(stat -c %s "$share/big.copy" 2>&1) bytes, sha256 differs"; fi
head -c 4M "$share/big" > "$share/small"
guest_sum=$(fsx fsa 'dd if=/mnt/share/small of=/tmp/small bs=1M 2>/dev/null; sha256sum /tmp/small; rm /tmp/small' | cut -d' ' -f1)
if [ "$guest_sum" = "$(sha256sum < "$share/small" | cut -d' ' -f1)" ]; then ok "fs: sha256 of a host file in the guest is the host's"
else bad "fs: guest sha256 '$guest_sum'"; fi
rm -f "$share/big" "$share/big.copy" "$share/small"

# ---- 10 000 entries -----------------------------------------------------------
# Counted with the shell's glob (READDIR only: busybox ls stats every entry,
# tens of ms each where guest ring 0 is emulated).
mkdir "$share/many"
(cd "$share/many" && seq -f "entry-%05g" 0 9999 | xargs touch)
out=$(fsx fsa 'set -- /mnt/share/many/*; echo $#; printf "%s\n" /mnt/share/many/* | md5sum')
if [ "$(echo "$out" | head -1)" = 10000 ] &&
	[ "$(echo "$out" | tail -1 | cut -d" " -f1)" = "$(LC_ALL=C ls "$share/many" | sed 's|^|/mnt/share/many/|' | md5sum | cut -d' ' -f1)" ]; then
	ok "fs: a directory of 10 000 entries listed completely"
else bad "fs: 10 000 entries: $out"; fi

# ---- two sandboxes, one drive -------------------------------------------------
fsx fsa 'echo from-a > /mnt/share/from-a' > /dev/null
fsx fsb 'echo from-b > /mnt/share/from-b' > /dev/null
if [ "$(fsx fsb 'cat /mnt/share/from-a')" = from-a ] && [ "$(fsx fsa 'cat /mnt/share/from-b')" = from-b ]; then
	ok "fs: two sandboxes on one drive see each other's files"
else bad "fs: sharing: $(fsx fsb 'ls /mnt/share')"; fi
fsx fsb 'cat /mnt/share/from-a' > /dev/null
fsx fsa 'echo changed-by-a > /mnt/share/from-a' > /dev/null
if [ "$(fsx fsb 'cat /mnt/share/from-a')" = changed-by-a ]; then
	ok "fs: cache=none: a change is seen by the other sandbox at once"
else bad "fs: the other sandbox read a stale file"; fi

# ---- locks across sandboxes (docs/virtio-fs.md, Locks) ----------------------
# Both sandboxes and the host increment one counter each, under flock and
# under fcntl locks, all at once: the counters end exact only if the locks
# exclude across sandboxes and the host. Then a lock one sandbox holds is
# met by the other and by the host. The lock round trip (an uncontended
# lock/unlock pair, and a handoff between two takers) is reported beside
# the host's own, not asserted.
lc=$(dirname "$vmm")/guest/lockcount
if [ -x "$lc" ] && command -v flock > /dev/null; then
	cp "$lc" "$share/lockcount"
	echo 0 > "$share/cnt-flock"
	echo 0 > "$share/cnt-fcntl"
	fl_loop='i=0; while [ $i -lt 40 ]; do flock /mnt/share/cnt-flock.lock sh -c "n=\$(cat /mnt/share/cnt-flock); echo \$((n+1)) > /mnt/share/cnt-flock"; i=$((i+1)); done; echo done'
	fsx fsa "$fl_loop" > "$tmp/lk-a.out" & lka=$!
	fsx fsb "$fl_loop" > "$tmp/lk-b.out" & lkb=$!
	for _ in $(seq 40); do
		flock "$share/cnt-flock.lock" sh -c 'n=$(cat "$1"); echo $((n+1)) > "$1"' _ "$share/cnt-flock"
	done
	wait $lka $lkb
	n=$(cat "$share/cnt-flock")
	if [ "$n" = 120 ]; then ok "fs: locks: flock counter from two sandboxes and the host, 40 each: $n of 120"
	else bad "fs: locks: flock counter $n of 120 ($(cat "$tmp/lk-a.out" "$tmp/lk-b.out" | tail -4))"; fi
	fsx fsa '/mnt/share/lockcount count /mnt/share/cnt-fcntl 100 && echo done' > "$tmp/lk-a.out" & lka=$!
	fsx fsb '/mnt/share/lockcount count /mnt/share/cnt-fcntl 100 && echo done' > "$tmp/lk-b.out" & lkb=$!
	"$share/lockcount" count "$share/cnt-fcntl" 100
	wait $lka $lkb
	n=$(cat "$share/cnt-fcntl")
	if [ "$n" = 300 ]; then ok "fs: locks: fcntl counter from two sandboxes and the host, 100 each: $n of 300"
	else bad "fs: locks: fcntl counter $n of 300 ($(cat "$tmp/lk-a.out" "$tmp/lk-b.out" | tail -4))"; fi

	# A held lock, as the other sandbox and the host see it.
	fsx fsa '(flock /mnt/share/held.lock sleep 25) < /dev/null > /dev/null 2>&1 &
		(/mnt/share/lockcount hold /mnt/share/held-fcntl 25) < /dev/null > /dev/null 2>&1 & true' > /dev/null
	for _ in $(seq 120); do
		! flock -n "$share/held.lock" true && [ "$("$share/lockcount" probe "$share/held-fcntl")" = locked ] && break
		sleep 0.5
	done
	out=$(fsx fsb 'flock -n /mnt/share/held.lock true && echo flock-got || echo flock-refused; /mnt/share/lockcount probe /mnt/share/held-fcntl')
	hostf=$(flock -n "$share/held.lock" true && echo got || echo refused)
	hostp=$("$share/lockcount" probe "$share/held-fcntl")
	if [ "$out" = "flock-refused
locked" ] && [ "$hostf" = refused ] && [ "$hostp" = locked ]; then
		ok "fs: locks: a flock and an fcntl lock held in one sandbox are met by the other sandbox and by the host"
	else bad "fs: locks: held in fsa, fsb saw '$out', the host flock $hostf, fcntl $hostp"; fi
	flock -w 120 "$share/held.lock" true
	for _ in $(seq 120); do
		[ "$("$share/lockcount" probe "$share/held-fcntl")" = free ] && break
		sleep 0.5
	done
	out=$(fsx fsb 'flock -n /mnt/share/held.lock true && echo flock-got; /mnt/share/lockcount probe /mnt/share/held-fcntl')
	if [ "$out" = "flock-got
free" ]; then ok "fs: locks: released when the holder's process ends, the other sandbox takes them"
	else bad "fs: locks: after the holder ended fsb saw '$out'"; fi

	# Round trips: an uncontended lock/unlock pair; a handoff between two
	# takers (counter ping-pong), in the sandboxes and on the host.
	echo 0 > "$share/pp"
	hpair=$("$share/lockcount" pair "$share/rtt" 200)
	"$share/lockcount" pingpong "$share/pp" 0 40 > "$tmp/pp-h0" & pph=$!
	hpp=$("$share/lockcount" pingpong "$share/pp" 1 40)
	wait $pph
	gpair=$(fsx fsa '/mnt/share/lockcount pair /mnt/share/rtt 50')
	echo 0 > "$share/pp"
	fsx fsa '/mnt/share/lockcount pingpong /mnt/share/pp 0 40' > "$tmp/pp-a" & ppa=$!
	gpp=$(fsx fsb '/mnt/share/lockcount pingpong /mnt/share/pp 1 40')
	wait $ppa
	if [ "$(cat "$share/pp")" = 40 ] && [ -n "$gpair" ] && [ -n "$gpp" ]; then
		ok "fs: locks: round trip: a lock/unlock pair ${gpair} us in a sandbox (host ${hpair} us); a handoff between sandboxes ${gpp} us (between host processes ${hpp} us)"
	else bad "fs: locks: ping-pong between sandboxes ended at $(cat "$share/pp") of 40 ('$gpair' '$gpp' $(cat "$tmp/pp-a"))"; fi
	rm -f "$share/lockcount" "$share"/cnt-* "$share"/held* "$share/pp" "$share/rtt"
else echo "skip fs: locks: no $lc (make $lc) or no host flock(1)"; fi

# ---- escapes --------------------------------------------------------------
ln -s "$outside" "$share/abs-link"
ln -s ../outside "$share/rel-link"
ln -s / "$share/root-link"
out=$(fsx fsa 'cat /mnt/share/abs-link/secret /mnt/share/rel-link/secret /mnt/share/../outside/secret \
	/mnt/share/../../outside/secret 2>/dev/null; ls -a /mnt/share/.. /mnt/share/../.. /mnt/share/root-link/ 2>/dev/null;
	cd /mnt/share && cd .. && cd .. && ls -a')
if ! echo "$out" | grep -q "OUTSIDE-SECRET\|host-parent-marker"; then
	ok "fs: .., absolute and relative symlinks out of the drive reach nothing of the host"
else bad "fs: escaped: $out"; fi
fsx fsa "ln -s $outside/target /mnt/share/evil; echo pwned > /mnt/share/evil; ln -s /etc /mnt/share/etc-link;
	echo pwned > /mnt/share/etc-link/vmm-test 2>/dev/null; true" > /dev/null
if [ "$(cat "$outside/target")" = OUTSIDE-TARGET ] && [ ! -e /etc/vmm-test ]; then
	ok "fs: writes through guest-made symlinks (absolute, to /etc) never reach the host's files"
else bad "fs: a symlink write escaped"; fi
# A symlink swapped in for a directory while the guest reads through it.
mkdir -p "$share/swapdir"
echo inside > "$share/swapdir/secret"
ln -sfn "$outside" "$tmp/swaplink"
(end=$(( $(date +%s) + 8 )); while [ "$(date +%s)" -lt $end ]; do
	mv "$share/swapdir" "$tmp/swapdir.away" 2>/dev/null; cp -P "$tmp/swaplink" "$share/swapdir" 2>/dev/null
	rm -f "$share/swapdir"; mv "$tmp/swapdir.away" "$share/swapdir" 2>/dev/null
done) &
swapper=$!
out=$(fsx fsa 'i=0; while [ $i -lt 60 ]; do cat /mnt/share/swapdir/secret 2>/dev/null; i=$((i+1)); done')
wait $swapper
if ! echo "$out" | grep -q OUTSIDE-SECRET && echo "$out" | grep -q inside; then
	ok "fs: a symlink swapped in mid-operation reaches nothing outside ($(echo "$out" | grep -c inside) reads inside)"
else bad "fs: swap race: $(echo "$out" | sort | uniq -c)"; fi
fsx fsa 'mkdir -p /mnt/share/bind && mount --bind / /mnt/share/bind && ls /mnt/share/bind > /dev/null; umount /mnt/share/bind' > /dev/null
if [ -z "$(ls -A "$share/bind" 2>/dev/null)" ]; then ok "fs: a bind of / inside the drive stays in the guest"
else bad "fs: the guest's bind mount shows on the host"; fi

# ---- read-only drive --------------------------------------------------------
out=$(fsx fsa 'cat /mnt/rodrive/ro.txt; echo x > /mnt/rodrive/new 2>/dev/null && echo wrote-new;
	mount -o remount,rw /mnt/rodrive 2>/dev/null; echo x > /mnt/rodrive/new2 2>/dev/null && echo wrote-new2;
	echo x >> /mnt/rodrive/ro.txt 2>/dev/null && echo appended; rm /mnt/rodrive/ro.txt 2>/dev/null && echo removed;
	mkdir /mnt/rodrive/d 2>/dev/null && echo made; true')
if [ "$(echo "$out" | head -1)" = "read-only content" ] && ! echo "$out" | grep -q "wrote-new\|appended\|removed\|made" &&
	[ "$(ls "$rodir")" = ro.txt ] && [ "$(cat "$rodir/ro.txt")" = "read-only content" ]; then
	ok "fs: a read-only drive refuses every write (even remounted read-write in the guest)"
else bad "fs: read-only drive: '$out' / $(ls "$rodir")"; fi

# ---- snapshot of a clone with an open file; the restore goes on writing -----
fsx fsa '(exec 3>> /mnt/share/tick; i=0; while :; do i=$((i+1)); echo $i >&3; sleep 0.2; done) < /dev/null > /dev/null 2>&1 &
	sleep 1; cat /mnt/share/d1/d2/f' > /dev/null
if timeout 120 "$vmm" snapshot --stop fsa "$tmp/fssnap-a" > "$tmp/fssnap-a.out" 2>&1; then
	n0=$(wc -l < "$share/tick")
	fs_restore fsc "$tmp/fssnap-a"
	if fs_ready fsc; then
		sleep 3
		n1=$(wc -l < "$share/tick")
		out=$(fsx fsc 'cat /mnt/share/d1/d2/f; echo new > /mnt/share/after-restore; cat /mnt/share/after-restore')
		if [ "$n1" -gt "$n0" ] && [ "$out" = "deep
new" ] && [ "$(cat "$share/after-restore")" = new ]; then
			ok "fs: restored from a snapshot with an open file: it writes on ($n0 -> $n1 lines), reads and writes the drive"
		else bad "fs: after restore: ticks $n0 -> $n1, '$out'"; fi
	else bad "fs: fsc never answered: $(tail -3 "$tmp/fsc.err")"; fi
	fs_stop fsc
else bad "fs: snapshot of a running clone: $(cat "$tmp/fssnap-a.out")"; fi
fs_stop fsb
sleep 2
if grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/fsb.err"; then bad "fs: ASan/UBSan: $(grep -m3 'ERROR\|runtime error' "$tmp/fsb.err")"
else ok "fs: the ASan build served a clone without a report"; fi
# A jailed clone: its VMM serves the drive with the jail uid's rights on
# the host folder (docs/security.md), /proc gone from its root.
if [ "$(id -u)" = 0 ] && unshare -m -n true 2> /dev/null; then
	mkdir -p "$share/jailed"
	chown 900700 "$share/jailed"
	echo for-the-jail > "$share/for-jail"
	if out=$(timeout 300 "$vmm" restore -d "$tmp/fsgold" --name fsj --jail --jail-uid 900700 2> "$tmp/fsj.err") &&
		[ "$out" = fsj ]; then
		jp=$(cat "$VMM_STATE_DIR/fsj/pid" 2> /dev/null)
		# chmod/chown also check the jailed VMM's own ids (geteuid under
		# the virtio-fs seccomp filter).
		out=$(fsx fsj 'cat /mnt/share/for-jail; echo from-jail > /mnt/share/jailed/x && echo wrote; { echo no > /mnt/share/not-mine; } 2> /dev/null || echo refused
			chmod 4755 /mnt/share/jailed/x && stat -c %a /mnt/share/jailed/x; chown 0 /mnt/share/jailed/x 2> /dev/null || echo refused-chown')
		if [ "$out" = "for-the-jail
wrote
refused
755
refused-chown" ] && [ "$(stat -c %u "$share/jailed/x")" = 900700 ] && [ ! -e "$share/not-mine" ] &&
			[ "$(stat -c %a "$share/jailed/x")" = 755 ] &&
			! grep -q ' /proc ' "/proc/$jp/mountinfo"; then
			ok "fs: a jailed clone reads and writes the drive with its jail uid's rights, no /proc in its root; its chmod 4755 sets no setuid, its chown to root is refused"
		else bad "fs: jailed clone: '$out'"; fi
	else bad "fs: restore --jail: $out $(tail -3 "$tmp/fsj.err")"; fi
	timeout 60 "$vmm" rm -f fsj > /dev/null 2>&1
	for _ in $(seq 20); do [ -e "$VMM_STATE_DIR/fsj" ] || break; sleep 0.5; done
else echo "skip fs: jailed clone: needs root and namespaces"; fi
if [ -z "$(ls "$VMM_STATE_DIR" 2>/dev/null)" ] && [ "$(cat "$share/from-a")" = changed-by-a ] &&
	[ "$(cat "$share/from-b")" = from-b ] && [ "$(cat "$share/b.txt")" = hel ]; then
	ok "fs: the files stay on the host after the sandboxes are gone"
else bad "fs: after the sandboxes: state $(ls "$VMM_STATE_DIR" 2>&1), share $(ls "$share")"; fi
unset VMM_STATE_DIR
if [ -n "${fs_alone:-}" ]; then
	e2e_finish
	echo "fs: $pass passed, $fail failed"
	[ "$fail" = 0 ]
fi
