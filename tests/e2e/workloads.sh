# Sourced by run.sh (uses $vmm, $kernel, $tmp, lib.sh's ok/bad/run_in):
# the guest kernel runs what agents run (issue 38). A sandbox of a Debian
# image (tests/e2e/debian_image.sh workloads, made on the host before the
# KVM tier: the vmhost VM has no network), named by
# VMM_E2E_WORKLOADS_IMAGE, boots cold on this tree's kernel and guest-init,
# and each check runs in it what a container runtime, a browser's sandbox
# or a developer's tool does: namespaces (unshare), cgroup v2 with limits
# that bite, overlayfs, squashfs on a loop device, seccomp, io_uring, a BPF
# device filter, tun, a bridge with a veth pair into a network namespace,
# nf_tables and iptables (nft and legacy), POSIX message queues, IPv6.
# Where the image could not be made, IMAGE.skip says why and the part
# skips, saying so. The options behind each are listed, with these
# workloads, in tests/kernel/config_check.py.
img=${VMM_E2E_WORKLOADS_IMAGE:-}
e2e_input workloads "$img" VMM_E2E_WORKLOADS_IMAGE debian_image.sh file || return 0

export VMM_STATE_DIR=$tmp/wstate
wx() { T=${T:-120} run_in wl sh -c "$*" 2>&1; }
cp "$img" "$tmp/wl-root.img"
if out=$(timeout 600 "$vmm" run -d --name wl --kernel "$kernel" --mem 512 --disk "path=$tmp/wl-root.img,root" \
	--cmdline "console=ttyS0 reboot=k panic=-1 loglevel=5 init=/sbin/vmm-init" 2> "$tmp/wl.err" < /dev/null) &&
	[ "$out" = wl ]; then
	ok "workloads: a Debian sandbox boots on this kernel"
else
	bad "workloads: run -d of the Debian image: $out $(tail -5 "$tmp/wl.err")"
	unset VMM_STATE_DIR
	return 0
fi
timeout 60 "$vmm" cp "$(dirname "${BASH_SOURCE[0]}")/workloads_probe.py" wl:/root/probe.py
probe() { wx "python3 /root/probe.py $*"; }

