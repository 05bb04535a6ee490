#!/usr/bin/env bash
# vmm image build --busybox (the built-in base image), no KVM, seconds:
# the tools busybox lacks (nohup, flock, script) are links to guest-init
# (/sbin/vmm-init), the ones it has stay busybox's; the image records the
# sandbox disk size it asks for (--disk-size), never below its own size.
#   image_base.sh VMM
set -u
vmm=$1
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

if ! command -v mkfs.ext4 > /dev/null || ! command -v debugfs > /dev/null; then
	echo "skip all: needs mkfs.ext4 and debugfs (e2fsprogs)"
	echo "image-base: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VMM_IMAGE_DIR=$tmp/images VMM_STATE_DIR=$tmp/state VMM_LIB_DIR=$tmp/lib
mkdir -p "$tmp/lib/guest" && printf '#!/bin/sh\n' > "$tmp/lib/guest/guest-init"

# link NAME VERSION: where /bin/NAME points in the image, or "none"
link() {
	local t
	t=$(debugfs -R "stat /bin/$1" "$tmp/images/$2/rootfs.ext4" 2> /dev/null | sed -n 's/^Fast link dest: "\(.*\)"$/\1/p')
	echo "${t:-none}"
}

# A busybox that has nohup (and sh), one whose --list fails.
printf '#!/bin/sh\n[ "$1" = --list ] && printf "sh\\nnohup\\nls\\n"\n' > "$tmp/bb-nohup"
printf '#!/bin/sh\nexit 1\n' > "$tmp/bb-broken"
chmod +x "$tmp/bb-nohup" "$tmp/bb-broken"

if "$vmm" image build withnohup --busybox "$tmp/bb-nohup" -q > /dev/null 2> "$tmp/err"; then
	[ "$(link nohup withnohup/1)" = none ] && ok "a busybox with nohup keeps its own" ||
		bad "nohup linked to $(link nohup withnohup/1) although busybox has it"
	[ "$(link flock withnohup/1)" = /sbin/vmm-init ] && [ "$(link script withnohup/1)" = /sbin/vmm-init ] &&
		ok "flock and script it lacks: guest-init's" || bad "flock/script: $(link flock withnohup/1) $(link script withnohup/1)"
else
	bad "build with a fake busybox: $(cat "$tmp/err")"
fi
if "$vmm" image build broken --busybox "$tmp/bb-broken" -q > /dev/null 2> "$tmp/err"; then
	n=0
	for t in nohup flock script; do [ "$(link $t broken/1)" = /sbin/vmm-init ] && n=$((n + 1)); done
	[ $n = 3 ] && ok "busybox --list failing: every tool linked" || bad "busybox --list failing: $n of 3 linked"
else
	bad "build with a broken busybox: $(cat "$tmp/err")"
fi
if [ -x /bin/busybox ]; then
	if "$vmm" image build base --busybox /bin/busybox -q > /dev/null 2> "$tmp/err"; then
		for t in nohup flock script; do
			if /bin/busybox --list | grep -qx "$t"; then
				[ "$(link $t base/1)" = none ] && ok "base: busybox's own $t" || bad "base: $t -> $(link $t base/1)"
			else
				[ "$(link $t base/1)" = /sbin/vmm-init ] && ok "base: $t -> guest-init" || bad "base: $t missing"
			fi
		done
	else
		bad "build base: $(cat "$tmp/err")"
	fi
else
	echo "skip base from /bin/busybox: not installed (busybox-static)"
fi
# --disk-size: the sandboxes' default disk, in the record; never below the image.
if "$vmm" image build sized --busybox "$tmp/bb-nohup" --disk-size 8G -q > /dev/null 2> "$tmp/err"; then
	grep -q '"disk_mib":8192' "$tmp/images/sized/1/image.json" && "$vmm" image inspect sized | grep -q '"disk_mib":8192' &&
		ok "--disk-size 8G recorded as disk_mib 8192, inspect says so" ||
		bad "--disk-size not in $(cat "$tmp/images/sized/1/image.json")"
	"$vmm" image inspect withnohup | grep -q '"disk_mib":4096' && ok "inspect: disk_mib 4096 by default" ||
		bad "inspect without --disk-size: $("$vmm" image inspect withnohup)"
else
	bad "build --disk-size 8G: $(cat "$tmp/err")"
fi
if "$vmm" image build small --busybox "$tmp/bb-nohup" --size 64M --disk-size 32M -q > /dev/null 2> "$tmp/err"; then
	bad "--disk-size 32M below --size 64M was accepted"
else
	grep -q "smaller than the image" "$tmp/err" && ok "--disk-size below the image's size: refused, saying why" ||
		bad "--disk-size too small: $(cat "$tmp/err")"
fi
"$vmm" image build bad --busybox "$tmp/bb-nohup" --disk-size lots -q > /dev/null 2> "$tmp/err"
[ $? = 2 ] && grep -q -- "--disk-size lots" "$tmp/err" && ok "--disk-size lots: a usage error" || bad "--disk-size lots: $(cat "$tmp/err")"
echo "image-base: $pass passed, $fail failed"
[ $fail = 0 ]
