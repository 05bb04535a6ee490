#!/usr/bin/env bash
# vmm oci end to end: the runtime by hand (a bundle, create/start/state/
# kill/delete), then containerd's ctr and Podman with build/vmm-oci as
# their runtime. Needs /dev/kvm (tests/vmhost/run.sh provides one) and
# root; each engine part skips, saying so, when its tools are missing.
#   tests/e2e/oci.sh [BUILD_DIR]
set -u
B=$(cd "${1:-build}" && pwd)
OCI=$B/vmm-oci
T=$(mktemp -d /tmp/vmm-oci-e2e.XXXXXX)
pass=0 fail=0 skip=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAILED: $*"; fail=$((fail + 1)); }
skipped() { echo "skipped: $*"; skip=$((skip + 1)); }
ctd_pid=
cleanup() {
	[ -n "$ctd_pid" ] && kill "$ctd_pid" 2> /dev/null
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
for a in sh echo cat ls uname sleep true false id hostname mount; do ln -s busybox "$T/rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' > "$T/rootfs/etc/passwd"

# ---- the runtime by hand ---------------------------------------------------
R=$T/state
mkdir -p "$T/bundle"
cat > "$T/bundle/config.json" << EOF
{"ociVersion":"1.0.2","root":{"path":"$T/rootfs"},"hostname":"oci-test",
 "process":{"args":["sh","-c","echo out-\$(hostname); echo err >&2; uname -r; exit 7"],"cwd":"/","env":["PATH=/bin"],
  "user":{"uid":0,"gid":0}},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"}]}
EOF
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
	"$OCI" --root "$R" exec c1 true 2> "$T/e" && bad "exec into a stopped container" ||
		{ grep -q stopped "$T/e" && ok "exec into stopped refused" || bad "exec: $(cat "$T/e")"; }
	"$OCI" --root "$R" delete c1 && ok "delete" || bad "delete"
	[ ! -e "$R/c1" ] && ok "nothing left" || bad "left behind: $(ls -R "$R/c1" | head)"
else
	bad "create: $(cat "$T/err")"
fi

# ---- containerd ------------------------------------------------------------
if command -v containerd > /dev/null && command -v ctr > /dev/null; then
	C=$T/ctd
	mkdir -p "$C"
	containerd --root "$C/root" --state "$C/state" --address "$C/sock" > "$C/log" 2>&1 &
	ctd_pid=$!
	for _ in $(seq 1 100); do ctr -a "$C/sock" version > /dev/null 2>&1 && break; sleep 0.2; done
	tar -C "$T/rootfs" -cf "$T/layer.tar" .
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
	if ctr -a "$C/sock" image ls -q | grep -q localhost/bb; then
		out=$(timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" localhost/bb:1 t1 echo hi 2>&1)
		[ "$out" = hi ] && ok "ctr run echo hi" || bad "ctr run: $out"
		timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" localhost/bb:1 t2 sh -c 'exit 3' > /dev/null 2>&1
		rc=$?
		[ "$rc" = 3 ] && ok "ctr run exit status 3" || bad "ctr run exit status $rc"
		k=$(timeout 300 ctr -a "$C/sock" run --rm --runc-binary "$OCI" localhost/bb:1 t3 uname -r 2>&1)
		[ -n "$k" ] && [ "$k" != "$(uname -r)" ] && ok "ctr: guest kernel $k" || bad "ctr uname -r: $k"
	else
		bad "ctr image import: $(cat "$C/import" 2> /dev/null)"
	fi
else
	skipped "containerd/ctr not installed"
fi

# ---- Podman ----------------------------------------------------------------
if command -v podman > /dev/null && command -v conmon > /dev/null; then
	P=(podman --root "$T/pod/root" --runroot "$T/pod/run" --storage-driver vfs --runtime "$OCI" --cgroup-manager cgroupfs
		--events-backend none)
	"${P[@]}" import "$T/layer.tar" localhost/bb:1 > /dev/null 2>&1 || tar -C "$T/rootfs" -c . | "${P[@]}" import - localhost/bb:1 > /dev/null
	out=$(timeout 300 "${P[@]}" run --rm --network none localhost/bb:1 sh -c 'echo hi; exit 3' 2> "$T/perr")
	rc=$?
	[ "$out" = hi ] && [ "$rc" = 3 ] && ok "podman run: hi, exit 3" || bad "podman run: '$out' status $rc: $(tail -3 "$T/perr")"
else
	skipped "podman/conmon not installed"
fi

echo "oci: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
