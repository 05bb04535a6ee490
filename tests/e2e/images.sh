# Sourced by run.sh: sandbox images (vmm image, vmm run --image). Builds
# from a directory, a tarball and busybox; failing builds; a cold start
# from an image and a warm one (restore); isolation between sandboxes and
# their image; the --debian path where the Debian mirror answers.
export VMM_IMAGE_DIR=$tmp/images
export VMM_STATE_DIR=$tmp/istate
iv() { run_cmd timeout "${T:-300}" "$vmm" "$@"; }
busybox_bin=${BUSYBOX:-/bin/busybox}

# A root tree: busybox and a marker.
mkdir -p "$tmp/tree/bin" "$tmp/tree/etc"
cp "$busybox_bin" "$tmp/tree/bin/busybox"
ln -sf busybox "$tmp/tree/bin/sh"
echo from-the-tree > "$tmp/tree/etc/marker"
echo extra-file > "$tmp/extra.txt"

if out=$(iv image build base --busybox "$busybox_bin" 2> "$tmp/ib.err") && [ "$out" = base:1 ] &&
	grep -q "^\[1/4\] installing busybox" "$tmp/ib.err" && grep -q "built base:1" "$tmp/ib.err"; then
	ok "images: the busybox base image builds, with progress lines"
else bad "images: base build: $out $(cat "$tmp/ib.err")"; fi
[ "$(iv image build base --busybox "$busybox_bin" --if-changed -q)" = base:1 ] &&
	ok "images: --if-changed makes no new version when nothing changed" || bad "images: --if-changed"
if [ "$(iv image build tree --from-dir "$tmp/tree" -q)" = tree:1 ] &&
	[ "$(iv image build tree --from-dir "$tmp/tree" --mem 256 -q)" = tree:2 ]; then
	ok "images: builds from a directory; versions increment (tree:1, tree:2)"
else bad "images: from-dir versions: $(iv image ls)"; fi
tar -C "$tmp/tree" -cf "$tmp/tree.tar" .
if [ "$(iv image build tarimg --from-tar "$tmp/tree.tar" --file "$tmp/extra.txt:/opt/extra.txt" -q)" = tarimg:1 ] &&
	rootfs=$(iv image inspect tarimg | python3 -c 'import json,sys; print(json.load(sys.stdin)["rootfs"])') &&
	[ "$(debugfs -R "cat /etc/marker" "$rootfs" 2>/dev/null)" = from-the-tree ] &&
	[ "$(debugfs -R "cat /opt/extra.txt" "$rootfs" 2>/dev/null)" = extra-file ] &&
	debugfs -R "stat /sbin/vmm-init" "$rootfs" 2>/dev/null | grep -q "Mode:  0755"; then
	ok "images: builds from a tarball with --file; guest-init is /sbin/vmm-init"
else bad "images: from-tar: $(iv image inspect tarimg)"; fi

# Failing builds leave no usable version, say why, and keep latest.
dd if=/dev/urandom of="$tmp/tree/big" bs=1M count=24 2> /dev/null
if iv image build tree --from-dir "$tmp/tree" --size 16M -q > /dev/null 2> "$tmp/if.err"; then
	bad "images: a build into a too small --size succeeded"
else
	v3=$(iv image ls --json | python3 -c 'import json,sys; print([i["status"] for i in json.load(sys.stdin) if i["name"]=="tree" and i["version"]==3])')
	if grep -q "FAILED.*do not fit in --size" "$tmp/if.err" && [ "$v3" = "['FAILED']" ] &&
		iv image inspect tree | grep -q '"version":2' && [ ! -e "$VMM_IMAGE_DIR/tree/3/rootfs.ext4" ]; then
		ok "images: a build that does not fit --size fails clearly: tree:3 FAILED, tree:latest still 2"
	else bad "images: too-small build: $(cat "$tmp/if.err") $v3"; fi
fi
rm -f "$tmp/tree/big"
echo "not a tarball" > "$tmp/bad.tar"
iv image build badtar --from-tar "$tmp/bad.tar" -q > /dev/null 2> "$tmp/ibt.err" &&
	bad "images: a bad tarball built" ||
	{ grep -q "FAILED: unpacking" "$tmp/ibt.err" && ! iv run --image badtar -- true > /dev/null 2>&1 &&
		ok "images: a bad tarball fails, and its version cannot be run" ||
		bad "images: bad tarball: $(cat "$tmp/ibt.err")"; }

