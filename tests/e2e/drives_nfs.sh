#!/usr/bin/env bash
# A drive on NFSv4 end to end (docs/virtio-fs.md, "Host file systems"): an
# ext4 folder exported by the kernel's NFS server on this machine, mounted
# twice over NFSv4.2 with its locking on (not nolock, not local_lock): once
# from this network namespace on loopback (where the sandboxes' VMMs reach
# it: the drive's --path) and once from a namespace of its own over a veth
# pair, under another host name (its own NFS client, client ID and cache:
# the stand-in for a second host, which this test machine does not have).
# Two sandboxes share the drive; counters under flock and under fcntl, and
# SQLite in rollback mode, run from both and from a host process on the
# second mount at once, and end exact; what flock does on NFS (the client
# turns it into a whole-file POSIX lock, so it meets fcntl locks) is
# checked as a guest sees it.
#   tests/e2e/drives_nfs.sh VMM KERNEL ROOTFS
# Needs root, the kernel's nfsd and nfs-kernel-server's tools; skips with
# the reason where one is missing, or where an NFS server already runs (it
# is never touched). Runs in a mount namespace of its own (it re-executes
# itself under unshare -m), so the tmpfs it puts over /var/lib/nfs and its
# mounts never reach the host's; the server, the mounts, the network
# namespace and the sandboxes are taken down on every exit, and every
# command that could wait on the server has a time limit. Prints ok/FAIL
# lines (tests/e2e/lib.sh) for run.sh's part drives-nfs to count.
set -u
vmm=$1 kernel=$2 rootfs=$3
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "skip drives-nfs: $*"; echo "e2e drives-nfs: 0 passed, 0 failed, 1 skipped"; exit 0; }

[ "$(id -u)" = 0 ] || skip "needs root (it starts the kernel's NFS server and mounts)"
for c in rpc.nfsd rpc.mountd exportfs mount.nfs4 unshare nsenter ip flock mkfs.ext4 losetup; do
	command -v $c > /dev/null || skip "no $c (apt-get install nfs-kernel-server; boot/deps.sh)"
done
if [ "${VMM_NFS_NS:-}" != 1 ]; then
	shopt -s execfail
	VMM_NFS_NS=1 exec unshare -m --propagation private bash "$0" "$@"
	skip "unshare -m failed"
fi
# Modules load on demand, through the kernel's own modprobe (in the vmhost
# VM, the one that knows its module tree): mounting nfsd asks for fs-nfsd,
# opening /dev/loop-control for char-major-10-237.
if ! mountpoint -q /proc/fs/nfsd && ! mount -t nfsd nfsd /proc/fs/nfsd 2> /dev/null; then
	grep -qw nfsd /proc/filesystems || skip "this kernel has no nfsd (CONFIG_NFSD)"
	skip "cannot mount the nfsd file system on /proc/fs/nfsd"
fi
[ -e /dev/loop-control ] || mknod /dev/loop-control c 10 237 2> /dev/null
[ "$(cat /proc/fs/nfsd/threads 2> /dev/null)" = 0 ] || skip "an NFS server already runs on this host; the test leaves it alone"

tmp=$(mktemp -d)
pass=0 fail=0
. "$here/lib.sh"
export VMM_STATE_DIR=$tmp/state VMM_DRIVE_DIR=$tmp/store
mkdir -p -m 700 "$VMM_STATE_DIR"
# The export and the mounts apart from $tmp, where the crash scan looks
# for consoles (it would walk into the mounts).
nfs=$(mktemp -d /tmp/vmm-nfs.XXXXXX)
exp=$nfs/export m1=$nfs/m1 m2=$nfs/m2
mkdir -p "$exp" "$m1" "$m2"
ns="vmm-e2e-nfsb"
srv_b=10.213.0.1 cli_b=10.213.0.2
mountd=

# ---- teardown, on every exit ----------------------------------------------
nfs_umount() { # forced if the server no longer answers; lazy as the last resort
	mountpoint -q "$1" || return 0
	timeout 30 umount "$1" 2> /dev/null || timeout 30 umount -f "$1" 2> /dev/null || umount -l "$1"
}
teardown() {
	local n
	trap - EXIT INT TERM
	for n in alice bob; do
		timeout 60 "$vmm" stop "$n" > /dev/null 2>&1
		timeout 30 "$vmm" rm -f "$n" > /dev/null 2>&1
	done
	jobs -p | xargs -r kill 2> /dev/null
	nfs_umount "$m2"
	nfs_umount "$m1"
	timeout 30 exportfs -ua 2> /dev/null
	timeout 60 rpc.nfsd 0 2> /dev/null
	[ -n "$mountd" ] && kill "$mountd" 2> /dev/null
	ip netns del $ns 2> /dev/null
	ip link del vmmnfs0 2> /dev/null
	mountpoint -q "$exp" && umount "$exp"
	rm -rf "$tmp" "$nfs"
}
trap teardown EXIT
trap 'exit 143' INT TERM

