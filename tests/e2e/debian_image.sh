#!/usr/bin/env bash
# The root image of the egress tier's real HTTPS clients (tests/e2e/egress.sh):
# Debian with curl, python3-requests, git and ca-certificates, guest-init
# as /sbin/vmm-init. Run on the host, before the KVM tier (the vmhost VM
# has no network):
#   egress_image.sh VMM OUT.ext4
# The Debian tree is debootstrapped once and kept as a tarball in
# $VMM_CACHE/e2e (~/.cache/vmm/e2e), named by a hash of its inputs (suite,
# packages, mirror, this recipe): a clean cache costs a debootstrap
# (1-3 min), a warm one an unpack and mkfs (seconds). The image itself is
# built fresh each time (`vmm image build --from-tar`, so it has this
# tree's guest-init). Where it cannot be made (not root, no debootstrap,
# no mirror) OUT is removed and OUT.skip says why; egress.sh then skips
# those checks, by name.
set -u
vmm=$1 out=$2
suite=bookworm
packages=curl,python3-requests,git,ca-certificates
mirror=${VMM_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}
recipe=1 # bump when the trimming below changes
rm -f "$out" "$out.skip"
skip() { echo "$*" > "$out.skip"; echo "  EGRESS  real-client image: skipped: $*" >&2; exit 0; }
# VMM_E2E_ONLY (tests/e2e/run.sh) without egress: nothing to make.
if [ -n "${VMM_E2E_ONLY:-}" ] && [[ " $VMM_E2E_ONLY " != *" egress "* ]]; then
	skip "VMM_E2E_ONLY=\"$VMM_E2E_ONLY\" runs no egress checks"
fi

cache=${VMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmm}/e2e
key=$(printf '%s\n' "$suite" "$packages" "$mirror" "$recipe" | sha256sum | cut -c1-16)
tarball=$cache/egress-debian-$key.tar.gz
mkdir -p "$cache" || skip "cannot create $cache"
exec 9> "$tarball.lock"
flock 9 # one debootstrap at a time; the second finds the first's tarball
if [ ! -s "$tarball" ]; then
	[ "$(id -u)" = 0 ] || skip "debootstrap needs root"
	command -v debootstrap > /dev/null || skip "debootstrap is not installed (make deps)"
	curl -sfI --max-time 10 "$mirror/dists/$suite/Release" > /dev/null 2>&1 ||
		skip "the Debian mirror $mirror is not reachable from this host"
	echo "  EGRESS  debootstrap $suite with $packages into $tarball (once; minutes)" >&2
	stage=$(mktemp -d "$cache/egress-stage.XXXXXX")
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
	echo "  EGRESS  debootstrap took $(($(date +%s) - start)) s, $(du -m "$tarball" | cut -f1) MiB" >&2
fi
exec 9>&-

# The image: guest-init from the build next to VMM, in a scratch store.
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
if ! VMM_IMAGE_DIR=$store "$vmm" image build egress-clients --from-tar "$tarball" -q > "$store/out" 2> "$store/err"; then
	tail -5 "$store/err" >&2
	skip "vmm image build --from-tar $tarball failed (log above)"
fi
img=$(find "$store" -name rootfs.ext4 -path '*egress-clients*' | head -1)
[ -n "$img" ] || skip "vmm image build left no rootfs.ext4 in $store"
mv "$img" "$out"
