#!/usr/bin/env bash
# The built-in images for the e2e part "builtin" (tests/e2e/builtin.sh),
# made on the host before the KVM tier: `vmm image build --builtin RECIPE`
# for python and node into the image store STORE (image_store_lib.sh). A
# version whose inputs (recipe, guest-init, mirror) are unchanged is not
# built again (seconds: `--builtin` says "up to date"); a new guest-init
# costs a copy of the tree and mkfs (tens of seconds); a new recipe a
# debootstrap (minutes).
#   builtin_images.sh VMM STORE
set -u
[ $# = 2 ] || { echo "usage: $0 VMM STORE" >&2; exit 2; }
. "$(dirname "$0")/image_store_lib.sh"
store_init builtin "$1" "$2"
for r in python node; do
	store_build "$r" --builtin "$r" --mirror "$mirror"
done
exit 0
