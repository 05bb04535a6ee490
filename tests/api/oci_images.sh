#!/usr/bin/env bash
# vmm image pull / import / export against real tools (no VM, no KVM):
# docker-registry on a loopback port with a self-signed CA, an image made
# by umoci (busybox tree, two layers: a whiteout and a hard link), pushed
# and saved by skopeo; the resulting ext4 checked with debugfs.
#   tests/api/oci_images.sh build/vmm
set -uo pipefail

VMM=$(realpath "$1")
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

for t in docker-registry skopeo umoci debugfs openssl python3; do
	if ! command -v "$t" >/dev/null; then
		echo "oci_images: SKIP: $t is not installed (make deps installs it)"
		exit 0
	fi
done
BUSYBOX=${BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] || { echo "oci_images: SKIP: no $BUSYBOX"; exit 0; }

T=$(mktemp -d /tmp/vmm-oci.XXXXXX)
REG_PID=
cleanup() { [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export VMM_IMAGE_DIR=$T/store VMM_CACHE=$T/cache
cd "$T" || exit 1

# ---- an image: layer 1 busybox + files, layer 2 deletes one, adds one ----
umoci init --layout lay >/dev/null && umoci new --image lay:t >/dev/null &&
	umoci unpack --image lay:t b1 >/dev/null 2>&1 || { echo "umoci failed"; exit 1; }
mkdir -p b1/rootfs/bin b1/rootfs/data/sub b1/rootfs/etc
cp "$BUSYBOX" b1/rootfs/bin/busybox && ln -s busybox b1/rootfs/bin/sh
echo hello > b1/rootfs/data/hello.txt && ln b1/rootfs/data/hello.txt b1/rootfs/data/hard.txt
echo gone > b1/rootfs/data/gone.txt && echo old > b1/rootfs/data/sub/old.txt
chmod 4755 b1/rootfs/data/hello.txt && chown 1000:1000 b1/rootfs/data/sub
umoci repack --image lay:t b1 >/dev/null
umoci config --image lay:t --config.env FOO=bar --config.workingdir /data --config.cmd /bin/sh \
	--config.cmd -c --config.cmd 'echo hi' --config.exposedports 8080/tcp --config.label vmm.mem=256 \
	--config.label vmm.cpus=2 --config.user 1000 >/dev/null
umoci unpack --image lay:t b2 >/dev/null 2>&1
rm b2/rootfs/data/gone.txt && rm -r b2/rootfs/data/sub && mkdir b2/rootfs/data/sub && echo new > b2/rootfs/data/sub/new.txt
umoci repack --image lay:t b2 >/dev/null

# ---- a registry with TLS from a test CA ----
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=vmm-test-ca -keyout ca.key -out ca.crt \
	-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout reg.key -out reg.csr >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > ext.cnf
openssl x509 -req -in reg.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile ext.cnf -out reg.crt \
	>/dev/null 2>&1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > reg.yml <<EOF
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $T/regdata }, delete: { enabled: true } }
http:
  addr: 127.0.0.1:$PORT
  tls: { certificate: $T/reg.crt, key: $T/reg.key }
EOF
docker-registry serve reg.yml > reg.log 2>&1 &
REG_PID=$!
for _ in $(seq 50); do curl -sf --cacert ca.crt "https://127.0.0.1:$PORT/v2/" >/dev/null && break; sleep 0.2; done
mkdir -p certs && cp ca.crt certs/ca.crt
R=127.0.0.1:$PORT
skopeo copy -q --dest-cert-dir certs oci:lay:t "docker://$R/team/busy:1.0" >/dev/null 2>&1 ||
	{ bad "skopeo copy to the registry"; cat reg.log; exit 1; }
skopeo copy -q --dest-cert-dir certs --format v2s2 oci:lay:t "docker://$R/team/busy:v2s2" >/dev/null 2>&1
skopeo copy -q oci:lay:t "docker-archive:$T/d.tar:team/busy:1.0" >/dev/null 2>&1
skopeo copy -q oci:lay:t "oci-archive:$T/o.tar" >/dev/null 2>&1

