#!/usr/bin/env bash
# The image for the e2e part "inner" (tests/e2e/inner.sh), made on the host
# before the KVM tier: `vmm image build -f tests/e2e/inner/Dockerfile`
# (Debian's Podman and Chromium, FROM debootstrap:) into the image store
# STORE (image_store_lib.sh). Its Debian tree is the step cache's entry for
# the FROM line (about a minute from deb.debian.org once, 880 MiB), so a
# later run only copies it and makes the ext4 image with this tree's
# guest-init (~10 s).
#   inner_image.sh VMM STORE
set -u
[ $# = 2 ] || { echo "usage: $0 VMM STORE" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/image_store_lib.sh"
store_init inner "$1" "$2"
store_build inner -f "$here/inner/Dockerfile" -t inner --mirror "$mirror" "$here/inner"
exit 0
