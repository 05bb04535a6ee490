#!/usr/bin/env bash
# The built-in images for the e2e part "builtin" (tests/e2e/builtin.sh),
# made on the host before the KVM tier (the vmhost VM has no network):
# `vmm image build --builtin RECIPE` for python and node into the image
# store STORE (under build/, which the harness sees). The build is the
# product's own: its debootstrapped Debian tree is cached in the step
# cache ($VMM_CACHE/build, ~/.cache/vmm/build; minutes once per recipe
# change), and a version whose inputs (recipe, guest-init, mirror) are
# unchanged is not built again (seconds: `--builtin` says "up to date");
# a new guest-init costs a copy of the tree and mkfs (tens of seconds).
# Older versions in STORE are removed. Where the images cannot be made
# for a reason of this host (VMM_E2E_ONLY without the part, not root, no
# debootstrap, no mirror and no cached tree) STORE.skip says why and the
# part skips; a build that fails otherwise leaves STORE/RECIPE.fail, which
# the part reports as a failure.
#   builtin_images.sh VMM STORE
set -u
[ $# = 2 ] || { echo "usage: $0 VMM STORE" >&2; exit 2; }
vmm=$1 store=$2
mirror=${VMM_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}
rm -f "$store.skip"
skip() { echo "$*" > "$store.skip"; echo "  IMAGE   builtin: skipped: $*" >&2; exit 0; }
if [ -n "${VMM_E2E_ONLY:-}" ] && [[ " $VMM_E2E_ONLY " != *" builtin "* ]]; then
	skip "VMM_E2E_ONLY=\"$VMM_E2E_ONLY\" runs no builtin checks"
fi
[ "$(id -u)" = 0 ] || skip "vmm image build --builtin needs root (debootstrap)"
command -v debootstrap > /dev/null || skip "debootstrap is not installed (make deps)"
mkdir -p "$store" || skip "cannot create $store"
export VMM_IMAGE_DIR=$store
for r in python node; do
	rm -f "$store/$r.fail" "$store/$r.ref"
	start=$(date +%s.%N)
	if ref=$("$vmm" image build --builtin "$r" --mirror "$mirror" -q 2> "$store/$r.err"); then
		secs=$(echo "$(date +%s.%N) - $start" | bc)
		echo "$ref" > "$store/$r.ref"
		size=$("$vmm" image inspect "$ref" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"] >> 20)')
		printf '  IMAGE   builtin: %s (%s MiB) ready in %.1f s\n' "$ref" "$size" "$secs" >&2
		# the versions before it: gone (each is hundreds of MiB)
		for old in $("$vmm" image ls --json | python3 -c '
import json, sys
for i in json.load(sys.stdin):
    if i["name"] == sys.argv[1] and "%s:%d" % (i["name"], i["version"]) != sys.argv[2]:
        print("%s:%d" % (i["name"], i["version"]))' "$r" "$ref"); do
			"$vmm" image rm -f "$old" > /dev/null
		done
	elif ! curl -sfI --max-time 10 "$mirror/dists/bookworm/Release" > /dev/null 2>&1; then
		tail -3 "$store/$r.err" >&2
		skip "the Debian mirror $mirror is not reachable from this host (and $r's tree is not cached)"
	else
		tail -5 "$store/$r.err" >&2
		echo "vmm image build --builtin $r failed: $(tail -1 "$store/$r.err")" > "$store/$r.fail"
	fi
done
exit 0
