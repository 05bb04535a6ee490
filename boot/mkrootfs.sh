#!/usr/bin/env bash
# mkrootfs.sh BUSYBOX VMMCTL GUEST_INIT SELFTEST SIZE_MIB OUT: an ext4 root
# image holding busybox, vmmctl, guest-init as /sbin/init and the e2e
# selftest script, built without root privileges (mkfs.ext4 -d). /dev comes
# from devtmpfs, mounted by the kernel.
set -euo pipefail
busybox=$1 vmmctl=$2 guest_init=$3 selftest=$4 size=$5 out=$6
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp,run,root,etc,mnt,data}
chmod 1777 "$stage/tmp"
install -m 0755 "$busybox" "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"
install -m 0755 "$vmmctl" "$stage/sbin/vmmctl"
install -m 0755 "$guest_init" "$stage/sbin/init"
install -m 0755 "$selftest" "$stage/sbin/vmm-selftest"
# guest-init's own tools (vmm/wire/api.h, GUEST_TOOL_NAMES) where busybox
# lacks them, as `vmm image build` links them in images: Debian's
# busybox-static has no nohup, flock or script.
tools=$(sed -n 's/^#define GUEST_TOOL_NAMES //p' "$(dirname "$0")/../vmm/wire/api.h" | tr -d '",')
[ -n "$tools" ] || { echo "mkrootfs.sh: no GUEST_TOOL_NAMES in vmm/wire/api.h" >&2; exit 1; }
have=$("$busybox" --list 2> /dev/null || true)
for t in $tools; do
	grep -qx "$t" <<< "$have" || ln -s /sbin/init "$stage/bin/$t"
done
echo sandbox > "$stage/etc/hostname"
rm -f "$out.tmp"
truncate -s "${size}M" "$out.tmp"
mkfs.ext4 -q -F -L vmm-root -E root_owner=0:0 -d "$stage" "$out.tmp"
mv "$out.tmp" "$out"
