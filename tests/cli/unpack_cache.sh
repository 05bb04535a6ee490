#!/usr/bin/env bash
# The unpack cache (no KVM, seconds): two OCI layouts share their first
# layer. Importing the first twice unpacks nothing the second time; the
# second layout starts from the shared layer's cached tree, and its own
# whiteout of a file of that layer removes it from its image only (the
# cached tree and the first image keep it).
#   unpack_cache.sh VMM GUEST_INIT
set -u
vmm=$(realpath "$1")
gi=$2
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ] || ! command -v python3 > /dev/null || ! command -v debugfs > /dev/null; then
	echo "skip all: needs root, python3 and debugfs"
	echo "unpack-cache: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
export VMM_IMAGE_DIR=$tmp/images VMM_LIB_DIR=$tmp/lib VMM_CACHE=$tmp/cache
mkdir -p "$tmp/lib/guest"
cp "$gi" "$tmp/lib/guest/guest-init"
python3 - "$tmp" <<'PY'
import hashlib, io, json, os, sys, tarfile
tmp = sys.argv[1]
def tar(files):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode in files:
            ti = tarfile.TarInfo(name); ti.mode = mode; ti.size = len(data); ti.uid = 7; ti.gid = 8
            t.addfile(ti, io.BytesIO(data))
    return b.getvalue()
def layout(out, layers):
    os.makedirs(out + "/blobs/sha256")
    def blob(data):
        d = hashlib.sha256(data).hexdigest()
        open(out + "/blobs/sha256/" + d, "wb").write(data)
        return "sha256:" + d, len(data)
    ls = [blob(l) for l in layers]
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                      "rootfs": {"type": "layers", "diff_ids": [d for d, _ in ls]}}).encode()
    cd, cs = blob(cfg)
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": s}
                   for d, s in ls]}).encode()
    md, ms = blob(man)
    json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
               "digest": md, "size": ms}]}, open(out + "/index.json", "w"))
    open(out + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
l1 = tar([("base/a", b"from layer 1\n", 0o4755), ("base/b", b"b\n", 0o644)])
l2 = tar([("two", b"2\n", 0o644)])
l3 = tar([("base/.wh.a", b"", 0o644), ("three", b"3\n", 0o600)])
layout(tmp + "/A", [l1, l2])
layout(tmp + "/B", [l1, l3])
PY
has() { debugfs -R "stat $2" "$VMM_IMAGE_DIR/$1/rootfs.ext4" 2> /dev/null | grep -q '^Inode:'; }
"$vmm" image import --dir "$tmp/A" --name a > /dev/null 2> "$tmp/one"
if ! grep -q 'unpack cache' "$tmp/one" && has a/1 /base/a && has a/1 /two; then ok "the first import unpacks both layers"
else cp "$tmp/one" "$tmp/err"; bad "first import"; fi
"$vmm" image import --dir "$tmp/A" --name a > /dev/null 2> "$tmp/two"
if grep -q 'layers 1-2/2 from the unpack cache' "$tmp/two" && ! grep -q 'layer 1/2' "$tmp/two" && has a/2 /base/a && has a/2 /two &&
	debugfs -R "stat /base/a" "$VMM_IMAGE_DIR/a/2/rootfs.ext4" 2> /dev/null | grep -q 'Mode:  04755' &&
	debugfs -R "stat /base/a" "$VMM_IMAGE_DIR/a/2/rootfs.ext4" 2> /dev/null | grep -q 'User:     7   Group:     8'; then
	ok "the same image again: no layer unpacked, owners and the set-uid bit kept"
else cp "$tmp/two" "$tmp/err"; bad "second import"; fi
"$vmm" image import --dir "$tmp/A" --name a > /dev/null 2> "$tmp/two"
"$vmm" image import --dir "$tmp/B" --name b > /dev/null 2> "$tmp/three"
if grep -q 'layers 1-1/2 from the unpack cache' "$tmp/three" && grep -q 'layer 2/2' "$tmp/three" && ! has b/1 /base/a &&
	has b/1 /base/b && has b/1 /three && ! has b/1 /two; then
	ok "a second image sharing layer 1 starts from it; its whiteout removes base/a from it only"
else cp "$tmp/three" "$tmp/err"; bad "shared first layer"; fi
"$vmm" image import --dir "$tmp/A" --name a > /dev/null 2> "$tmp/four"
if grep -q 'layers 1-2/2' "$tmp/four" && has a/4 /base/a && [ "$(stat -c %a "$VMM_CACHE/unpack")" = 700 ]; then
	ok "the cached trees are untouched by the other image's whiteout; the cache is 0700"
else cp "$tmp/four" "$tmp/err"; bad "cache after the whiteout"; fi
echo "unpack-cache: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
