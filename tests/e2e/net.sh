# Sourced by run.sh: virtio-net on a TAP, inside a network namespace this
# test makes (never a real network). One boot ("n1", guest-init as PID 1,
# configured from --net) serves the checks; then it is snapshotted and a
# clone restored on another TAP.
#
# The TCP transfers are 64 MiB each way on hosts that run guest ring 0
# natively. Where KVM emulates guest ring 0 (kvm_pvm) the guest's TCP stack
# moves about 0.05-0.15 MB/s (QEMU's virtio-net measures the same there,
# see bench/net), so 64 MiB would take half an hour: there the transfers
# are 4 MiB (VMM_E2E_NET_MIB overrides either).
net_skip=""
[ "$(id -u)" = 0 ] || net_skip="not root: a network namespace and a TAP need CAP_NET_ADMIN"
[ -c /dev/net/tun ] || net_skip="this host has no /dev/net/tun"
command -v ip > /dev/null || net_skip="ip(8) is not installed"
if [ -n "$net_skip" ]; then
	echo "skip net: $net_skip"
else
net_mib=${VMM_E2E_NET_MIB:-$([ "$emulating" = 1 ] && echo 4 || echo 64)}
ns=vmm-e2e-$$
net_cleanup() {
	VMM_STATE_DIR=$tmp/nstate "$vmm" rm -f n1 n2 n3 n4 n5 n6 > /dev/null 2>&1
	ip netns del "$ns" 2> /dev/null
	ip netns del "$ns-jail" 2> /dev/null
}
trap 'net_cleanup; exec 3>&- 2>/dev/null; rm -rf "$tmp"' EXIT
ip netns add "$ns"
inns() { ip netns exec "$ns" "$@"; }
nvmm() { VMM_STATE_DIR=$tmp/nstate inns "$vmm" "$@"; }
inns ip link set lo up
cp "$rootfs" "$tmp/net-root.img"
printf '{"latest": {"meta-data": {"ami-id": "ami-e2e-%s", "n": 5}}}' $$ > "$tmp/metadata.json"
if out=$(nvmm run -d --name n1 --kernel "$kernel" --mem 256 --disk "path=$tmp/net-root.img,root" \
	--net tap=vmmt0,host_ip=172.30.0.1/24,ip=172.30.0.2/24,gw=172.30.0.1,dns=172.30.0.53,mmds \
	--metadata "$tmp/metadata.json" \
	--ttl 1h 2> "$tmp/n1.err" < /dev/null) && [ "$out" = n1 ]; then
	ok "net: a sandbox with --net boots (TAP vmmt0 created by vmm)"
else bad "net: run --net: $out $(tail -5 "$tmp/n1.err")"; fi
inns ip link show vmmt0 > /dev/null 2>&1 && ok "net: the TAP exists in the namespace, host side 172.30.0.1/24" ||
	bad "net: no vmmt0"
nexec() { # nexec NAME -- CMD...
	local n=$1
	shift 2
	VMM_STATE_DIR=$tmp/nstate T=${T:-120} run_in "$n" "$@"
}
info=$(nexec n1 -- sh -c 'ip -4 addr show eth0; ip route; cat /etc/resolv.conf' 2>&1)
if echo "$info" | grep -q "inet 172.30.0.2/24" && echo "$info" | grep -q "default via 172.30.0.1" &&
	echo "$info" | grep -q "nameserver 172.30.0.53"; then
	ok "net: guest-init configured eth0 from the command line (address, default route, DNS)"
else bad "net: guest configuration: $info"; fi
if nexec n1 -- ping -c 3 -W 10 172.30.0.1 > "$tmp/ping.out" 2>&1; then
	ok "net: the guest pings the host side of the TAP ($(grep -o 'round-trip.*' "$tmp/ping.out"))"
else bad "net: guest ping: $(tail -3 "$tmp/ping.out")"; fi
inns busybox ping -c 2 -W 10 172.30.0.2 > /dev/null 2>&1 && ok "net: the host pings the guest" || bad "net: host ping"
# The metadata service (docs/mmds.md): the guest's own TCP stack talks HTTP
# to 169.254.169.254 through eth0 (busybox nc: the image has no HTTP client
# to speak of); the TAP never sees those frames.
mmds_get() { # mmds_get PATH [HEADER]: the raw HTTP response
	nexec n1 -- sh -c 'printf "GET %s HTTP/1.1\r\nHost: 169.254.169.254\r\n%bConnection: close\r\n\r\n" "$1" "$2" |
		timeout 20 nc 169.254.169.254 80' _ "$1" "${2:-}" 2>&1
}
md=$(mmds_get /latest/meta-data/ami-id)
md_list=$(mmds_get /latest/meta-data)
md_json=$(mmds_get /latest/meta-data/n 'Accept: application/json\r\n')
if echo "$md" | grep -q "^HTTP/1.1 200" && echo "$md" | grep -q "ami-e2e-$$" &&
	echo "$md_list" | tr -d '\r' | grep -qx "n" && echo "$md_json" | tr -d '\r' | tail -1 | grep -qx 5; then
	ok "net: the guest reads the metadata service at 169.254.169.254 (IMDS keys, a string, JSON)"
