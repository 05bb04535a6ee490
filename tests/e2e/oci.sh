#!/usr/bin/env bash
# vmm oci end to end: the runtime by hand (a bundle, create/start/state/
# kill/delete), then containerd's ctr and Podman with build/vmm-oci as
# their runtime. Needs /dev/kvm (tests/vmhost/run.sh provides one) and
# root; each engine part skips, saying so, when its tools are missing.
#   tests/e2e/oci.sh [BUILD_DIR]
# VMM_E2E_ONLY="long ctr": only those parts (hand netns ctr podman long).
set -u
B=$(cd "${1:-build}" && pwd)
OCI=$B/vmm-oci
T=$(mktemp -d /tmp/vmm-oci-e2e.XXXXXX)
pass=0 fail=0 skip=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAILED: $*"; fail=$((fail + 1)); }
skipped() { echo "skipped: $*"; skip=$((skip + 1)); }
part() { [ -z "${VMM_E2E_ONLY:-}" ] || [[ " $VMM_E2E_ONLY " == *" $1 "* ]]; }
ctd_pid= httpd_pid= NS=vmmoci$$ cni_tmpfs=
cleanup() {
	[ -n "$ctd_pid" ] && kill "$ctd_pid" 2> /dev/null
	[ -n "$httpd_pid" ] && kill "$httpd_pid" 2> /dev/null
	ip netns del "$NS" 2> /dev/null
	rmdir /sys/fs/cgroup/"$NS"/* /sys/fs/cgroup/"$NS" 2> /dev/null
	ip link del vo-h 2> /dev/null
	[ -n "$cni_tmpfs" ] && umount /var/lib/cni 2> /dev/null
	rm -rf "$T" 2> /dev/null
}
trap cleanup EXIT

[ -e /dev/kvm ] || { echo "skipped: no /dev/kvm (run under tests/vmhost/run.sh)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "skipped: needs root"; exit 0; }
[ -x "$OCI" ] || { echo "no $OCI: make build/vmm-oci" >&2; exit 1; }
BUSYBOX=$(command -v busybox) || { echo "skipped: no busybox"; exit 0; }

# A busybox root filesystem, as an image would unpack.
mkdir -p "$T/rootfs/bin" "$T/rootfs/proc" "$T/rootfs/sys" "$T/rootfs/dev" "$T/rootfs/etc" "$T/rootfs/tmp"
cp "$BUSYBOX" "$T/rootfs/bin/busybox"
for a in sh echo cat ls uname sleep true false id hostname mount ping wget httpd tty ip; do
	ln -s busybox "$T/rootfs/bin/$a"
done
echo 'root:x:0:0:root:/root:/bin/sh' > "$T/rootfs/etc/passwd"
mkdir -p "$T/rootfs/www" && echo hello-from-guest > "$T/rootfs/www/index.html"
tar -C "$T/rootfs" -cf "$T/layer.tar" .

# ---- the runtime by hand ---------------------------------------------------
R=$T/state
# A root as long as docs/kubernetes.md's and an ID as long as Kubernetes'
# (64 hex digits): the sockets of <root>/<ns>/<id>/vm pass sun_path's 108
# bytes (issue 39), reached through their folder (vmm/base/unixsock.h).
LR=$T/run/containerd/vmm-oci
HEX=$(printf '%064x' 39)
mkdir -p "$T/bundle"
if part hand || part long; then
	cat > "$T/bundle/config.json" << EOF
{"ociVersion":"1.0.2","root":{"path":"$T/rootfs"},"hostname":"oci-test",
 "process":{"args":["sh","-c","echo out-\$(hostname); echo err >&2; uname -r; exit 7"],"cwd":"/","env":["PATH=/bin"],
  "user":{"uid":0,"gid":0}},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"}]}
EOF
fi
if part long; then
	# by hand: create, start, the output, delete
	if "$OCI" --root "$LR/k8s.io" create --bundle "$T/bundle" --pid-file "$T/lpid" "$HEX" > "$T/lout" 2> "$T/lerr"; then
		"$OCI" --root "$LR/k8s.io" start "$HEX" || bad "start under the long root"
		pid=$(cat "$T/lpid")
		for _ in $(seq 1 600); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
		grep -q "out-oci-test" "$T/lout" && ok "create/start a 64-hex ID under $LR/k8s.io: output" ||
			bad "long root output: $(cat "$T/lout" "$T/lerr")"
		st=$("$OCI" --root "$LR/k8s.io" state "$HEX")
		case $st in *'"exitStatus":7'*) ok "long root: state exitStatus 7" ;; *) bad "long root state: $st" ;; esac
		"$OCI" --root "$LR/k8s.io" delete "$HEX" && [ ! -e "$LR/k8s.io/$HEX" ] && ok "long root: delete leaves nothing" ||
			bad "long root delete: $(ls -R "$LR/k8s.io" | head)"
	else
		bad "create under the long root: $(cat "$T/lerr")"
	fi
fi
if part hand; then
if "$OCI" --root "$R" create --bundle "$T/bundle" --pid-file "$T/pid" c1 > "$T/out" 2> "$T/err"; then
	ok "create"
	st=$("$OCI" --root "$R" state c1)
	case $st in *'"status":"created"'*) ok "state: created" ;; *) bad "state after create: $st" ;; esac
	"$OCI" --root "$R" create --bundle "$T/bundle" c1 2> "$T/dup" && bad "a second create of c1 succeeded" ||
		{ grep -q "exists" "$T/dup" && ok "duplicate create refused" || bad "duplicate create: $(cat "$T/dup")"; }
	pid=$(cat "$T/pid")
	"$OCI" --root "$R" start c1 && ok "start" || bad "start"
	# the proxy is not our child (create forked it): wait for it to go
	for _ in $(seq 1 600); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
	grep -q "out-oci-test" "$T/out" && ok "output and hostname" || bad "output: $(cat "$T/out" "$T/err")"
	grep -q "^err" "$T/err" && ok "stderr" || bad "stderr: $(cat "$T/err")"
	[ "$(sed -n 2p "$T/out")" != "$(uname -r)" ] && ok "guest kernel $(sed -n 2p "$T/out") (host $(uname -r))" ||
		bad "uname -r is the host's"
	st=$("$OCI" --root "$R" state c1)
	case $st in *'"status":"stopped"'*) ok "state: stopped" ;; *) bad "state after exit: $st" ;; esac
	# the proxy is nobody's child here: its status is kept for state
	case $st in *'"exitStatus":7'*) ok "state: exitStatus 7" ;; *) bad "exit status of c1: $st" ;; esac
	"$OCI" --root "$R" exec c1 true 2> "$T/e" && bad "exec into a stopped container" ||
		{ grep -q stopped "$T/e" && ok "exec into stopped refused" || bad "exec: $(cat "$T/e")"; }
	"$OCI" --root "$R" delete c1 && ok "delete" || bad "delete"
	[ ! -e "$R/c1" ] && ok "nothing left" || bad "left behind: $(ls -R "$R/c1" | head)"
else
	bad "create: $(cat "$T/err")"
fi
fi

# ---- a network namespace as CNI leaves it; hooks; signals -----------------
# ip netns + a veth pair with addresses (what CNI's bridge plugin makes,
# less the bridge): the VM joins the namespace, its TAP is tied to the
# veth, the guest takes the veth's address and reaches the host side.
nbconf() { # ARGS_JSON CREATE_RUNTIME_HOOK
	cat > "$T/nb/config.json" << EOF
{"ociVersion":"1.0.2","root":{"path":"$T/rootfs"},
 "process":{"args":$1,"cwd":"/","env":["PATH=/bin"],"user":{"uid":0,"gid":0}},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},
  {"destination":"/etc/resolv.conf","type":"bind","source":"$T/resolv.conf","options":["rbind","ro"]}],
 "hooks":{"createRuntime":[{"path":"$2","args":["h","createRuntime"],"timeout":30}],
  "createContainer":[{"path":"$T/hook","args":["h","createContainer"]}],
  "startContainer":[{"path":"$T/hook","args":["h","startContainer"]}],
  "poststart":[{"path":"$T/hook","args":["h","poststart"]}],
  "poststop":[{"path":"$T/hook","args":["h","poststop"]}]},
 "linux":{"namespaces":[{"type":"pid"},{"type":"mount"},{"type":"network","path":"/run/netns/$NS"}],
  "cgroupsPath":"/$NS/${3:-n}"}}
EOF
}
if ! part netns; then
	:
elif command -v ip > /dev/null && command -v tc > /dev/null && ip netns add "$NS" 2> /dev/null; then
	ip link add vo-h type veth peer name vo-c netns "$NS" &&
		ip addr add 10.99.0.1/24 dev vo-h && ip link set vo-h up &&
		ip -n "$NS" link set lo up && ip -n "$NS" addr add 10.99.0.2/24 dev vo-c &&
		ip -n "$NS" link set vo-c up && ip -n "$NS" route add default via 10.99.0.1 || bad "veth setup"
	mkdir -p "$T/www" "$T/nb" && echo hello-from-host > "$T/www/index.html"
	"$BUSYBOX" httpd -f -p 10.99.0.1:18081 -h "$T/www" &
	httpd_pid=$!
	echo 'nameserver 10.99.0.53' > "$T/resolv.conf"
	# each hook logs its name and the status in the state on its stdin
	cat > "$T/hook" << 'EOF'
#!/bin/sh
st=$(cat)
s=${st#*\"status\":\"}
echo "$1:${s%%\"*}" >> "$(dirname "$0")/hooks.log"
EOF
	chmod +x "$T/hook"
	nbconf '["sh","-c","ping -c1 -W10 10.99.0.1 && wget -qO- http://10.99.0.1:18081/ && cat /etc/resolv.conf && ip -o -4 addr show"]' "$T/hook"
	if "$OCI" --root "$R" create --bundle "$T/nb" --pid-file "$T/npid" n1 > "$T/nout" 2> "$T/nerr"; then
		npid=$(cat "$T/npid")
		"$OCI" --root "$R" start n1 || bad "start n1"
		for _ in $(seq 1 600); do kill -0 "$npid" 2> /dev/null || break; sleep 0.1; done
		grep -q "1 packets received" "$T/nout" && ok "netns: the guest pings the veth's host side" ||
			bad "netns ping: $(cat "$T/nout" "$T/nerr")"
		grep -q hello-from-host "$T/nout" && ok "netns: wget from the host side" || bad "netns wget: $(cat "$T/nout")"
		grep -q "10.99.0.2/24" "$T/nout" && ok "netns: the guest has the veth's address" ||
			bad "netns address: $(cat "$T/nout")"
		grep -q "nameserver 10.99.0.53" "$T/nout" && ok "netns: resolv.conf from the bundle" || bad "resolv.conf"
		st=$("$OCI" --root "$R" state n1)
		case $st in *'"status":"stopped"'*) ok "state: stopped once the init exits" ;; *) bad "state: $st" ;; esac
		[ ! -e "$R/n1/vm/c" ] && ok "the VM went with the init" ||
			bad "VM left after the init exited: $(ls "$R/n1/vm")"
		"$OCI" --root "$R" delete n1 || bad "delete n1"
		# the VM took the veth with an ingress qdisc and a redirect: gone with it
		q=$(tc -n "$NS" qdisc show dev vo-c ingress 2>&1; tc -n "$NS" filter show dev vo-c ingress 2>&1)
		[ -z "$q" ] && ok "netns: the veth's ingress qdisc and filter removed" || bad "left on vo-c: $q"
		hl=$(tr '\n' ' ' < "$T/hooks.log")
		[ "$hl" = "createRuntime:creating createContainer:creating startContainer:created poststart:running poststop:stopped " ] &&
			ok "hooks ran in order with their states" || bad "hooks: $hl"
	else
		bad "create in a netns: $(cat "$T/nerr")"
	fi
	# a failing createRuntime hook fails create and leaves nothing
	nbconf '["true"]' /bin/false n2
	if "$OCI" --root "$R" create --bundle "$T/nb" n2 2> "$T/herr"; then
		bad "create with a failing hook succeeded"
		"$OCI" --root "$R" delete --force n2
	else
		# nothing: no state folder, and no cgroup (create went back to its own to remove it)
		grep -q createRuntime "$T/herr" && [ ! -e "$R/n2" ] && [ ! -e "/sys/fs/cgroup/$NS/n2" ] &&
			ok "a failing createRuntime hook: error, nothing left" ||
			bad "failing hook: $(cat "$T/herr"); left (made at, now $(date +%T.%N)): $(find "$R/n2" -printf '%p %TT ' 2> /dev/null | head -c 2000); vmm processes: $(ps -eo pid,etimes,args | grep '[v]mm' | head -c 2000)"
	fi
	# SIGTERM straight to the init proxy reaches the process
	nbconf '["sh","-c","trap \"echo got-term; exit 9\" TERM; echo ready; while :; do sleep 1; done"]' /bin/true
	if "$OCI" --root "$R" create --bundle "$T/nb" --pid-file "$T/tpid" n3 > "$T/tout" 2> "$T/terr"; then
		tpid=$(cat "$T/tpid")
		"$OCI" --root "$R" start n3
		for _ in $(seq 1 300); do grep -q ready "$T/tout" && break; sleep 0.1; done
		kill -TERM "$tpid"
		for _ in $(seq 1 600); do kill -0 "$tpid" 2> /dev/null || break; sleep 0.1; done
		grep -q got-term "$T/tout" && ok "SIGTERM to the init proxy reaches the process" ||
			bad "SIGTERM: $(cat "$T/tout" "$T/terr")"
		st=$("$OCI" --root "$R" state n3)
		case $st in *'"exitStatus":9'*) ok "state: exitStatus 9 after the trap" ;; *) bad "exit status of n3: $st" ;; esac
		"$OCI" --root "$R" delete --force n3
	else
		bad "create n3: $(cat "$T/terr")"
	fi
else
	skipped "no ip/tc or network namespaces"
fi

# ---- containerd ------------------------------------------------------------
if ! part ctr && ! part long; then
	:
elif command -v containerd > /dev/null && command -v ctr > /dev/null; then
	C=$T/ctd
	mkdir -p "$C"
	containerd --root "$C/root" --state "$C/state" --address "$C/sock" > "$C/log" 2>&1 &
	ctd_pid=$!
	for _ in $(seq 1 100); do ctr -a "$C/sock" version > /dev/null 2>&1 && break; sleep 0.2; done
	# an OCI image archive by hand: one layer, a config, a manifest, an index
	(
		cd "$T" && mkdir -p img/blobs/sha256 && cp layer.tar img/blobs/sha256/"$(sha256sum layer.tar | cut -d' ' -f1)"
		L=$(sha256sum layer.tar | cut -d' ' -f1) LS=$(stat -c %s layer.tar)
		printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$L" > cfg
		CD=$(sha256sum cfg | cut -d' ' -f1) CS=$(stat -c %s cfg)
		cp cfg img/blobs/sha256/"$CD"
		printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$CD" "$CS" "$L" "$LS" > man
		MD=$(sha256sum man | cut -d' ' -f1) MS=$(stat -c %s man)
		cp man img/blobs/sha256/"$MD"
		printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"localhost/bb:1"}}]}' "$MD" "$MS" > img/index.json
		echo '{"imageLayoutVersion":"1.0.0"}' > img/oci-layout
		tar -C img -cf img.tar .
	)
	ctr -a "$C/sock" image import --base-name localhost/bb "$T/img.tar" > /dev/null 2>&1 ||
		ctr -a "$C/sock" image import "$T/img.tar" > "$C/import" 2>&1
	if ctr -a "$C/sock" image ls -q | grep -q localhost/bb && part long; then
		mkdir -p "$LR"
		out=$(timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" --runc-root "$LR" localhost/bb:1 "$HEX" echo hi 2>&1)
		[ "$out" = hi ] && ok "ctr run, a 64-hex ID under $LR (socket paths of $((${#LR} + 92)) bytes)" ||
			bad "ctr run with a long root: $out"
		timeout 300 ctr -a "$C/sock" run -d --runc-binary "$OCI" --runc-root "$LR" localhost/bb:1 "$HEX" sleep 600 > /dev/null 2>&1
		out=$(timeout 120 ctr -a "$C/sock" task exec --exec-id e1 "$HEX" sh -c 'echo exec-ok; exit 5' 2>&1)
		rc=$?
		[ "$out" = exec-ok ] && [ "$rc" = 5 ] && ok "ctr task exec under the long root: output and status 5" ||
			bad "ctr task exec under the long root: '$out' status $rc"
		ctr -a "$C/sock" task kill "$HEX" 2> /dev/null
		for _ in $(seq 1 300); do ctr -a "$C/sock" task ls 2> /dev/null | grep -q "^$HEX .*STOPPED" && break; sleep 0.2; done
		ctr -a "$C/sock" task rm "$HEX" > /dev/null 2>&1
		ctr -a "$C/sock" container rm "$HEX" > /dev/null 2>&1
		left=$(find "$LR" -mindepth 2 2> /dev/null)
		[ -z "$left" ] && ok "the long root: stop and remove leave nothing" || bad "left under the long root: $left"
	fi
	if ! part ctr; then
		:
	elif ctr -a "$C/sock" image ls -q | grep -q localhost/bb; then
		out=$(timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" localhost/bb:1 t1 echo hi 2>&1)
		[ "$out" = hi ] && ok "ctr run echo hi" || bad "ctr run: $out"
		timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" localhost/bb:1 t2 sh -c 'exit 3' > /dev/null 2>&1
		rc=$?
		[ "$rc" = 3 ] && ok "ctr run exit status 3" || bad "ctr run exit status $rc"
		k=$(timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" localhost/bb:1 t3 uname -r 2>&1)
		[ -n "$k" ] && [ "$k" != "$(uname -r)" ] && ok "ctr: guest kernel $k" || bad "ctr uname -r: $k"
		# a terminal: ctr run -t (script(1) gives ctr one)
		timeout 300 script -qec "ctr -a $C/sock run -t --rm --runc-binary $OCI localhost/bb:1 t4 sh -c '[ -t 0 ] && [ -t 1 ] && echo is-a-tty; tty'" /dev/null < /dev/null > "$T/tty.out" 2>&1
		out=$(tr -d '\0' < "$T/tty.out")
		case $out in *is-a-tty*) ok "ctr run -t: a terminal" ;; *) bad "ctr run -t: $out" ;; esac
		# tty(1) finds its name: the pty is the container's /dev/pts
		case $out in *"/dev/pts/"[0-9]*) ok "ctr run -t: tty names /dev/pts/N" ;; *) bad "ctr run -t tty: $out" ;; esac
		# ctr writes a NUL to the terminal, which the container's pty
		# echoes as ^@ (runc's too); our own pty must not echo it again
		[ "$(tr -cd '\0' < "$T/tty.out" | wc -c)" = 0 ] && [ "$(grep -o '\^@' "$T/tty.out" | wc -l)" -le 1 ] &&
			ok "ctr run -t: no NUL bytes, no second echo" || bad "ctr run -t output: $(od -c "$T/tty.out" | head -4)"
		echo "(vmm-oci: $(od -c "$T/tty.out" | head -3 | tr '\n' ' '))"
		if command -v runc > /dev/null; then # what runc's looks like, for comparison
			timeout 60 script -qec "ctr -a $C/sock run -t --rm localhost/bb:1 t4r sh -c 'tty'" /dev/null < /dev/null > "$T/tty.runc" 2>&1
			echo "(runc: $(od -c "$T/tty.runc" | head -2 | tr '\n' ' '))"
		fi
		# exec and kill on a running container
		timeout 300 ctr -a "$C/sock" run -d --runc-binary "$OCI" localhost/bb:1 t5 sleep 600 > /dev/null 2>&1
		out=$(timeout 120 ctr -a "$C/sock" task exec --exec-id e1 t5 sh -c 'echo exec-ok; exit 5' 2>&1)
		rc=$?
		[ "$out" = exec-ok ] && [ "$rc" = 5 ] && ok "ctr task exec: output and status 5" ||
			bad "ctr task exec: '$out' status $rc"
		# a signal to an exec'd process (the shim signals its proxy)
		timeout 120 ctr -a "$C/sock" task exec --exec-id e2 t5 sh -c \
			'trap "echo got-usr1; exit 6" USR1; echo armed; while :; do sleep 1; done' > "$T/e2.out" 2>&1 &
		e2=$!
		for _ in $(seq 1 300); do grep -q armed "$T/e2.out" && break; sleep 0.2; done
		ctr -a "$C/sock" task kill --exec-id e2 --signal SIGUSR1 t5 2> "$T/kerr" || bad "ctr task kill --exec-id: $(cat "$T/kerr")"
		wait "$e2"
		rc=$?
		grep -q got-usr1 "$T/e2.out" && [ "$rc" = 6 ] && ok "ctr task kill --exec-id: SIGUSR1 reaches the exec'd process" ||
			bad "exec signal: status $rc: $(cat "$T/e2.out")"
		# the VM counted in the container's cgroup, as runc's init would
		# be (ctr's cgroupsPath /default/t5), and the shim's metrics of it
		vms=$(for f in $(grep -lx '0::/default/t5' /proc/[0-9]*/cgroup 2> /dev/null); do
			d=${f%/cgroup}; [ "$(readlink "$d/exe")" = "$(readlink -f "$OCI")" ] && tr '\0' ' ' < "$d/cmdline" 2> /dev/null | grep -q '^vmm run ' && echo "${d#/proc/}"
		done)
		[ -n "$vms" ] && ok "the container's VMM runs in its cgroup /default/t5 ($vms)" ||
			bad "no VMM in cgroup /default/t5: $(cat /sys/fs/cgroup/default/t5/cgroup.procs 2>&1 | tr '\n' ' ')"
		# jailed as root with a file server's capabilities (docs/security.md):
		# the relay outside, the VMM pid 1 of its own PID namespace
		why=""
		jv=""
		for p in $vms; do grep -q "^NSpid:[[:space:]]*$p[[:space:]]*1\$" /proc/$p/status && jv=$p; done
		[ -n "$jv" ] || why="$why no-vmm-in-its-pid-namespace"
		[ -n "$jv" ] && { grep -q "^CapEff:[[:space:]]*000000000000001f" /proc/$jv/status || why="$why caps"; }
		[ -n "$jv" ] && { [ "$(readlink /proc/$jv/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] || why="$why mntns"; }
		[ -n "$jv" ] && { [ ! -e /proc/$jv/root/etc/passwd ] || why="$why host-files"; }
		[ -z "$why" ] && ok "the container's VMM is jailed: pid 1 of its PID namespace, own mount namespace, CapEff 0x1f" ||
			bad "the container's VMM is not jailed:$why"
		ctr -a "$C/sock" task metrics t5 > "$T/metrics" 2>&1
		mem=$(awk '$1 ~ /^memory\.usage/ && $2 ~ /^[0-9]+$/ { print $2; exit }' "$T/metrics")
		[ -n "$mem" ] && [ "$mem" -ge $((16 << 20)) ] && ok "ctr task metrics: the VM's memory, $((mem >> 20)) MiB" ||
			bad "ctr task metrics: $(tr '\n' ' ' < "$T/metrics" | cut -c1-300)"
		ctr -a "$C/sock" task kill t5 2> "$T/kerr" || bad "ctr task kill: $(cat "$T/kerr")"
		for _ in $(seq 1 300); do ctr -a "$C/sock" task ls 2> /dev/null | grep -q "^t5 .*STOPPED" && break; sleep 0.2; done
		ctr -a "$C/sock" task ls 2> /dev/null | grep -q "^t5 .*STOPPED" && ok "ctr task kill: stopped" ||
			bad "ctr task kill: $(ctr -a "$C/sock" task ls 2>&1)"
		ctr -a "$C/sock" task rm t5 > /dev/null 2>&1 && ctr -a "$C/sock" container rm t5 > /dev/null 2>&1 &&
			ok "ctr task rm, container rm" || bad "ctr task rm t5"
		[ ! -e /sys/fs/cgroup/default/t5 ] && ok "delete removed the cgroup /default/t5" || bad "cgroup /default/t5 left"
	else
		bad "ctr image import: $(cat "$C/import" 2> /dev/null)"
	fi
else
	skipped "containerd/ctr not installed"
fi

# ---- Podman ----------------------------------------------------------------
if ! part podman; then
	:
elif command -v podman > /dev/null && command -v conmon > /dev/null; then
	P=(podman --root "$T/pod/root" --runroot "$T/pod/run" --storage-driver vfs --runtime "$OCI" --cgroup-manager cgroupfs
		--events-backend none)
	"${P[@]}" import "$T/layer.tar" localhost/bb:1 > /dev/null 2>&1 || tar -C "$T/rootfs" -c . | "${P[@]}" import - localhost/bb:1 > /dev/null
	out=$(timeout 300 "${P[@]}" run --rm --network none localhost/bb:1 sh -c 'echo hi; exit 3' 2> "$T/perr")
	rc=$?
	[ "$out" = hi ] && [ "$rc" = 3 ] && ok "podman run: hi, exit 3" || bad "podman run: '$out' status $rc: $(tail -3 "$T/perr")"
	# detached, exec, logs, stop, rm
	if timeout 300 "${P[@]}" run -d --name p1 --network none localhost/bb:1 sh -c 'echo started; exec sleep 600' > /dev/null 2> "$T/perr"; then
		out=$(timeout 120 "${P[@]}" exec p1 sh -c 'echo exec-ok; exit 4' 2> "$T/perr")
		rc=$?
		[ "$out" = exec-ok ] && [ "$rc" = 4 ] && ok "podman exec: output and status 4" ||
			bad "podman exec: '$out' status $rc: $(tail -3 "$T/perr")"
		"${P[@]}" logs p1 2> /dev/null | grep -q started && ok "podman logs" || bad "podman logs: $("${P[@]}" logs p1 2>&1)"
		timeout 120 "${P[@]}" stop -t 30 p1 > /dev/null 2> "$T/perr" && ok "podman stop" || bad "podman stop: $(tail -3 "$T/perr")"
		s=$("${P[@]}" inspect -f '{{.State.Status}}' p1 2>&1)
		[ "$s" = exited ] && ok "podman: exited after stop" || bad "podman state after stop: $s"
		"${P[@]}" rm p1 > /dev/null 2> "$T/perr" && [ -z "$("${P[@]}" ps -aq)" ] && ok "podman rm" ||
			bad "podman rm: $(tail -3 "$T/perr")"
	else
		bad "podman run -d: $(tail -3 "$T/perr")"
	fi
	# a published port: CNI's bridge and portmap make the namespace; the
	# host's curl reaches busybox httpd in the guest
	if [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/portmap ] && command -v curl > /dev/null; then
		mkdir -p "$T/cni"
		# CNI caches results in /var/lib/cni (read-only under tests/vmhost)
		if ! touch /var/lib/cni/.vmm-w 2> /dev/null && [ -d /var/lib/cni ]; then
			mount -t tmpfs tmpfs /var/lib/cni && cni_tmpfs=1
		fi
		rm -f /var/lib/cni/.vmm-w
		cat > "$T/cni/vmmtest.conflist" << EOF
{"cniVersion":"0.4.0","name":"vmmtest","plugins":[
 {"type":"bridge","bridge":"vmmcni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$T/cni-ipam",
   "ranges":[[{"subnet":"10.89.7.0/24","gateway":"10.89.7.1"}]]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
EOF
		if timeout 300 "${P[@]}" --network-config-dir "$T/cni" run -d --name web --network vmmtest \
			-p 127.0.0.1:18080:80 localhost/bb:1 httpd -f -p 80 -h /www > /dev/null 2> "$T/perr"; then
			got=
			for _ in $(seq 1 60); do
				got=$(curl -s --max-time 5 http://127.0.0.1:18080/) && [ -n "$got" ] && break
				sleep 0.5
			done
			[ "$got" = hello-from-guest ] && ok "podman run -p 127.0.0.1:18080:80: the host reaches httpd in the guest" ||
				bad "podman -p: '$got'; $(tail -3 "$T/perr")"
			timeout 120 "${P[@]}" --network-config-dir "$T/cni" rm -f -t 5 web > /dev/null 2>&1
		else
			bad "podman run -p: $(tail -5 "$T/perr")"
		fi
	else
		skipped "podman -p: no CNI bridge/portmap plugins or curl"
	fi
else
	skipped "podman/conmon not installed"
fi

echo "oci: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
