#!/usr/bin/env bash
# vmm image pull against a hostile registry (tests/api/hostile_registry.py;
# no VM, no KVM, plain HTTP on loopback, a few MiB of disk): size claims
# and streams past the caps, a gzip bomb, too many entries, challenges from
# a host a redirect led to, token realms on another host, and the blob
# cache's modes and re-hashing (docs/security.md, "Image pulls: caps,
# credentials and the blob cache").
# KEEP=1 keeps the scratch folder (its *.err files hold each pull's messages).
#   tests/api/hostile_registry.sh build/vmm
set -uo pipefail

VMM=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

for t in python3 debugfs mkfs.ext4; do
	command -v "$t" >/dev/null || { echo "hostile_registry: SKIP: $t is not installed (make deps installs it)"; exit 0; }
done

T=$(mktemp -d /tmp/vmm-hostile.XXXXXX)
SRV_PID=
cleanup() { [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"; }
trap cleanup EXIT
export VMM_IMAGE_DIR=$T/store VMM_CACHE=$T/cache HOME=$T/home
unset DOCKER_CONFIG VMM_PULL_MAX_BLOB VMM_PULL_MAX_IMAGE VMM_UNPACK_MAX_LAYER VMM_UNPACK_MAX_IMAGE VMM_UNPACK_MAX_ENTRIES
mkdir -p "$HOME"
cd "$T" || exit 1
LOG=$T/requests.log
: > "$LOG"
python3 "$HERE/hostile_registry.py" ports "$LOG" &
SRV_PID=$!
for _ in $(seq 100); do [ -s ports ] && break; sleep 0.1; done
[ -s ports ] || { bad "the hostile registry did not start"; exit 1; }
read -r PA PB < ports
A=http://127.0.0.1:$PA B=127.0.0.1:$PB
pull() { timeout 120 "$VMM" image pull --insecure "$@"; }
requests() { python3 -c 'import json,sys; [print(json.dumps(json.loads(l))) for l in open(sys.argv[1]) if eval(sys.argv[2], {}, json.loads(l))]' "$LOG" "$1"; }
export -f requests
export LOG
partials() { find cache -name '*.partial' 2>/dev/null | wc -l; }

# ---- 1. caps ----
: > "$LOG"
pull "$A/huge/x:1" > /dev/null 2> huge.err
check "1 TiB layer claim: refused, naming the cap and its settings" grep -q 'over the blob cap of 16384 MiB (--max-blob, \$VMM_PULL_MAX_BLOB)' huge.err
check "1 TiB layer claim: no blob byte asked for" bash -c "! grep -q '/blobs/' $LOG"
check "1 TiB layer claim: nothing left in the cache" bash -c "[ \$(find cache -type f 2>/dev/null | grep -vc '\\.lock\$') = 0 ]"

# A claim under the caps that the disk cannot hold: refused by statvfs.
free_mib=$(df -Pm "$T" | awk 'NR==2 {print $4}')
if [ "$free_mib" -lt $((1 << 20)) ]; then
	pull --max-blob 2T --max-image 2T "$A/huge/x:1" > /dev/null 2> disk.err
	check "a claim past the free disk: refused before the fetch" grep -q 'need .* MiB in the blob cache .* MiB free' disk.err
else
	echo "skip a claim past the free disk: $T has $free_mib MiB free, more than the 1 TiB the layer claims"
fi

# A blob served past its descriptor's size: stopped, nothing kept.
: > "$LOG"
pull "$A/over/x:1" > /dev/null 2> over.err
check "a blob longer than its descriptor: refused" grep -q 'more than the descriptor.s 100000 bytes' over.err
check "a blob longer than its descriptor: no .partial kept" test "$(partials)" = 0
pull "$A/overeof/x:1" > /dev/null 2> overeof.err
check "the same with no Content-Length: stopped by the byte count" grep -q 'sent more than the descriptor.s 100000 bytes' overeof.err
check "the same with no Content-Length: no .partial kept" test "$(partials)" = 0

# A partial over a cap (from a pull with a higher cap) is removed.
d=$(python3 -c 'import hashlib; print(hashlib.sha256(b"huge/x-layer").hexdigest())')
mkdir -p cache/blobs/sha256 && head -c 3000000 /dev/zero > "cache/blobs/sha256/$d.partial"
pull --max-blob 1 "$A/huge/x:1" > /dev/null 2> cap1.err
check "--max-blob 1: refused before the fetch" grep -q 'over the blob cap of 1 MiB' cap1.err
check "--max-blob 1: the .partial over the cap removed" test ! -e "cache/blobs/sha256/$d.partial"
pull --max-blob 1 --max-image 0 "$A/ok/x:1" > /dev/null 2> cap0.err
check "a cap of 0: a usage error" grep -q "max-image '0': not a size" cap0.err

# A gzip bomb: 2 KiB that become 2 MiB, with a 1 MiB cap per layer.
VMM_UNPACK_MAX_LAYER=1 pull "$A/bomb/x:1" > /dev/null 2> bomb.err
check "gzip bomb: stopped at the per-layer cap, naming it" grep -q 'layer 1/1 .*decompresses to more than 1 MiB, the per-layer cap (--max-layer-unpacked, \$VMM_UNPACK_MAX_LAYER)' bomb.err
check "gzip bomb: no version built" bash -c "! ls $VMM_IMAGE_DIR/x/*/rootfs.ext4 2>/dev/null | grep -q ."
pull --max-unpacked 1 "$A/bomb/x:1" > /dev/null 2> bomb2.err
check "gzip bomb: the per-image cap too" grep -q 'more than 1 MiB, what is left of the per-image cap (--max-unpacked' bomb2.err
VMM_UNPACK_MAX_ENTRIES=10 pull "$A/many/x:1" > /dev/null 2> many.err
check "50 entries, cap 10: refused, naming the cap" grep -q 'more than 10 entries, the cap (--max-entries, \$VMM_UNPACK_MAX_ENTRIES)' many.err
out=$(pull -q --name many "$A/many/x:1" 2>many-ok.err)
check "50 entries under the default cap: pulled" test "$out" = many:1

# ---- 5. credentials ----
printf 'u:p\n' > creds
: > "$LOG"
pull --creds-file creds "$A/redir/x:1" > /dev/null 2> redir.err
check "401 from a host a redirect led to: refused" grep -q 'reached by a redirect) answered 401' redir.err
check "401 from a host a redirect led to: its realm never asked" bash -c "[ -z \"\$(requests 'path.startswith(\"/token\")')\" ]"
: > "$LOG"
out=$(pull -q --creds-file creds --name realm "$A/realm/x:1" 2>realm.err)
check "realm on another host: the token is fetched anonymously" bash -c \
	"[ '$out' = realm:1 ] && requests 'server == \"B\" and path.startswith(\"/token\")' | grep -q . && [ -z \"\$(requests 'server == \"B\" and auth != \"\"')\" ]"
check "realm on another host: the credentials never reach it" bash -c "! grep -q 'dTpw' <(requests 'server == \"B\"')"
: > "$LOG"
out=$(pull -q --creds-file creds --name own "$A/ownrealm/x:1" 2>own.err)
check "realm on the registry's host: the credentials go there" bash -c \
	"[ '$out' = own:1 ] && requests 'server == \"A\" and path.startswith(\"/token\") and auth == \"Basic dTpw\"' | grep -q ."
printf '{"auths":{"127.0.0.1:%s":{"auth":"dTpw"},"%s":{"auth":"YjpxcQ=="}}}\n' "$PA" "$B" > creds.json
: > "$LOG"
out=$(pull -q --creds-file creds.json --name named "$A/named/x:1" 2>named.err)
check "a realm host the credentials file names: gets that entry, not the registry's" bash -c \
	"[ '$out' = named:1 ] && requests 'server == \"B\" and auth == \"Basic YjpxcQ==\"' | grep -q . && [ -z \"\$(requests 'server == \"B\" and auth == \"Basic dTpw\"')\" ]"

# ---- 8. the blob cache ----
rm -rf cache
out=$(pull -q --name ok "$A/ok/x:1" 2>ok.err)
check "a good image pulls" test "$out" = ok:1
check "blob cache folders are 0700" bash -c "[ \$(stat -c %a cache/blobs) = 700 ] && [ \$(stat -c %a cache/blobs/sha256) = 700 ]"
check "blob files (and locks) are 0600" bash -c "[ -z \"\$(find cache/blobs/sha256 -type f ! -perm 600)\" ] && [ -n \"\$(find cache/blobs/sha256 -type f)\" ]"
layer=$(ls -S cache/blobs/sha256 | grep -v '\.' | head -1)
size=$(stat -c %s "cache/blobs/sha256/$layer")
head -c "$size" /dev/zero > "cache/blobs/sha256/$layer"
out=$(pull --name ok "$A/ok/x:1" 2>again.err)
check "a cached blob of the right size but other bytes: fetched again" bash -c \
	"[ '$out' = ok:2 ] && grep -q 'does not match its digest; fetching it again' again.err && [ \$(sha256sum cache/blobs/sha256/$layer | cut -c1-64) = $layer ]"
chmod 755 cache/blobs cache/blobs/sha256 && chmod 644 "cache/blobs/sha256/$layer"
out=$(pull -q --name ok "$A/ok/x:1" 2>/dev/null)
check "a cache left 0755/0644 by an older vmm is narrowed" bash -c \
	"[ '$out' = ok:3 ] && [ \$(stat -c %a cache/blobs) = 700 ] && [ \$(stat -c %a cache/blobs/sha256/$layer) = 600 ]"

echo "hostile_registry: $pass passed, $fail failed"
[ "$fail" = 0 ]