else bad "net: MMDS: '$md' / '$md_list' / '$md_json' $(tail -3 "$tmp/n1.err")"; fi
feat=$(nexec n1 -- sh -c 'for d in /sys/bus/virtio/devices/*; do [ "$(cat $d/device)" = 0x0001 ] && cat $d/features; done')
# Bits (virtio 1.2 5.1.3): 0 CSUM, 1 GUEST_CSUM, 7 GUEST_TSO4, 11 HOST_TSO4, 15 MRG_RXBUF.
if [ "${feat:0:1}${feat:1:1}${feat:7:1}${feat:11:1}${feat:15:1}" = 11111 ]; then
	ok "net: checksum and TSO offloads and mergeable rx buffers negotiated"
else bad "net: features '$feat'"; fi

# TCP, byte-exact both ways: host -> guest (stored), then guest -> host.
head -c $((net_mib * 1048576)) /dev/urandom > "$tmp/blob"
want=$(sha256sum < "$tmp/blob" | cut -d' ' -f1)
T=1800 nexec n1 -- sh -c 'nc -l -p 5002 > /tmp/blob; sha256sum /tmp/blob' > "$tmp/g2.out" 2>&1 &
gpid=$!
inns timeout 1800 python3 "$e2e_dir/nethost.py" send 172.30.0.2 5002 "$tmp/blob" > "$tmp/h2.out" 2>&1
wait $gpid
if grep -q "^$want " "$tmp/g2.out"; then
	ok "net: $net_mib MiB host -> guest over TCP, sha256 equal ($(cat "$tmp/h2.out"))"
else bad "net: host -> guest: guest has '$(head -c 100 "$tmp/g2.out")', host: $(cat "$tmp/h2.out")"; fi
inns timeout 1800 python3 "$e2e_dir/nethost.py" recv 172.30.0.1 5001 > "$tmp/h1.out" 2> "$tmp/h1.err" &
hpid=$!
for i in $(seq 100); do grep -q listening "$tmp/h1.err" 2>/dev/null && break; sleep 0.1; done
T=1800 nexec n1 -- sh -c 'nc 172.30.0.1 5001 < /tmp/blob' > /dev/null 2>&1
wait $hpid
if grep -q "^$((net_mib * 1048576)) $want" "$tmp/h1.out"; then
	ok "net: $net_mib MiB guest -> host over TCP, sha256 equal ($(cut -d' ' -f3- "$tmp/h1.out"))"
else bad "net: guest -> host: host got '$(cat "$tmp/h1.out")'"; fi

# A port served from the guest, reached from the host.
nexec n1 -- sh -c 'mkdir -p /root/www && echo served-from-the-guest > /root/www/index.html &&
	httpd -p 8080 -h /root/www' > /dev/null 2>&1
if [ "$(inns curl -s --max-time 60 http://172.30.0.2:8080/)" = served-from-the-guest ]; then
	ok "net: a web server in the guest answers the host on 172.30.0.2:8080"
else bad "net: http from the host to the guest"; fi

# Snapshot; the original stops (its TAP goes: vmm made it); a clone runs
# on another TAP with the same host-side subnet and still talks.
if timeout 120 env VMM_STATE_DIR="$tmp/nstate" "$vmm" snapshot --stop n1 "$tmp/nsnap" > /dev/null 2> "$tmp/nsnap.err"; then
	ok "net: snapshot of a sandbox with a network interface"
else bad "net: snapshot: $(cat "$tmp/nsnap.err")"; fi
for i in $(seq 50); do inns ip link show vmmt0 > /dev/null 2>&1 || break; sleep 0.2; done
inns ip link show vmmt0 > /dev/null 2>&1 && bad "net: vmmt0 still exists after its VMM exited" ||
	ok "net: the TAP vmm created is gone once its VMM exited"
if out=$(nvmm restore -d "$tmp/nsnap" --name n2 --net tap=vmmt1,host_ip=172.30.0.1/24 2> "$tmp/n2.err") &&
	[ "$out" = n2 ] && nexec n2 -- ping -c 2 -W 10 172.30.0.1 > /dev/null 2>&1 &&
	[ "$(inns curl -s --max-time 60 http://172.30.0.2:8080/)" = served-from-the-guest ]; then
	ok "net: a clone restored on another TAP pings the host and still serves its page"