# What guest-init mounted at boot, as systemd would have.
got=$(wx "stat -f -c %T /sys/fs/cgroup; stat -f -c %T /dev/mqueue; stat -f -c %T /dev/shm; stat -f -c %T /dev/pts")
[ "$got" = "cgroup2fs
mqueue
tmpfs
devpts" ] && ok "workloads: guest-init mounted cgroup2 at /sys/fs/cgroup, /dev/mqueue, /dev/shm, /dev/pts" ||
	bad "workloads: boot mounts: $got"

# Namespaces.
got=$(wx "unshare -U -r id -u")
[ "$got" = 0 ] && ok "workloads: user namespace: unshare -U -r id -u prints 0" || bad "workloads: unshare -U: $got"
got=$(wx 'unshare -p -m -f --mount-proc sh -c '\''echo $$; cat /proc/1/comm'\''')
[ "$got" = "1
sh" ] && ok "workloads: pid and mount namespaces: unshare -p -m -f --mount-proc (PID 1 in its own /proc)" ||
	bad "workloads: unshare -p -m: $got"
# Rootless, as bubblewrap and Chromium's sandbox do it: user, pid and mount
# together, without root.
got=$(wx 'setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U -r -p -m -f --mount-proc sh -c '\''id -u; echo $$'\''')
[ "$got" = "0
1" ] && ok "workloads: an unprivileged user makes user, pid and mount namespaces (rootless)" ||
	bad "workloads: rootless unshare: $got"
got=$(wx "unshare -n ip -o link show | cut -d: -f2")
[ "$got" = " lo" ] && ok "workloads: network namespace: unshare -n sees only lo" || bad "workloads: unshare -n: $got"
host_name=$(wx hostname)
got=$(wx "unshare -i -u -C -T sh -c 'hostname wl-uts && hostname && cat /proc/self/cgroup'; hostname")
[ -n "$host_name" ] && [ "$got" = "wl-uts
0::/
$host_name" ] && ok "workloads: ipc, uts, cgroup and time namespaces (the hostname stays outside)" ||
	bad "workloads: unshare -i -u -C -T: $got"

# cgroup v2: the controllers, enabled for children, and limits that bite.
got=$(wx "cat /sys/fs/cgroup/cgroup.controllers")
missing=
for c in cpu cpuset memory pids io; do [[ " $got " == *" $c "* ]] || missing="$missing $c"; done
[ -z "$missing" ] && ok "workloads: cgroup v2 controllers: $got" ||
	bad "workloads: cgroup.controllers '$got' lacks$missing"
got=$(wx 'cd /sys/fs/cgroup && echo "+cpu +cpuset +memory +pids +io" > cgroup.subtree_control && mkdir wl &&
	echo 4 > wl/pids.max && echo "50000 100000" > wl/cpu.max && cat wl/cgroup.controllers wl/cpu.max &&
	sh -c '\''echo $$ > /sys/fs/cgroup/wl/cgroup.procs; for i in 1 2 3 4 5 6; do sleep 1 & done; wait'\'' 2> /dev/null;
	grep "^max " wl/pids.events')
echo "$got" | grep -qx "cpuset cpu io memory pids" && echo "$got" | grep -qx "50000 100000" &&
	echo "$got" | grep -qx "max [1-9][0-9]*" &&
	ok "workloads: a child cgroup gets cpu, cpuset, io, memory, pids; cpu.max set; pids.max refuses forks" ||
	bad "workloads: cgroup limits: $got"
got=$(wx 'mkdir /sys/fs/cgroup/wlmem && echo 32M > /sys/fs/cgroup/wlmem/memory.max && echo 0 > /sys/fs/cgroup/wlmem/memory.swap.max;
	{ sh -c '\''echo $$ > /sys/fs/cgroup/wlmem/cgroup.procs; exec python3 -c "b = bytes(range(256)) * (512 << 10)"'\''; } 2> /dev/null;
	echo "status $?"; grep "^oom_kill " /sys/fs/cgroup/wlmem/memory.events')
[ "$got" = "status 137
oom_kill 1" ] && ok "workloads: memory.max 32M: a process allocating 128 MiB is OOM-killed in its cgroup" ||
	bad "workloads: memory limit: $got"
got=$(T=60 probe bpf-device /sys/fs/cgroup/wl)
[ "$got" = "bpf-device=denied,outside=0" ] &&
	ok "workloads: a BPF device filter on a cgroup (crun/runc on cgroup v2) denies /dev/null inside it only" ||
	bad "workloads: BPF device filter: $got"

# Filesystems: overlayfs (also in a user namespace, as rootless Podman
# mounts it), squashfs (xz and zstd) on loop devices.
got=$(wx 'mkdir -p /tmp/ov/l /tmp/ov/u /tmp/ov/w /tmp/ov/m && echo lower > /tmp/ov/l/f &&
	mount -t overlay overlay -o lowerdir=/tmp/ov/l,upperdir=/tmp/ov/u,workdir=/tmp/ov/w /tmp/ov/m &&
	echo upper >> /tmp/ov/m/f && cat /tmp/ov/l/f /tmp/ov/u/f && umount /tmp/ov/m')
[ "$got" = "lower
lower
upper" ] && ok "workloads: mount -t overlay: writes copy up, the lower layer stays" || bad "workloads: overlay: $got"
got=$(wx 'mkdir -p /tmp/uo/l /tmp/uo/u /tmp/uo/w /tmp/uo/m && echo lower > /tmp/uo/l/f && chown -R 65534:65534 /tmp/uo &&
	setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U -r -m sh -c "mount -t overlay overlay -o userxattr,lowerdir=/tmp/uo/l,upperdir=/tmp/uo/u,workdir=/tmp/uo/w /tmp/uo/m && echo more >> /tmp/uo/m/f && cat /tmp/uo/m/f"')
[ "$got" = "lower
more" ] && ok "workloads: overlayfs mounted by an unprivileged user in its user namespace (rootless containers)" ||
	bad "workloads: rootless overlay: $got"
got=$(wx 'mkdir -p /tmp/sq/in /tmp/sq/m && echo squashed > /tmp/sq/in/f &&
	for c in xz zstd gzip; do mksquashfs /tmp/sq/in /tmp/sq/$c.img -comp $c -quiet -no-progress > /dev/null &&
	mount -t squashfs -o loop,ro /tmp/sq/$c.img /tmp/sq/m && echo "$c $(cat /tmp/sq/m/f)" && umount /tmp/sq/m; done')
[ "$got" = "xz squashed
zstd squashed
gzip squashed" ] && ok "workloads: squashfs images (xz, zstd, gzip) mount on loop devices" || bad "workloads: squashfs: $got"

# System calls and devices.
got=$(probe seccomp)
[ "$got" = "seccomp=mode2,getppid-errno99,getpid-ok" ] &&
	ok "workloads: a seccomp filter fails the system call it names, and only that one" || bad "workloads: seccomp: $got"
got=$(probe io_uring)
[ "$got" = "io_uring=anon_inode:[io_uring],sq_entries=4" ] && ok "workloads: io_uring_setup gives a ring" ||
	bad "workloads: io_uring: $got"
got=$(probe tun)
[ "$got" = "tun=wltun0" ] && ok "workloads: /dev/net/tun makes a TUN interface" || bad "workloads: tun: $got"
got=$(probe mqueue)
[ "$got" = "mqueue=hello-mq,listed=True" ] && ok "workloads: a POSIX message queue carries a message, listed in /dev/mqueue" ||
	bad "workloads: mqueue: $got"

# A container's network: a bridge with an address, a veth pair whose other
# end is in a network namespace, a TCP connection across it, with
# bridge-netfilter on (Docker's br_netfilter) and a masquerade rule.
got=$(wx 'ip link add wlbr0 type bridge && ip addr add 10.99.0.1/24 dev wlbr0 && ip link set wlbr0 up &&
	ip link add wlh type veth peer name wlc && ip link set wlh master wlbr0 up &&
	ip netns add wlns && ip link set wlc netns wlns && ip -n wlns addr add 10.99.0.2/24 dev wlc &&
	ip -n wlns link set wlc up && ip -n wlns link set lo up && ip -n wlns route add default via 10.99.0.1 &&
	cat /proc/sys/net/bridge/bridge-nf-call-iptables &&
	iptables -t nat -A POSTROUTING -s 10.99.0.0/24 ! -o wlbr0 -j MASQUERADE || echo set-up failed
	python3 -c "
import socket
s = socket.create_server((\"10.99.0.1\", 8099))
print(\"listening\", flush=True)
c, a = s.accept()
c.sendall(b\"via-bridge \" + a[0].encode())
" > /tmp/srv.out & for i in $(seq 50); do grep -q listening /tmp/srv.out && break; sleep 0.2; done;
	ip netns exec wlns python3 -c "
import socket
print(socket.create_connection((\"10.99.0.1\", 8099), timeout=20).recv(100).decode())
"; wait')
[ "$got" = "1
via-bridge 10.99.0.2" ] && ok "workloads: bridge + veth into a network namespace: TCP across it, bridge-nf-call-iptables on" ||
	bad "workloads: bridge/veth: $got"

# Netfilter: nf_tables through nft; the rules Podman's netavark and Docker
# write, through iptables-nft (xt matches over NFT_COMPAT) and
# iptables-legacy; conntrack's table in /proc.
got=$(wx "nft add table inet wl && nft add chain inet wl c '{ type filter hook input priority 0; }' &&
	nft add rule inet wl c ct state established,related accept &&
	nft add rule inet wl c tcp dport 9 counter reject &&
	nft add table ip wlnat && nft add chain ip wlnat post '{ type nat hook postrouting priority 100; }' &&
	nft add rule ip wlnat post ip saddr 10.88.0.0/16 masquerade &&
	{ nft list table inet wl; nft list table ip wlnat; } | grep -c -e 'ct state established,related accept' -e 'tcp dport 9 counter' -e 'masquerade'")
[ "$got" = 3 ] && ok "workloads: nft: filter (ct state, reject) and nat (masquerade) rules load" || bad "workloads: nft: $got"
got=$(wx "iptables -A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT &&
	iptables -A INPUT -p tcp -m addrtype --dst-type LOCAL -m multiport --dports 80,443 -m comment --comment wl -j ACCEPT &&
	iptables -A INPUT -m mark --mark 0x1 -j ACCEPT && iptables -A INPUT -m state --state INVALID -j DROP &&
	iptables -t nat -A PREROUTING -p tcp --dport 8080 -j DNAT --to-destination 10.99.0.2:80 &&
	iptables -t nat -A OUTPUT -p tcp --dport 8081 -j REDIRECT --to-ports 80 &&
	ip6tables -A INPUT -p tcp --dport 22 -j REJECT && iptables -V && iptables-save | grep -c -e conntrack -e addrtype -e 'mark 0x1' -e DNAT -e REDIRECT")
echo "$got" | grep -q "(nf_tables)" && [ "$(echo "$got" | tail -1)" = 5 ] &&
	ok "workloads: iptables-nft: conntrack, addrtype, multiport, comment, mark, state, DNAT, REDIRECT, ip6tables REJECT" ||
	bad "workloads: iptables-nft: $got"
got=$(wx "iptables-legacy -A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT && iptables-legacy -t nat -A POSTROUTING -j MASQUERADE &&
	iptables-legacy -t mangle -A PREROUTING -j MARK --set-mark 1 && iptables-legacy-save | grep -c -e ctstate -e MASQUERADE -e MARK")
[ "$got" = 3 ] && ok "workloads: iptables-legacy: filter, nat and mangle tables" || bad "workloads: iptables-legacy: $got"
got=$(wx "test -r /proc/net/nf_conntrack && echo conntrack-table")
[ "$got" = conntrack-table ] && ok "workloads: connection tracking (/proc/net/nf_conntrack)" || bad "workloads: conntrack: $got"

# IPv6 on loopback.
got=$(wx 'python3 -c "
import socket, threading
s = socket.create_server((\"::1\", 8098), family=socket.AF_INET6)
threading.Thread(target=lambda: s.accept()[0].sendall(b\"v6-ok\")).start()
print(socket.create_connection((\"::1\", 8098), timeout=10).recv(10).decode())
"')
[ "$got" = v6-ok ] && ok "workloads: IPv6 loopback (::1) carries TCP" || bad "workloads: IPv6: $got"

timeout 120 "$vmm" rm -f wl > /dev/null 2>&1
unset VMM_STATE_DIR