# Cold start from an image; the image stays as it was.
sum_before=$(sha256sum < "$VMM_IMAGE_DIR/tree/2/rootfs.ext4")
if out=$(T=600 iv run -d --name im1 --image tree 2> "$tmp/im1.err") && [ "$out" = im1 ] &&
	[ "$(iv exec im1 -- cat /etc/marker)" = from-the-tree ] && iv exec im1 -- sh -c 'echo one > /root/one' &&
	iv inspect im1 | grep -q '"image":"tree:2"' && iv inspect im1 | grep -q '"mem_mib":256'; then
	ok "images: run --image boots a copy of tree:2 with its defaults (256 MiB)"
else bad "images: cold run: $out $(tail -3 "$tmp/im1.err")"; fi
if iv image rm tree:2 > /dev/null 2> "$tmp/irm.err"; then bad "images: rm of an image in use was not refused"
else grep -q "used by sandbox im1" "$tmp/irm.err" && ok "images: rm of an image a sandbox uses is refused" ||
	bad "images: rm in use: $(cat "$tmp/irm.err")"; fi

# Warm: booted once, snapshotted; run --image restores from it.
if T=900 iv image warm tree > /dev/null 2> "$tmp/iw.err" && iv image inspect tree | grep -q '"warm":true'; then
	ok "images: image warm keeps a snapshot with tree:2"
else bad "images: warm: $(cat "$tmp/iw.err")"; fi
# With --label too (a restore records labels as a boot does).
if out=$(iv run -d --name im2 --label team=blue --image tree 2> "$tmp/im2.err") && [ "$out" = im2 ] &&
	iv inspect im2 | grep -q '"kind":"restore"' && grep -q "warm snapshot" "$tmp/im2.err" &&
	iv inspect im2 | grep -q '"team":"blue"' && [ "$(iv exec im2 -- cat /etc/marker)" = from-the-tree ]; then
	ok "images: run --image --label on a warm image starts by restore, labelled, and the API answers"
else bad "images: warm run: $out $(cat "$tmp/im2.err")"; fi
# create --image X then start: from the warm snapshot too (start ran
# 'run -d --adopt', and --adopt made it cold-boot).
if out=$(iv create --name im3 --image tree 2> /dev/null) && [ "$out" = im3 ] &&
	iv start im3 > /dev/null 2> "$tmp/im3.err" && iv inspect im3 | grep -q '"kind":"restore"' &&
	grep -q "warm snapshot" "$tmp/im3.err" && [ "$(iv exec im3 -- cat /etc/marker)" = from-the-tree ]; then
	ok "images: create --image on a warm image, then start: restored from the warm snapshot"
else bad "images: create --image + start: $out $(cat "$tmp/im3.err"; iv inspect im3)"; fi
iv rm -f im3 > /dev/null 2>&1
iv exec im2 -- sh -c 'echo two > /root/two' > /dev/null
if [ "$(iv exec im1 -- ls /root)" = one ] && [ "$(iv exec im2 -- ls /root)" = two ] &&
	[ "$(sha256sum < "$VMM_IMAGE_DIR/tree/2/rootfs.ext4")" = "$sum_before" ]; then
	ok "images: two sandboxes from one image keep their own files; the image is unchanged"
else bad "images: isolation: im1 $(iv exec im1 -- ls /root) im2 $(iv exec im2 -- ls /root)"; fi
# A warm snapshot made for another snapshot format or kernel is not used.
sed -i 's/^format=[0-9]*/format=0/' "$VMM_IMAGE_DIR/tree/2/warm/key"
iv image inspect tree | grep -q '"warm":false' && ok "images: a stale warm snapshot (other format/kernel) is ignored" ||
	bad "images: stale warm key still used"
iv rm -f im1 im2 > /dev/null 2>&1
iv image rm tree:1 > /dev/null && [ ! -e "$VMM_IMAGE_DIR/tree/1" ] && ok "images: rm of an unused version" ||
	bad "images: rm tree:1"

# Debian, where the mirror answers (a few minutes: debootstrap).
if ! command -v debootstrap > /dev/null; then
	echo "skip images --debian: debootstrap is not installed (make deps)"
elif ! curl -sfI --max-time 10 http://deb.debian.org/debian/dists/bookworm/Release > /dev/null 2>&1; then
	echo "skip images --debian: the Debian mirror deb.debian.org is not reachable from this host"
elif out=$(T=1800 iv image build py --debian bookworm --packages python3 -q 2> "$tmp/ipy.err") && [ "$out" = py:1 ]; then
	if [ "$(T=600 iv run --image py --console "file:$tmp/ipyr.console" -- python3 -c 'print(6*7)' 2> "$tmp/ipyr.err")" = 42 ]; then
		ok "images: a Debian image with python3 (--debian bookworm --packages python3) runs python3"
	else bad "images: python3 in the Debian image: $(tail -3 "$tmp/ipyr.err")"; fi
else bad "images: --debian build: $(tail -5 "$tmp/ipy.err")"; fi
unset VMM_IMAGE_DIR
