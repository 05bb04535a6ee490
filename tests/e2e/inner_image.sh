#!/usr/bin/env bash
# The image for the e2e part "inner" (tests/e2e/inner.sh), made on the host
# before the KVM tier (the vmhost VM has no network): `vmm image build -f
# tests/e2e/inner/Dockerfile` (Debian's Podman and Chromium, FROM
# debootstrap:) into the image store STORE (under build/, which the
# harness sees). The product's own build: its Debian tree is the step
# cache's entry for the FROM line ($VMM_CACHE/build, ~/.cache/vmm/build;
# about a minute from deb.debian.org once, 880 MiB), so a later run only
# copies it and makes the ext4 image with this tree's guest-init (~10 s).
# Older versions in STORE are removed. Where the image cannot be made for
# a reason of this host (VMM_E2E_ONLY without the part, not root, no
# debootstrap, no mirror and no cached tree) STORE.skip says why and the
# part skips; a build that fails otherwise leaves STORE/inner.fail, which
# the part reports as a failure.
#   inner_image.sh VMM STORE
set -u
[ $# = 2 ] || { echo "usage: $0 VMM STORE" >&2; exit 2; }
vmm=$1 store=$2
here=$(cd "$(dirname "$0")" && pwd)
mirror=${VMM_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}
rm -f "$store.skip"
skip() { echo "$*" > "$store.skip"; echo "  IMAGE   inner: skipped: $*" >&2; exit 0; }
if [ -n "${VMM_E2E_ONLY:-}" ] && [[ " $VMM_E2E_ONLY " != *" inner "* ]]; then
	skip "VMM_E2E_ONLY=\"$VMM_E2E_ONLY\" runs no inner checks"
fi
[ "$(id -u)" = 0 ] || skip "FROM debootstrap: needs root"
command -v debootstrap > /dev/null || skip "debootstrap is not installed (make deps)"
mkdir -p "$store" || skip "cannot create $store"
export VMM_IMAGE_DIR=$store
rm -f "$store/inner.fail" "$store/inner.ref"
start=$(date +%s.%N)
if ref=$("$vmm" image build -f "$here/inner/Dockerfile" -t inner --mirror "$mirror" -q "$here/inner" 2> "$store/inner.err"); then
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	echo "$ref" > "$store/inner.ref"
	size=$("$vmm" image inspect "$ref" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"] >> 20)')
	printf '  IMAGE   inner: %s (%s MiB) ready in %.1f s\n' "$ref" "$size" "$secs" >&2
	for old in $("$vmm" image ls --json | python3 -c '
import json, sys
for i in json.load(sys.stdin):
    if i["name"] == "inner" and "%s:%d" % (i["name"], i["version"]) != sys.argv[1]:
        print("%s:%d" % (i["name"], i["version"]))' "$ref"); do
		"$vmm" image rm -f "$old" > /dev/null
	done
elif ! curl -sfI --max-time 10 "$mirror/dists/bookworm/Release" > /dev/null 2>&1; then
	tail -3 "$store/inner.err" >&2
	skip "the Debian mirror $mirror is not reachable from this host (and the image's tree is not cached)"
else
	tail -5 "$store/inner.err" >&2
	echo "vmm image build -f tests/e2e/inner/Dockerfile failed: $(tail -1 "$store/inner.err")" > "$store/inner.fail"
fi
exit 0