# ---- the server: an ext4 folder, exported over NFSv4 only -----------------
# ext4 with iversion: NFSv4's change attribute then moves on every write
# (tmpfs's would be its ctime, which ticks with the jiffy, and a client's
# close-to-open check can miss a second write within one tick).
nfs_server() {
	set -x
	truncate -s 256M "$nfs/export.img" && mkfs.ext4 -q -F "$nfs/export.img" &&
		mount -o loop,iversion "$nfs/export.img" "$exp" || return 1
	mkdir -p "$exp/drive"
	# The server's state (etab, rmtab, the v4 client records) in a tmpfs of
	# this mount namespace, not the host's /var/lib/nfs.
	mount -t tmpfs -o mode=755 vmm-e2e-nfs /var/lib/nfs || return 1
	mkdir -p /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs /var/lib/nfs/sm
	: > /var/lib/nfs/etab
	: > /var/lib/nfs/rmtab
	# Short leases and grace (10 s, about the least nfsd takes) so that a
	# test waits little after the start; clients renew every lease/3.
	local f
	for f in nfsv4leasetime nfsv4gracetime; do
		echo 10 > /proc/fs/nfsd/$f 2> /dev/null || echo 15 > /proc/fs/nfsd/$f
	done
	ip link add vmmnfs0 type veth peer name vmmnfs1 || return 1
	ip netns add $ns || return 1
	ip link set vmmnfs1 netns $ns &&
		ip addr add $srv_b/30 dev vmmnfs0 && ip link set vmmnfs0 up &&
		ip -n $ns addr add $cli_b/30 dev vmmnfs1 && ip -n $ns link set vmmnfs1 up &&
		ip -n $ns link set lo up || return 1
	# fsid=0: the export is the root of the server's NFSv4 tree (clients
	# mount SERVER:/), so no pseudo-root is built over this host's /.
	local o=rw,sync,no_root_squash,no_subtree_check,insecure,fsid=0
	timeout 30 exportfs -i -o $o "127.0.0.1:$exp" && timeout 30 exportfs -i -o $o "$cli_b:$exp" || return 1
	rpc.mountd -F -N 2 -N 3 > "$tmp/mountd.log" 2>&1 &
	mountd=$!
	timeout 60 rpc.nfsd -N 3 -V 4 -U 4 > "$tmp/nfsd.log" 2>&1 || return 1
	# The default mount: hard, NFSv4.2, locks sent to the server.
	timeout 120 mount -t nfs4 -o vers=4.2 127.0.0.1:/ "$m1" || return 1
	# The second client: its own network namespace and host name, so its own
	# nfs_client, client ID (the host name is in it) and page cache.
	timeout 120 unshare --uts sh -c "hostname vmm-e2e-nfs-b && nsenter --net=/run/netns/$ns \
		mount -t nfs4 -o vers=4.2 $srv_b:/ $m2" || return 1
	set +x
}
nfs_server > "$tmp/setup.log" 2>&1
st=$?
set +x
if [ $st = 0 ]; then
	o1=$(awk -v m="$m1" '$2 == m { print $4 }' /proc/mounts)
	o2=$(awk -v m="$m2" '$2 == m { print $4 }' /proc/mounts)
	if [[ ",$o1," == *,vers=4.2,* ]] && [[ ",$o1," == *,local_lock=none,* ]] && [[ ",$o2," == *,local_lock=none,* ]]; then
		ok "drives-nfs: an ext4 folder exported over NFSv4.2, mounted twice with the server's locking ($o1)"
	else bad "drives-nfs: mount options: m1 '$o1', m2 '$o2'"; fi
else
	bad "drives-nfs: the NFS server or its mounts did not come up (status $st)"
	for f in setup nfsd mountd; do
		[ -s "$tmp/$f.log" ] && tail -n 12 "$tmp/$f.log" | sed "s/^/     | $f: /"
	done
	dmesg 2> /dev/null | grep -iE 'nfs|lockd|rpc' | tail -n 8 | sed 's/^/     | dmesg: /'
	echo "e2e drives-nfs: $pass passed, $fail failed"
	exit 1
fi

