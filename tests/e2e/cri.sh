#!/usr/bin/env bash
# The CRI tier: a pod driven as kubelet drives one, over the CRI's gRPC
# API, against a private containerd (its own root, state and socket in a
# temporary folder) whose CRI plugin has two runtime handlers: `vmm`
# (io.containerd.vmm.v2: build/containerd-shim-vmm-v2 in front of
# containerd's runc shim, which runs build/vmm-oci with the Root
# docs/kubernetes.md gives) and `runc`, the same flow on each in the same
# run, with the figures side by side (tests/e2e/cri_client.py says what
# the flow checks). The client is generated at test time from the CRI's
# api.proto (../shared/specs/cri-api, or $VMM_SPECS/cri-api) with
# Debian's python3-grpc-tools; nothing generated is kept. Needs /dev/kvm
# (tests/vmhost/run.sh provides one) and root; skips, saying why, when the
# proto, containerd or the gRPC modules are missing.
#   tests/e2e/cri.sh [BUILD_DIR]
# VMM_CRI_HANDLERS="vmm runc" (the default): the handlers to run.
set -u
B=$(cd "${1:-build}" && pwd)
OCI=$B/vmm-oci
HERE=$(cd "$(dirname "$0")" && pwd)
SPECS=${VMM_SPECS:-$HERE/../../../shared/specs}
PROTO=$SPECS/cri-api/api.proto
PY=/usr/bin/python3 # Debian's, with its python3-grpcio (not a pyenv one)
ROOT=/run/containerd/vmm-oci # docs/kubernetes.md's Root
HANDLERS=${VMM_CRI_HANDLERS:-vmm runc}
pass=0 fail=0 skip=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
skip_all() { echo "skipped: $*"; echo "cri: 0 passed, 0 failed, 1 skipped"; exit 0; }

[ -r "$PROTO" ] || skip_all "no CRI api.proto at $PROTO (set VMM_SPECS to the folder holding cri-api/)"
[ -e /dev/kvm ] || skip_all "no /dev/kvm (run under tests/vmhost/run.sh: make e2e-cri)"
[ "$(id -u)" = 0 ] || skip_all "needs root"
command -v containerd > /dev/null && command -v ctr > /dev/null || skip_all "containerd/ctr not installed (boot/deps.sh)"
$PY -c 'import grpc, grpc_tools' 2> /dev/null || skip_all "no python3-grpcio/python3-grpc-tools for $PY (boot/deps.sh)"
[ -x "$OCI" ] || { echo "no $OCI: make build/vmm-oci" >&2; exit 1; }
[ -x "$B/containerd-shim-vmm-v2" ] || { echo "no $B/containerd-shim-vmm-v2: make build/containerd-shim-vmm-v2" >&2; exit 1; }
BUSYBOX=$(command -v busybox) || skip_all "no busybox"

