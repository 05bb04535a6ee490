# Sourced by the scripts that make an e2e part's images on the host before
# the KVM tier (builtin_images.sh, inner_image.sh; the vmhost VM has no
# network): each image is the product's own build (`vmm image build ...`)
# into the image store STORE (under build/, which the harness sees), its
# Debian tree cached in the step cache ($VMM_CACHE/build), so that an
# unchanged recipe costs seconds. Where the images cannot be made for a
# reason of this host (VMM_E2E_ONLY without the part, not root, no
# debootstrap, no mirror and no cached tree) STORE.skip says why and the
# part skips; a build that fails otherwise leaves STORE/NAME.fail, which
# the part reports as a failure.
#   store_init PART VMM STORE      checks the host, makes STORE
#   store_build NAME ARGS...       vmm image build ARGS -q: STORE/NAME.ref
#                                  holds the NAME:VERSION made; older
#                                  versions of NAME are removed
mirror=${VMM_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}

store_skip() {
	echo "$*" > "$store.skip"
	echo "  IMAGE   $part: skipped: $*" >&2
	exit 0
}

store_init() {
	part=$1 vmm=$2 store=$3
	rm -f "$store.skip"
	if [ -n "${VMM_E2E_ONLY:-}" ] && [[ " $VMM_E2E_ONLY " != *" $part "* ]]; then
		store_skip "VMM_E2E_ONLY=\"$VMM_E2E_ONLY\" runs no $part checks"
	fi
	[ "$(id -u)" = 0 ] || store_skip "FROM debootstrap: needs root"
	command -v debootstrap > /dev/null || store_skip "debootstrap is not installed (make deps)"
	mkdir -p "$store" || store_skip "cannot create $store"
	export VMM_IMAGE_DIR=$store
}

store_build() {
	local name=$1 ref start secs size old
	shift
	rm -f "$store/$name.fail" "$store/$name.ref"
	start=$(date +%s.%N)
	if ref=$("$vmm" image build "$@" -q 2> "$store/$name.err"); then
		secs=$(echo "$(date +%s.%N) - $start" | bc)
		echo "$ref" > "$store/$name.ref"
		size=$("$vmm" image inspect "$ref" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"] >> 20)')
		printf '  IMAGE   %s: %s (%s MiB) ready in %.1f s\n' "$part" "$ref" "$size" "$secs" >&2
		# the versions before it: gone (each is hundreds of MiB)
		for old in $("$vmm" image ls --json | python3 -c '
import json, sys
for i in json.load(sys.stdin):
    if i["name"] == sys.argv[1] and "%s:%d" % (i["name"], i["version"]) != sys.argv[2]:
        print("%s:%d" % (i["name"], i["version"]))' "$name" "$ref"); do
			"$vmm" image rm -f "$old" > /dev/null
		done
	elif ! curl -sfI --max-time 10 "$mirror/dists/bookworm/Release" > /dev/null 2>&1; then
		tail -3 "$store/$name.err" >&2
		store_skip "the Debian mirror $mirror is not reachable from this host (and $name's tree is not cached)"
	else
		tail -5 "$store/$name.err" >&2
		echo "vmm image build $* failed: $(tail -1 "$store/$name.err")" > "$store/$name.fail"
	fi
}