# The tree every way in must give.
img_tree() { # IMAGE:V -> listing of /data and the metadata that matters
	local f=$VMM_IMAGE_DIR/${1%%:*}/${1##*:}/rootfs.ext4
	debugfs -R 'ls -l /data' "$f" 2>/dev/null | awk '{print $2, $3, $4, $5, $6, $NF}' | sort
	debugfs -R 'ls -l /data/sub' "$f" 2>/dev/null | awk '{print $2, $4, $NF}' | sort
	debugfs -R 'stat /bin/busybox' "$f" 2>/dev/null | grep -o 'Size: [0-9]*'
}
export -f img_tree
export VMM_IMAGE_DIR

# ---- pull over HTTPS ----
out=$("$VMM" image pull --ca-file ca.crt "$R/team/busy:1.0" 2>pull.err)
check "pull: prints NAME:VERSION" test "$out" = busy:1
img_tree busy:1 > want.txt
check "pull: whiteout removed gone.txt" bash -c "! grep -q gone.txt want.txt"
check "pull: opaque sub has only new.txt" bash -c "grep -q 'new.txt' want.txt && ! grep -q old.txt want.txt"
check "pull: hard link shares the inode" bash -c \
	"[ \$(debugfs -R 'ls -l /data' $VMM_IMAGE_DIR/busy/1/rootfs.ext4 2>/dev/null | grep -E 'hello.txt|hard.txt' | awk '{print \$1}' | sort -u | wc -l) = 1 ]"
check "pull: setuid mode kept" grep -q '104755.*hello.txt' want.txt
check "pull: /sbin/vmm-init installed" bash -c \
	"debugfs -R 'stat /sbin/vmm-init' $VMM_IMAGE_DIR/busy/1/rootfs.ext4 2>/dev/null | grep -q 'Type: regular'"
check "pull: busybox content" bash -c "grep -q 'Size: $(stat -c %s "$BUSYBOX")' want.txt"
cfg=$VMM_IMAGE_DIR/busy/1/config.json
check "pull: config.json has Env/WorkingDir/Cmd/User/ports" bash -c \
	"grep -q '\"FOO=bar\"' $cfg && grep -q '\"WorkingDir\":\"/data\"' $cfg && grep -q '\"Cmd\":\\[\"/bin/sh\",\"-c\",\"echo hi\"\\]' $cfg && grep -q '\"User\":\"1000\"' $cfg && grep -q 8080/tcp $cfg"
check "pull: labels vmm.mem/vmm.cpus become defaults" bash -c \
	"grep -q '\"mem_mib\":256' $VMM_IMAGE_DIR/busy/1/image.json && grep -q '\"cpus\":2' $VMM_IMAGE_DIR/busy/1/image.json"
nblobs=$(ls cache/blobs/sha256 | grep -vc '\.lock$')
out=$("$VMM" image pull --ca-file ca.crt --name again "$R/team/busy:1.0" 2>again.err)
check "pull again: blobs come from the cache" bash -c "grep -q cached again.err && [ $nblobs = \$(ls cache/blobs/sha256 | grep -vc '\.lock\$') ]"
out=$("$VMM" image pull --ca-file ca.crt --name v2s2 "$R/team/busy:v2s2" 2>/dev/null)
check "pull: Docker v2 schema 2 manifest" test "$out" = v2s2:1
check "pull: same tree from v2s2" bash -c "diff <(img_tree v2s2:1) want.txt"

# two pulls of the same image at once share the cache safely
rm -rf cache
"$VMM" image pull -q --ca-file ca.crt --name par "$R/team/busy:1.0" > par1.out 2>&1 &
"$VMM" image pull -q --ca-file ca.crt --name par "$R/team/busy:1.0" > par2.out 2>&1
wait $!
check "two pulls at once: both built" bash -c "[ \$(cat par1.out par2.out | grep -c '^par:') = 2 ]"
check "two pulls at once: no partial left" bash -c "! ls cache/blobs/sha256 | grep -q partial"

# ---- bad input ----
"$VMM" image pull --ca-file ca.crt "$R/team/nothere:1" > /dev/null 2> e404.err
check "404: one line naming the manifest" bash -c "[ \$(wc -l < e404.err) -le 2 ] && grep -q 'manifest: .*404' e404.err"
"$VMM" image pull "$R/team/busy:1.0" > /dev/null 2> eca.err
check "untrusted CA: refused" grep -q -i 'certificate\|SSL' eca.err
"$VMM" image pull --insecure --ca-file ca.crt "$R/team/busy:1.0" > /dev/null 2> eins.err
check "--insecure refused for an https registry" grep -q 'only for an explicit http://' eins.err
# a layer whose content does not match its digest: corrupt it in the registry
big=$(ls -S regdata/docker/registry/v2/blobs/sha256/*/*/data | head -1)
dig=sha256:$(basename "$(dirname "$big")")
cp "$big" big.save && printf 'X' | dd of="$big" bs=1 seek=100 conv=notrunc 2>/dev/null
rm -rf cache; before=$(ls "$VMM_IMAGE_DIR" | wc -l)
"$VMM" image pull --ca-file ca.crt --name bad "$R/team/busy:1.0" > /dev/null 2> emis.err
check "digest mismatch: error names the layer" grep -q "layer 1/2 ${dig:0:19}.*digest mismatch" emis.err
check "digest mismatch: no cache entry, no image" bash -c \
	"[ ! -e cache/blobs/sha256/${dig#sha256:} ] && [ ! -e cache/blobs/sha256/${dig#sha256:}.partial ] && [ $before = \$(ls $VMM_IMAGE_DIR | wc -l) ]"
cp big.save "$big"

# ---- import: docker save, OCI archive, OCI layout ----
out=$("$VMM" image import -q d.tar 2>/dev/null)
check "import docker-archive: named from RepoTags" test "$out" = busy:2
check "import docker-archive: same tree" bash -c "diff <(img_tree busy:2) want.txt"
out=$("$VMM" image import -q --name oarch o.tar 2>/dev/null)
check "import oci-archive" bash -c "[ '$out' = oarch:1 ] && diff <(img_tree oarch:1) want.txt"
out=$("$VMM" image import -q --name olay --dir lay 2>/dev/null)
check "import --dir OCI layout" bash -c "[ '$out' = olay:1 ] && diff <(img_tree olay:1) want.txt && grep -q FOO=bar $VMM_IMAGE_DIR/olay/1/config.json"

# a layer with an entry that climbs out of the root
python3 - "$T" <<'EOF'
import tarfile, io, json, hashlib, os, sys
t = sys.argv[1]
def blob(d, b):
    h = hashlib.sha256(b).hexdigest()
    open(f"{d}/blobs/sha256/{h}", "wb").write(b)
    return "sha256:" + h, len(b)
for name, entry in (("esc", "../../escaped.txt"), ("trunc", None)):
    d = f"{t}/{name}"
    os.makedirs(f"{d}/blobs/sha256")
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        data = b"x" * 2000
        ti = tarfile.TarInfo(entry or "big.bin"); ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    layer = bio.getvalue()
    diff = "sha256:" + hashlib.sha256(layer).hexdigest()
    if entry is None:
        layer = layer[:1024]          # truncated: the data stops mid-file
    ld, ls = blob(d, layer)
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                      "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode()
    cd, cs = blob(d, cfg)
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": ls}]}).encode()
    md, ms = blob(d, man)
    open(f"{d}/index.json", "w").write(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms}]}))
    open(f"{d}/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
EOF
"$VMM" image import --name esc --dir esc > /dev/null 2> esc.err
check "escaping entry: refused, naming the layer" grep -q 'layer 1/1 .*escapes the root' esc.err
check "escaping entry: nothing written outside" bash -c "[ ! -e $T/escaped.txt ] && [ ! -e $VMM_IMAGE_DIR/escaped.txt ] && [ ! -e $VMM_IMAGE_DIR/esc/escaped.txt ]"
check "escaping entry: no BUILT version" bash -c "! grep -q BUILT $VMM_IMAGE_DIR/esc/1/image.json && [ ! -e $VMM_IMAGE_DIR/esc/1/rootfs.ext4 ]"
"$VMM" image import --name trunc --dir trunc > /dev/null 2> trunc.err
check "truncated layer: one-line error" grep -q 'layer 1/1 .*truncated' trunc.err

# ---- export and re-import: the same tree ----
out=$("$VMM" image export busy:1 exp.tar 2>/dev/null)
check "export writes an OCI archive" bash -c "[ '$out' = exp.tar ] && skopeo inspect oci-archive:exp.tar >/dev/null 2>&1"
out=$("$VMM" image import -q --name reimp exp.tar 2>/dev/null)
# debugfs rdump (export) applies chown after chmod: setuid/setgid bits are lost (docs/images.md)
check "export + import: same tree" bash -c "diff <(img_tree reimp:1 | sed s/^104755/100755/) <(sed s/^104755/100755/ want.txt)"
check "export + import: defaults kept" bash -c "grep -q FOO=bar $VMM_IMAGE_DIR/reimp/1/config.json && grep -q '\"mem_mib\":256' $VMM_IMAGE_DIR/reimp/1/image.json"

# ---- a tarball whose /sbin and /etc are links to host directories ----
mkdir -p hostdir evil && ln -s "$T/hostdir" evil/sbin && ln -s "$T/hostdir" evil/etc
tar -C evil -cf evil.tar . && "$VMM" image build evil --from-tar evil.tar -q > /dev/null 2> evil.err
check "guest-init goes inside the tree, not through its links" bash -c \
	"[ ! -e hostdir/vmm-init ] && [ ! -e hostdir/hostname ] && debugfs -R 'stat $T/hostdir/vmm-init' $VMM_IMAGE_DIR/evil/1/rootfs.ext4 2>/dev/null | grep -q 'Type: regular'"

echo "oci_images: $pass passed, $fail failed"
[ "$fail" = 0 ]
