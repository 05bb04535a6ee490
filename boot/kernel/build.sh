#!/usr/bin/env bash
# Build (or fetch from the cache) the vmm guest kernel.
#
#   boot/kernel/build.sh VARIANT OUTDIR
#
# VARIANT is "hw" (unpatched, for hardware KVM) or "emulating" (for hosts
# whose KVM emulates guest ring 0, e.g. kvm_pvm: adds patches-emulating/).
# Source: Debian's linux-source-6.12 package. The result is cached in
# ${VMM_CACHE:-~/.cache/vmm}/kernel/KEY where KEY hashes the source package
# version, config.fragment, the variant's patches and this script, so a
# rebuild happens only when one of them changes. OUTDIR gets vmlinux,
# bzImage and config (copies, so the build tree stays self-contained).
set -euo pipefail

variant=${1:?usage: build.sh hw|emulating OUTDIR}
outdir=${2:?usage: build.sh hw|emulating OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
tarball=/usr/src/linux-source-6.12.tar.xz
cache=${VMM_CACHE:-$HOME/.cache/vmm}/kernel

case "$variant" in
hw) patches=() ;;
emulating) patches=("$here"/patches-emulating/*.patch) ;;
*) echo "build.sh: unknown variant '$variant' (hw|emulating)" >&2; exit 2 ;;
esac

if [ ! -r "$tarball" ]; then
	echo "build.sh: $tarball missing: install Debian's linux-source-6.12 (make deps)" >&2
	exit 1
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12)
key=$( { echo "$variant $srcver"; cat "$here/config.fragment" "$0" ${patches[@]+"${patches[@]}"}; } |
	sha256sum | cut -c1-16)
dest="$cache/$variant-$key"

if [ ! -f "$dest/vmlinux" ]; then
	work="$cache/build-$variant-$key"
	rm -rf "$work"
	mkdir -p "$work"
	echo "  KERNEL  building $variant kernel from linux-source $srcver (cache key $key; ~10 min on 2 cores)"
	tar -C "$work" -xf "$tarball"
	src="$work/linux-source-6.12"
	for p in ${patches[@]+"${patches[@]}"}; do
		patch -s -d "$src" -p1 < "$p"
	done
	log="$work/build.log"
	{
		make -C "$src" ARCH=x86_64 tinyconfig
		"$src/scripts/kconfig/merge_config.sh" -m -O "$src" "$src/.config" "$here/config.fragment"
		make -C "$src" ARCH=x86_64 olddefconfig
	} > "$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }
	# Every option the fragment asks for must have survived olddefconfig.
	bad=0
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qxF "$line" "$src/.config" || { echo "build.sh: config lost: $line" >&2; bad=1; } ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }; opt=${opt%% *}
			if grep -q "^$opt=" "$src/.config"; then echo "build.sh: config still set: $opt" >&2; bad=1; fi ;;
		esac
	done < "$here/config.fragment"
	[ "$bad" = 0 ] || exit 1
	if ! make -C "$src" ARCH=x86_64 -j"$(nproc)" vmlinux bzImage >> "$log" 2>&1; then
		tail -40 "$log" >&2
		exit 1
	fi
	tmp="$cache/tmp-$variant-$key"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	cp "$src/vmlinux" "$src/arch/x86/boot/bzImage" "$tmp/"
	cp "$src/.config" "$tmp/config"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	rm -rf "$work"
fi
mkdir -p "$outdir"
for f in vmlinux bzImage config; do
	cp "$dest/$f" "$outdir/$f.tmp" && mv "$outdir/$f.tmp" "$outdir/$f"
done
echo "  KERNEL  $outdir/vmlinux ($variant, $srcver, key $key)"