else bad "net: restore on vmmt1: $out $(tail -3 "$tmp/n2.err")"; fi
# A second clone, next to the first, takes its own MAC and addresses
# (guest-init applies them when the restored guest is synced).
if out=$(nvmm restore -d "$tmp/nsnap" --name n3 \
	--net tap=vmmt2,host_ip=172.30.2.1/24,mac=02:99:99:99:99:99,ip=172.30.2.2/24,gw=172.30.2.1 \
	2> "$tmp/n3.err") && [ "$out" = n3 ]; then
	info=$(nexec n3 -- sh -c 'ip addr show eth0; ip route; ping -c 2 -W 10 172.30.2.1 > /dev/null && echo PING-OK' 2>&1)
	if echo "$info" | grep -q "link/ether 02:99:99:99:99:99" && echo "$info" | grep -q "inet 172.30.2.2/24" &&
		echo "$info" | grep -q "default via 172.30.2.1" && echo "$info" | grep -q PING-OK &&
		nexec n2 -- ping -c 1 -W 10 172.30.0.1 > /dev/null 2>&1; then
		ok "net: a clone given mac=/ip=/gw= on restore takes them and reaches its host side; the other clone still works"
	else bad "net: clone n3 reconfiguration: $info"; fi
else bad "net: restore n3: $out $(tail -3 "$tmp/n3.err")"; fi
# Jailed clones (the VMM in a network namespace of its own, or in one the
# operator prepared with the TAP in it: --jail-netns).
if unshare -m -n true 2> /dev/null; then
	if out=$(nvmm restore -d "$tmp/nsnap" --name n5 --jail \
		--net tap=vmmt3,host_ip=172.30.3.1/24,mac=02:99:99:99:99:98,ip=172.30.3.2/24,gw=172.30.3.1 \
		2> "$tmp/n5.err") && [ "$out" = n5 ]; then
		jp=$(cat "$tmp/nstate/n5/pid" 2> /dev/null)
		if nexec n5 -- ping -c 2 -W 10 172.30.3.1 > /dev/null 2>&1 &&
			inns busybox ping -c 2 -W 10 172.30.3.2 > /dev/null 2>&1 &&
			[ "$(readlink /proc/$jp/ns/net)" != "$(inns readlink /proc/self/ns/net)" ] &&
			[ "$(nsenter -t "$jp" -n ip -o link 2> /dev/null | grep -vc ': lo:')" = 0 ] &&
			inns ip link show vmmt3 > /dev/null 2>&1; then
			ok "net: a jailed clone (own network namespace, nothing in it) is reached through its TAP, which stays in the host's"
		else bad "net: jailed clone n5: VMM $jp: $(nsenter -t "$jp" -n ip -o link 2>&1 | head -3)"; fi
	else bad "net: restore --jail n5: $out $(tail -3 "$tmp/n5.err")"; fi
	VMM_STATE_DIR=$tmp/nstate "$vmm" rm -f n5 > /dev/null 2>&1
	ip netns add "$ns-jail"
	if out=$(nvmm restore -d "$tmp/nsnap" --name n6 --jail --jail-netns "$ns-jail" --net tap=vmmt6,mac=02:99:99:99:99:97 \
		2> "$tmp/n6.err") && [ "$out" = n6 ]; then
		jp=$(cat "$tmp/nstate/n6/pid" 2> /dev/null)
		if ip netns exec "$ns-jail" ip link show vmmt6 > /dev/null 2>&1 && ! inns ip link show vmmt6 > /dev/null 2>&1 &&
			[ "$(readlink /proc/$jp/ns/net)" = "$(ip netns exec "$ns-jail" readlink /proc/self/ns/net)" ] &&
			[ "$(nexec n6 -- echo up)" = up ]; then
			ok "net: --jail-netns: the jailed VMM joins the prepared namespace and its TAP is made there"
		else bad "net: --jail-netns n6: $(ip netns exec "$ns-jail" ip -o link 2>&1 | head -3)"; fi
	else bad "net: restore --jail-netns n6: $out $(tail -3 "$tmp/n6.err")"; fi
	VMM_STATE_DIR=$tmp/nstate "$vmm" rm -f n6 > /dev/null 2>&1
	ip netns del "$ns-jail" 2> /dev/null
else echo "skip net: jailed clones: this host refuses mount/network namespaces"; fi
if nvmm restore -d "$tmp/nsnap" --name n4 --net tap=vmmt4 --net tap=vmmt5 > /dev/null 2> "$tmp/n4.err"; then
	bad "net: a restore with more --net than the snapshot has was not refused"
else
	grep -q "network interfaces" "$tmp/n4.err" && ok "net: a restore with more --net than the snapshot has is refused" ||
		bad "net: n4: $(cat "$tmp/n4.err")"
fi
net_cleanup
trap 'exec 3>&- 2>/dev/null; rm -rf "$tmp"' EXIT
fi