# ---- two sandboxes on a drive in the NFS mount ------------------------------
dx() { T=300 run_in "$1" sh -c "$2" 2>&1; }
hx() { timeout 300 "$@"; } # a host command on a mount: never waits forever
d_start() { # d_start NAME DRIVE-ARGS...: a detached sandbox, ready for exec
	local n=$1
	shift
	cp "$rootfs" "$tmp/$n-root.img"
	timeout 1200 "$vmm" run -d --name "$n" --kernel "$kernel" --mem 256 --disk "path=$tmp/$n-root.img,root" \
		--console "file:$tmp/$n.console" "$@" < /dev/null > "$tmp/$n.out" 2> "$tmp/$n.err" || return 1
	for _ in $(seq 480); do
		timeout 20 "$vmm" exec "$n" -- true > /dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
lc=$(dirname "$vmm")/guest/lockcount
sq=$(dirname "$vmm")/guest/sqlitecount
d=$m1/drive b=$m2/drive # one folder, as this host and as "host b" see it
"$vmm" drive create nfsw --path "$d" --size 64M --allow alice --allow bob > "$tmp/create.log" 2>&1
[ -x "$lc" ] && cp "$lc" "$d/lockcount"
[ -x "$sq" ] && cp "$sq" "$d/sqlitecount"
if d_start alice --drive nfsw && d_start bob --drive nfsw:/shared; then
	ok "drives-nfs: two sandboxes on a drive whose folder is on the NFS mount (vmm drive create --path)"
else bad "drives-nfs: boot: $(cat "$tmp/create.log") $(tail -3 "$tmp/alice.err" "$tmp/bob.err")"; fi
if [ "$(dx alice 'echo from-alice > /drives/nfsw/note; cat /drives/nfsw/note')" = from-alice ] &&
	[ "$(dx bob 'cat /shared/note')" = from-alice ] && [ "$(hx cat "$b/note")" = from-alice ]; then
	ok "drives-nfs: a file alice writes bob reads, and so does the second NFS client"
else bad "drives-nfs: share: $(dx bob 'ls -la /shared') $(ls -la "$b")"; fi
# The server has two NFSv4 clients, with their own names (client IDs).
names=$(cat /proc/fs/nfsd/clients/*/info 2> /dev/null | sed -n 's/^name: //p' | sort -u)
if [ "$(echo "$names" | grep -c .)" -ge 2 ] && echo "$names" | grep -q vmm-e2e-nfs-b; then
	ok "drives-nfs: the server holds two NFSv4 clients: $(echo "$names" | tr '\n' ' ')"
else bad "drives-nfs: the server's clients: '$names'"; fi

# ---- counters: two sandboxes and "host b", each under the lock -------------
if [ -x "$lc" ]; then
	echo 0 > "$d/cnt-flock"
	# (lockcount flock: the base image's busybox has no flock applet)
	fl='i=0; while [ $i -lt 40 ]; do DIR/lockcount flock DIR/cnt-flock.lock sh -c "n=\$(cat DIR/cnt-flock); echo \$((n+1)) > DIR/cnt-flock"; i=$((i+1)); done; echo done'
	dx alice "${fl//DIR//drives/nfsw}" > "$tmp/lk-a.out" & lka=$!
	dx bob "${fl//DIR//shared}" > "$tmp/lk-b.out" & lkb=$!
	for _ in $(seq 40); do
		hx flock "$b/cnt-flock.lock" sh -c 'n=$(cat "$1"); echo $((n+1)) > "$1"' _ "$b/cnt-flock"
	done
	wait $lka $lkb
	n=$(hx cat "$b/cnt-flock")
	if [ "$n" = 120 ]; then ok "drives-nfs: flock counter from two sandboxes and the second NFS client, 40 each: $n of 120"
	else bad "drives-nfs: flock counter $n of 120 ($(tail -n 2 "$tmp/lk-a.out" "$tmp/lk-b.out"))"; fi

	dx alice '/drives/nfsw/lockcount count /drives/nfsw/cnt-fcntl 60 && echo done' > "$tmp/lk-a.out" & lka=$!
	dx bob '/shared/lockcount count /shared/cnt-fcntl 60 && echo done' > "$tmp/lk-b.out" & lkb=$!
	hx "$b/lockcount" count "$b/cnt-fcntl" 60
	wait $lka $lkb
	n=$(hx cat "$b/cnt-fcntl")
	if [ "$n" = 180 ]; then ok "drives-nfs: fcntl counter from two sandboxes and the second NFS client, 60 each: $n of 180"
	else bad "drives-nfs: fcntl counter $n of 180 ($(tail -n 2 "$tmp/lk-a.out" "$tmp/lk-b.out"))"; fi
else bad "drives-nfs: $lc not built (make e2e builds it)"; fi

# ---- SQLite, rollback journal, from both sandboxes and "host b" -------------
if [ -x "$sq" ]; then
	hx "$b/sqlitecount" init "$b/r.db" delete
	dx alice '/drives/nfsw/sqlitecount insert /drives/nfsw/r.db delete alice 40 && echo done' > "$tmp/sq-a.out" & sqa=$!
	dx bob '/shared/sqlitecount insert /shared/r.db delete bob 40 && echo done' > "$tmp/sq-b.out" & sqb=$!
	hx "$b/sqlitecount" insert "$b/r.db" delete hostb 40 > "$tmp/sq-h.out" 2>&1
	wait $sqa $sqb
	got=$(dx bob '/shared/sqlitecount check /shared/r.db')
	if [ "$got" = "integrity=ok rows=120 counter=120" ] && [ "$(hx "$b/sqlitecount" check "$b/r.db")" = "$got" ]; then
		ok "drives-nfs: SQLite (rollback journal) from two sandboxes and the second NFS client at once: $got"
	else bad "drives-nfs: SQLite: '$got' (want 120 rows) $(tail -n 2 "$tmp/sq-a.out" "$tmp/sq-b.out" "$tmp/sq-h.out")"; fi
else bad "drives-nfs: $sq not built (make e2e builds it)"; fi

# ---- what flock is on NFS ----------------------------------------------------
# Linux's NFS client sends a flock as a whole-file POSIX lock owned by the
# open file, so on NFS (unlike on a local file system, where the two kinds
# never meet) a flock and an fcntl lock on one file conflict: across
# sandboxes and with the other client.
if [ -x "$lc" ]; then
	dx alice '(/drives/nfsw/lockcount flock /drives/nfsw/fl sleep 30) < /dev/null > /dev/null 2>&1 &
		(/drives/nfsw/lockcount hold /drives/nfsw/fc 30) < /dev/null > /dev/null 2>&1 & true' > /dev/null
	for _ in $(seq 120); do
		! hx flock -n "$b/fl" true && [ "$(hx "$b/lockcount" probe "$b/fc")" = locked ] && break
		sleep 0.5
	done
	out=$(dx bob '/shared/lockcount probe /shared/fl; /shared/lockcount flockprobe /shared/fc')
	hb=$(hx "$b/lockcount" probe "$b/fl")
	if [ "$out" = "locked
locked" ] && [ "$hb" = locked ]; then
		ok "drives-nfs: flock and fcntl locks meet on NFS: alice's flock is an fcntl conflict for bob and for the second client, alice's fcntl lock refuses bob's flock"
	else bad "drives-nfs: flock vs fcntl: bob saw '$out', the second client's fcntl probe of the flocked file '$hb'"; fi
	# Within one sandbox, what a process under a flock finds with F_GETLK:
	# seen 'free' (the two did not meet) although they met between
	# sandboxes on the same mount; reported, not asserted (docs/virtio-fs.md:
	# whether the host's NFS client sends a lock to the server or keeps it
	# locally decides).
	one=$(dx bob '/shared/lockcount flock /shared/one /shared/lockcount probe /shared/one')
	echo "     drives-nfs: within one sandbox, a process under flock probes the file with fcntl: ${one:-?}"
	# Round trips, reported beside the host's own on the same mount.
	gpair=$(dx alice '/drives/nfsw/lockcount pair /drives/nfsw/rtt 50')
	hpair=$(hx "$d/lockcount" pair "$d/rtt" 200)
	echo "     drives-nfs: an fcntl lock/unlock pair: ${gpair:-?} us in a sandbox, ${hpair:-?} us on the host (same NFS mount)"
fi

# ---- the drive outlives the sandboxes ----------------------------------------
timeout 120 "$vmm" stop alice > /dev/null 2>&1
timeout 120 "$vmm" stop bob > /dev/null 2>&1
if [ "$(hx cat "$b/note")" = from-alice ] && [ -n "${got:-}" ] && [ "$(hx "$b/sqlitecount" check "$b/r.db")" = "$got" ]; then
	ok "drives-nfs: after both sandboxes stopped, the second client reads the files, the database as the sandboxes left it"
else bad "drives-nfs: after the stop: $(ls -la "$b")"; fi
e2e_finish
echo "e2e drives-nfs: $pass passed, $fail failed"
[ "$fail" = 0 ]
