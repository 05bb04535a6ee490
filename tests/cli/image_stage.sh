#!/usr/bin/env bash
# vmm image import's staging tree is nobody else's to reach (no KVM, a
# few seconds). Root unpacks an image with its owners and modes, set-uid
# files included; while the tree is staged on the host, another user
# who can reach it runs those files as root. The second layer of the
# OCI layout here is a FIFO: the import waits on it, with the first
# layer's set-uid file staged, while this checks what uid 65534 sees.
#   image_stage.sh VMM
set -u
vmm=$1
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

if [ "$(id -u)" != 0 ] || ! command -v setpriv > /dev/null || ! command -v python3 > /dev/null ||
	! command -v mkfs.ext4 > /dev/null; then
	echo "skip all: needs root, setpriv, python3 and mkfs.ext4"
	echo "image-stage: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
tmp=$(mktemp -d)
writer=
cleanup() {
	[ -n "$writer" ] && kill "$writer" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp" # the store's parents are reachable, as /var/lib is
# Its own cache: layers another run left in the unpack cache would not be
# unpacked (staged) again.
export VMM_IMAGE_DIR=$tmp/images VMM_STATE_DIR=$tmp/state VMM_LIB_DIR=$tmp/lib VMM_CACHE=$tmp/cache
mkdir -p "$tmp/lib/guest" && printf '#!/bin/sh\n' > "$tmp/lib/guest/guest-init"

# The layout: layer 1 a tar with a set-uid root file, layer 2 a FIFO
# (its tar in $tmp/layer2.tar, written into the FIFO later).
python3 - "$tmp/layout" "$tmp/layer2.tar" <<'PY'
import hashlib, io, json, os, sys, tarfile
out, l2path = sys.argv[1:3]
os.makedirs(out + "/blobs/sha256")
def tar(name, mode):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
        ti = tarfile.TarInfo(name); ti.mode = mode; ti.size = 3
        t.addfile(ti, io.BytesIO(b"#!\n"))
    return b.getvalue()
def blob(data, fifo=False):
    d = hashlib.sha256(data).hexdigest()
    p = out + "/blobs/sha256/" + d
    if fifo:
        os.mkfifo(p)
    else:
        open(p, "wb").write(data)
    return "sha256:" + d
l1, l2 = tar("suid-root", 0o4755), tar("other", 0o644)
open(l2path, "wb").write(l2)
layers = [blob(l1), blob(l2, fifo=True)]
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                  "rootfs": {"type": "layers", "diff_ids": layers}}).encode()
man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(cfg), "size": len(cfg)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d,
                "size": len(x)} for d, x in zip(layers, (l1, l2))]}).encode()
idx = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": blob(man), "size": len(man)}]})
open(out + "/index.json", "w").write(idx)
open(out + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
PY
l2=$(ls "$tmp"/layout/blobs/sha256/* | while read -r f; do [ -p "$f" ] && echo "$f"; done)

timeout 60 "$vmm" image import --dir "$tmp/layout" --name stagetest > "$tmp/out" 2>&1 &
imp=$!
staged=
for _ in $(seq 200); do
	staged=$(find "$VMM_IMAGE_DIR" -name suid-root 2> /dev/null | head -1)
	[ -n "$staged" ] && break
	sleep 0.05
done
if [ -z "$staged" ]; then
	bad "the import staged layer 1 (see below)"
	sed 's/^/     | /' "$tmp/out"
else
	if setpriv --reuid=65534 --regid=65534 --clear-groups stat "$staged" > /dev/null 2>&1; then
		bad "another user reaches the staged set-uid file $staged"
	else
		ok "another user cannot reach the staging tree"
	fi
fi
timeout 30 sh -c 'cat "$1" > "$2"' sh "$tmp/layer2.tar" "$l2" &
writer=$!
if wait "$imp"; then
	ok "the import finished"
else
	bad "the import failed (see below)"
	sed 's/^/     | /' "$tmp/out"
fi
wait "$writer" 2> /dev/null
writer=
img=$(find "$VMM_IMAGE_DIR" -name rootfs.ext4 | head -1)
if [ -n "$img" ] && debugfs -R "stat /" "$img" 2> /dev/null | grep -q "Mode:  0755"; then
	ok "the image's root directory is 0755"
elif [ -z "$img" ]; then
	bad "no rootfs.ext4"
else
	bad "the image's root directory mode: $(debugfs -R 'stat /' "$img" 2> /dev/null | grep Mode)"
fi
if [ -z "$(find "$VMM_IMAGE_DIR" -name suid-root)" ]; then
	ok "nothing staged is left"
else
	bad "the staging tree is left behind"
fi
echo "image-stage: $pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