T=$(mktemp -d /tmp/vmm-cri.XXXXXX)
ctd_pid= cni_tmpfs=
cleanup() {
	local p
	[ -n "$ctd_pid" ] && kill "$ctd_pid" 2> /dev/null && wait "$ctd_pid" 2> /dev/null
	# the shims this containerd started (they outlive it), by their address
	for p in /proc/[0-9]*; do
		grep -qF -- "$T/ctd.sock" "$p/cmdline" 2> /dev/null && kill -9 "${p#/proc/}" 2> /dev/null
	done
	for p in $(awk -v t="$T" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$p" 2> /dev/null
	done
	ip link del vmmcri0 2> /dev/null
	[ -n "$cni_tmpfs" ] && umount /var/lib/cni 2> /dev/null
	rm -rf "$T" 2> /dev/null
}
trap cleanup EXIT

# ---- the client ----------------------------------------------------------------
if $PY "$HERE/cri_client.py" gen "$T/stubs" --proto "$PROTO" 2> "$T/gen.err"; then
	ok "CRI client generated from $PROTO"
else
	bad "generating the CRI client: $(tail -3 "$T/gen.err")"
	echo "cri: $pass passed, $fail failed, $skip skipped"
	exit 1
fi

# ---- images: a busybox root, as a workload image and as the pause image -------
mkdir -p "$T/rootfs/bin" "$T/rootfs/proc" "$T/rootfs/sys" "$T/rootfs/dev" "$T/rootfs/etc" "$T/rootfs/tmp"
cp "$BUSYBOX" "$T/rootfs/bin/busybox"
for a in sh echo cat ls uname sleep true false id hostname mount httpd wget nc sed touch test grep; do ln -s busybox "$T/rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' > "$T/rootfs/etc/passwd"
mkdir -p "$T/rootfs/www" && echo hello-from-the-pod > "$T/rootfs/www/index.html"
tar -C "$T/rootfs" -cf "$T/layer.tar" .
# oci_archive NAME REF CONFIG_JSON_WITHOUT_ROOTFS: an OCI image layout tar
oci_archive() (
	d=$T/img-$1 && mkdir -p "$d/blobs/sha256" && cd "$d" || exit 1
	L=$(sha256sum "$T/layer.tar" | cut -d' ' -f1) LS=$(stat -c %s "$T/layer.tar")
	cp "$T/layer.tar" "blobs/sha256/$L"
	printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$3" "$L" > ../cfg-$1
	CD=$(sha256sum ../cfg-$1 | cut -d' ' -f1) CS=$(stat -c %s ../cfg-$1)
	cp ../cfg-$1 "blobs/sha256/$CD"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$CD" "$CS" "$L" "$LS" > ../man-$1
	MD=$(sha256sum ../man-$1 | cut -d' ' -f1) MS=$(stat -c %s ../man-$1)
	cp ../man-$1 "blobs/sha256/$MD"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' "$MD" "$MS" "$2" > index.json
	echo '{"imageLayoutVersion":"1.0.0"}' > oci-layout
	tar -cf "$T/$1.tar" .
)
oci_archive bb localhost/bb:1 '{"Env":["PATH=/bin"],"Cmd":["sh"]}'
# the pod's sandbox ("pause") container: waits, and exits on SIGTERM
oci_archive pause localhost/pause:1 \
	'{"Env":["PATH=/bin"],"Entrypoint":["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait; done"]}'

# ---- a private containerd with the two handlers ---------------------------------
mkdir -p "$T/cni" "$T/logs"
# A CNI network for the second pod (bridge + host-local), when the plugins
# are there; CNI caches results in /var/lib/cni (read-only under
# tests/vmhost: a tmpfs on it then, as tests/e2e/oci.sh does).
cni=
if [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && command -v wget > /dev/null; then
	if ! touch /var/lib/cni/.vmm-w 2> /dev/null && [ -d /var/lib/cni ]; then
		mount -t tmpfs tmpfs /var/lib/cni && cni_tmpfs=1
	fi
	rm -f /var/lib/cni/.vmm-w
	cat > "$T/cni/10-vmmcri.conflist" << EOF
{"cniVersion":"0.4.0","name":"vmmcri","plugins":[
 {"type":"bridge","bridge":"vmmcri0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$T/cni-ipam",
   "ranges":[[{"subnet":"10.89.9.0/24","gateway":"10.89.9.1"}]]}}]}
EOF
	cni=vmmcri0
else
	echo "skip: a pod on a CNI bridge: no CNI bridge/host-local plugins or wget"
	skip=$((skip + 1))
fi
cat > "$T/config.toml" << EOF
version = 2
root = "$T/root"
state = "$T/state"
[grpc]
  address = "$T/ctd.sock"
[ttrpc]
  address = "$T/ctd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$T/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$T/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.vmm]
      runtime_type = "io.containerd.vmm.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
# containerd finds containerd-shim-vmm-v2 (io.containerd.vmm.v2) on its PATH
PATH="$B:$PATH" containerd --config "$T/config.toml" > "$T/containerd.log" 2>&1 &
ctd_pid=$!
for _ in $(seq 1 150); do ctr -a "$T/ctd.sock" version > /dev/null 2>&1 && break; sleep 0.2; done
if ctr -a "$T/ctd.sock" version > /dev/null 2>&1; then
	ok "a private containerd ($(containerd --version | awk '{print $3}')) on $T/ctd.sock"
else
	bad "containerd did not start: $(tail -5 "$T/containerd.log")"
	echo "cri: $pass passed, $fail failed, $skip skipped"
	exit 1
fi
imported=1
for i in bb pause; do
	ctr -a "$T/ctd.sock" -n k8s.io image import "$T/$i.tar" > "$T/import-$i" 2>&1 || imported=0
done
[ $imported = 1 ] && ok "images imported into k8s.io: $(ctr -a "$T/ctd.sock" -n k8s.io image ls -q | tr '\n' ' ')" ||
	bad "ctr image import: $(cat "$T"/import-*)"

# ---- the flow, per handler --------------------------------------------------------
for h in $HANDLERS; do
	echo "---- handler $h"
	root=$ROOT
	[ "$h" = vmm ] || root=/run/containerd/runc
	$PY "$HERE/cri_client.py" flow --stubs "$T/stubs" --state "$T/state" --socket "$T/ctd.sock" --handler "$h" \
		--image localhost/bb:1 --logs "$T/logs" --vmm "$B/vmm" --root "$root" --report "$T/fig-$h.json" \
		${cni:+--cni "$cni"} > "$T/flow-$h" 2>&1
	cat "$T/flow-$h"
	p=$(sed -n 's/^-- cri [a-z]*: \([0-9]*\) passed.*/\1/p' "$T/flow-$h")
	f=$(sed -n 's/^-- cri [a-z]*: [0-9]* passed, \([0-9]*\) failed.*/\1/p' "$T/flow-$h")
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-1}))
	if [ "${f:-1}" != 0 ]; then
		echo "     containerd's log (tail):"
		tail -15 "$T/containerd.log" | sed 's/^/     | /'
	fi
done

# ---- the figures, side by side ------------------------------------------------------
$PY - "$T" $HANDLERS << 'EOF'
import json, os, sys
t, hs = sys.argv[1], sys.argv[2:]
figs = {h: json.load(open(os.path.join(t, "fig-%s.json" % h))) for h in hs if os.path.exists(os.path.join(t, "fig-%s.json" % h))}
rows = [("RunPodSandbox (s)", "run_pod_sandbox_s"), ("CreateContainer (s)", "create_container_s"),
        ("StartContainer (s)", "start_container_s"), ("RunPodSandbox to running container (s)", "pod_to_running_s"),
        ("ExecSync latency, median of 5 (ms)", "exec_sync_ms"), ("memory per pod, PSS (MiB)", "pod_pss_mib"),
        ("memory per pod with 3 containers, PSS (MiB)", "pod3_pss_mib"),
        ("processes per pod", "pod_processes"), ("processes of the vmm binary", "vmm_processes"),
        ("of the pod's PSS, the thin shim (MiB)", "thin_shim_pss_mib"),
        ("VMs for the pod", "vms")]
print("%-40s" % "figures (this run)" + "".join("%12s" % h for h in figs))
for name, k in rows:
    print("%-40s" % name + "".join("%12s" % figs[h].get(k, "-") for h in figs))
EOF

echo "cri: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
