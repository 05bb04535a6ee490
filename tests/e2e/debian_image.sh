#!/usr/bin/env bash
# A Debian root image for an e2e part that needs real programs: the egress
# part's HTTPS clients (egress_clients.sh), the workloads part's unshare,
# python3, nft and iptables (workloads.sh). Debian bookworm (minbase) with
# PACKAGES, guest-init as /sbin/vmm-init. Run on the host, before the KVM
# tier (the vmhost VM has no network):
#   debian_image.sh PART PACKAGES VMM OUT.ext4
# PACKAGES is debootstrap's --include list (comma-separated). The Debian
# tree is debootstrapped once and kept as a tarball in $VMM_CACHE/e2e
# (~/.cache/vmm/e2e), named by PART and a hash of its inputs (suite,
# packages, mirror, this recipe): a clean cache costs a debootstrap
# (1-3 min), a warm one an unpack and mkfs (seconds). The image itself is
# built fresh each time (`vmm image build --from-tar`, so it has this
# tree's guest-init). Where it cannot be made (VMM_E2E_ONLY without PART,
# not root, no debootstrap, no mirror) OUT is removed and OUT.skip says
# why; the part then skips those checks, by name.
set -u
[ $# = 4 ] || { echo "usage: $0 PART PACKAGES VMM OUT.ext4" >&2; exit 2; }
part=$1 packages=$2 vmm=$3 out=$4
suite=bookworm
mirror=${VMM_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}
recipe=1 # bump when the trimming below changes
rm -f "$out" "$out.skip"
skip() { echo "$*" > "$out.skip"; echo "  IMAGE   $part: Debian image skipped: $*" >&2; exit 0; }
# VMM_E2E_ONLY (tests/e2e/run.sh) without PART: nothing to make.
if [ -n "${VMM_E2E_ONLY:-}" ] && [[ " $VMM_E2E_ONLY " != *" $part "* ]]; then
	skip "VMM_E2E_ONLY=\"$VMM_E2E_ONLY\" runs no $part checks"
fi

cache=${VMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmm}/e2e
key=$(printf '%s\n' "$suite" "$packages" "$mirror" "$recipe" | sha256sum | cut -c1-16)
tarball=$cache/$part-debian-$key.tar.gz
mkdir -p "$cache" || skip "cannot create $cache"
exec 9> "$tarball.lock"
flock 9 # one debootstrap at a time; the second finds the first's tarball
if [ ! -s "$tarball" ]; then
	[ "$(id -u)" = 0 ] || skip "debootstrap needs root"
	command -v debootstrap > /dev/null || skip "debootstrap is not installed (make deps)"
	curl -sfI --max-time 10 "$mirror/dists/$suite/Release" > /dev/null 2>&1 ||
		skip "the Debian mirror $mirror is not reachable from this host"
	echo "  IMAGE   $part: debootstrap $suite with $packages into $tarball (once; minutes)" >&2
	stage=$(mktemp -d "$cache/$part-stage.XXXXXX")
	start=$(date +%s)
	if ! debootstrap --variant=minbase --include="$packages" "$suite" "$stage/root" "$mirror" \
		> "$stage/debootstrap.log" 2>&1; then
		tail -5 "$stage/debootstrap.log" >&2
		rm -rf "$stage"
		skip "debootstrap $suite failed (log above)"
	fi
	# What the tests never read: package caches, documentation, locales.
	rm -rf "$stage/root/var/cache/apt/archives/"*.deb "$stage/root/var/lib/apt/lists/"* \
		"$stage/root/usr/share/doc" "$stage/root/usr/share/man" "$stage/root/usr/share/info" \
		"$stage/root/usr/share/locale"
	tar -C "$stage/root" --numeric-owner -czf "$stage/t.tar.gz" . && mv "$stage/t.tar.gz" "$tarball"
	rm -rf "$stage"
	[ -s "$tarball" ] || skip "packing the Debian tree failed"
	echo "  IMAGE   $part: debootstrap took $(($(date +%s) - start)) s, $(du -m "$tarball" | cut -f1) MiB" >&2
fi
exec 9>&-

# The image: guest-init from the build next to VMM, in a scratch store.
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
if ! VMM_IMAGE_DIR=$store "$vmm" image build "$part" --from-tar "$tarball" -q > "$store/out" 2> "$store/err"; then
	tail -5 "$store/err" >&2
	skip "vmm image build --from-tar $tarball failed (log above)"
fi
img=$(find "$store" -name rootfs.ext4 -path "*/$part/*" | head -1)
[ -n "$img" ] || skip "vmm image build left no rootfs.ext4 in $store"
mv "$img" "$out"
