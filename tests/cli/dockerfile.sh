#!/usr/bin/env bash
# vmm image build -f without RUN steps (no KVM, seconds): the file tree a
# Dockerfile's FROM scratch, COPY, ADD, ENV, WORKDIR, ARG steps make is the
# one buildah makes from the same Dockerfile (paths, types, modes, owners,
# link targets, content), its config the image's defaults, a second build
# takes every step from the cache, a changed file reruns only the steps
# from its COPY on, and bad input fails with the step and line.
#   dockerfile.sh VMM GUEST_INIT
set -u
vmm=$(realpath "$1")
gi=$2
. "$(dirname "$0")/lib.sh"

need_image_tools dockerfile
export VMM_IMAGE_DIR=$tmp/images VMM_LIB_DIR=$tmp/lib VMM_CACHE=$tmp/cache
mkdir -p "$tmp/lib/guest" "$tmp/ctx/dir/sub" "$tmp/ctx/tarsrc"
cp "$gi" "$tmp/lib/guest/guest-init"
cd "$tmp/ctx"
echo hello > a.txt
echo y > dir/sub/y
echo top > dir/top.txt
chmod 0750 dir/sub
chmod 0600 dir/top.txt
ln -s a.txt link
ln -s ../a.txt dir/uplink
echo log > skip.log
echo keep > dir/nested.log
echo secret > dir/sub/x.key
printf '# comments\n*.log\n**/*.key\n' > .dockerignore
echo intar > tarsrc/t.txt
mkdir tarsrc/tdir && echo deep > tarsrc/tdir/d.txt
tar -czf t.tgz -C tarsrc .
cat > Dockerfile <<'DF'
# syntax=docker/dockerfile:1
FROM scratch
ARG D=/opt
ENV APP=$D/app \
    MODE="a b"
WORKDIR ${APP}
COPY a.txt link ./
COPY --chown=10:20 dir /data/
COPY --chmod=0640 dir/top.txt /data/mode.txt
ADD t.tgz /ext/
COPY ["a.txt", "/copied as.txt"]
COPY *.txt /glob/
WORKDIR rel
EXPOSE 8080 53/udp
LABEL org.example.k="v 1"
USER 1000:1000
ENTRYPOINT ["/bin/app"]
CMD ["--serve"]
DF
cd "$tmp"
list() { # the tree, without what every vmm image gets (guest-init, /dev, ...)
	(cd "$1" && find . -mindepth 1 \( -path ./sbin/vmm-init -o -path ./lost+found -o -path ./etc/hostname \) -prune \
		-o -printf '%P %y %m %U:%G %l\n' | sort |
		grep -v -E '^(bin|sbin|dev|proc|sys|tmp|run|root|etc|mnt) d ')
	(cd "$1" && find . -type f ! -path ./sbin/vmm-init ! -path ./etc/hostname -exec md5sum {} + | sort -k2)
}
if "$vmm" image build -f ctx/Dockerfile -t df ctx > out 2> "$tmp/err" && grep -qx df:1 out; then
	ok "a Dockerfile without RUN builds (df:1)"
else bad "a Dockerfile without RUN builds"; fi
mkdir vm
debugfs -R "rdump / $tmp/vm" "$VMM_IMAGE_DIR/df/1/rootfs.ext4" 2> /dev/null
list vm > vm.raw
# debugfs rdump does not keep a symbolic link's owner: ask the ext4 for it
while IFS= read -r line; do
	set -- $line
	if [ "${2:-}" = l ] && [ $# = 5 ]; then
		own=$(debugfs -R "stat \"/$1\"" "$VMM_IMAGE_DIR/df/1/rootfs.ext4" 2> /dev/null |
			sed -n 's/^User: *\([0-9]*\) *Group: *\([0-9]*\).*/\1:\2/p')
		echo "$1 $2 $3 $own $5"
	else printf '%s\n' "$line"; fi
done < vm.raw > vm.txt
if grep -q '^data/nested.log f' vm.txt && ! grep -q 'skip.log\|x.key' vm.txt && grep -q '^data/uplink l 777 10:20 ../a.txt' vm.txt; then
	ok ".dockerignore (*.log at the top only, **/*.key anywhere); links kept in a copied directory"
else bad ".dockerignore and links: $(grep -E 'log|key|uplink' vm.txt | tr '\n' ' ')"; fi
if grep -q '^ext/tdir/d.txt f 644 0:0' vm.txt && grep -q '^opt/app/link f 644 0:0' vm.txt &&
	grep -q '^data/mode.txt f 640 0:0' vm.txt && grep -q '^opt/app/rel d 755 0:0' vm.txt; then
	ok "ADD of a local tar.gz extracts; a COPY'd symlink is followed; --chmod; a relative WORKDIR"
else bad "ADD/COPY/WORKDIR tree: $(tr '\n' ' ' < vm.txt)"; fi
cfg=$VMM_IMAGE_DIR/df/1/config.json
if python3 - "$cfg" <<'PY'; then
import json, sys
c = json.load(open(sys.argv[1]))
assert c["Env"][:2] == ["APP=/opt/app", "MODE=a b"], c["Env"]
assert c["WorkingDir"] == "/opt/app/rel" and c["User"] == "1000:1000", c
assert c["Entrypoint"] == ["/bin/app"] and c["Cmd"] == ["--serve"], c
assert set(c["ExposedPorts"]) == {"8080/tcp", "53/udp"}, c
assert c["Labels"] == {"org.example.k": "v 1"}, c
PY
	ok "config.json: Env, WorkingDir, User, Entrypoint, Cmd, ExposedPorts, Labels"
else bad "config.json: $(cat "$cfg")"; fi
"$vmm" image build -f ctx/Dockerfile -t df ctx > /dev/null 2> again
if [ "$(grep -c -- '--> cached' again)" = 8 ] && grep -q '8 cached' again; then
	ok "the second build takes all 8 file steps from the cache"
else bad "second build: $(tr '\n' ' ' < again)"; fi
# ExposedPorts: not published on their own; run says how (TCP only).
"$vmm" run --image df -- true > /dev/null 2> runerr
if grep -q 'note: image df:[0-9] exposes 1 TCP port; to reach it from the host: --publish 8080:8080$' runerr; then
	ok "vmm run --image without --publish names the --publish for ExposedPorts"
else bad "ExposedPorts note: $(head -3 runerr | tr '\n' ' ')"; fi
"$vmm" run --image df --publish 18080:8080 -- true > /dev/null 2> runerr
if ! grep -q 'exposes' runerr; then ok "no note with --publish"; else bad "note despite --publish"; fi
echo changed > ctx/dir/top.txt
"$vmm" image build -f ctx/Dockerfile -t df ctx > /dev/null 2> third
if grep -q '2 cached' third && grep -A1 'STEP 5/16' third | grep -q -- '--> cached' &&
	! grep -A1 'STEP 6/16' third | grep -q -- '--> cached'; then
	ok "a changed file: the steps before its COPY (WORKDIR, COPY) cached, it and the rest rerun"
else bad "after a change: $(tr '\n' ' ' < third)"; fi
echo top > ctx/dir/top.txt

# Bad input: one line naming the file, step and line.
printf 'FROM scratch\nCOPY nothere /x\n' > ctx/Bad1
printf 'FROM scratch\nFROB x\n' > ctx/Bad2
printf 'FROM scratch\nRUN <<EOF\nx\nEOF\n' > ctx/Bad3
printf 'FROM scratch\nADD https://example.com/x /x\n' > ctx/Bad4
n=0
"$vmm" image build -f ctx/Bad1 -t bad ctx 2> e1 && n=1
"$vmm" image build -f ctx/Bad2 -t bad ctx 2> e2 && n=1
"$vmm" image build -f ctx/Bad3 -t bad ctx 2> e3 && n=1
"$vmm" image build -f ctx/Bad4 -t bad ctx 2> e4 && n=1
if [ $n = 0 ] && grep -q 'Bad1: step 2/2 (line 2) COPY: nothere: not found in the build context' e1 &&
	grep -q "Bad2: line 2: unknown instruction 'FROB'" e2 && grep -q 'line 2: RUN: heredocs' e3 &&
	grep -q 'ADD of a URL' e4 && [ ! -e "$VMM_IMAGE_DIR/bad" ]; then
	ok "bad input: one line with the step and line, no image version"
else bad "bad input: $(cat e1 e2 e3 e4 | tr '\n' ' ')"; fi

# LABEL vmm.drives: the image's drives (docs/images.md), checked; an image
# built FROM it has them too.
printf 'FROM scratch\nLABEL vmm.drives=work:/w,docs:ro\nCOPY a.txt /a\n' > ctx/Drives
printf 'FROM drv\nCOPY a.txt /b\n' > ctx/Drives2
printf 'FROM scratch\nLABEL vmm.drives=../x\nCOPY a.txt /a\n' > ctx/DrivesBad
if run 0 image build -f ctx/Drives -t drv ctx && run 0 image inspect drv &&
	[ "$(python3 -c "import json; print(json.load(open('$tmp/out'))['drives'])")" = work:/w,docs:ro ] &&
	run 0 image build -f ctx/Drives2 -t drv2 ctx && run 0 image inspect drv2 &&
	[ "$(python3 -c "import json; print(json.load(open('$tmp/out'))['drives'])")" = work:/w,docs:ro ]; then
	ok "LABEL vmm.drives: the image's drives, and those of an image built FROM it"
else bad "LABEL vmm.drives: $(tr '\n' ' ' < "$tmp/err") $(cat "$tmp/out")"; fi
if run 1 image build -f ctx/DrivesBad -t drvbad ctx && grep -q "label vmm.drives: '../x'" "$tmp/err"; then
	ok "LABEL vmm.drives with a bad drive: the version fails, naming it"
else bad "bad vmm.drives: $(tr '\n' ' ' < "$tmp/err")"; fi

# COPY --from= an image of the store and a stage, with the real resolver
# (it writes the image's config through its pointer: --from=IMAGE and a
# stage naming itself crashed with status 139).
printf 'FROM df AS st\nFROM scratch\nCOPY --from=df /opt/app/a.txt /img.txt\nCOPY --from=st /ext/tdir/d.txt /stage.txt\n' \
	> ctx/From1
if RUN_TIMEOUT=60 run 0 image build -f ctx/From1 -t fromimg ctx; then
	img=$VMM_IMAGE_DIR/fromimg/1/rootfs.ext4
	if [ "$(debugfs -R 'cat /img.txt' "$img" 2> /dev/null)" = hello ] &&
		[ "$(debugfs -R 'cat /stage.txt' "$img" 2> /dev/null)" = deep ]; then
		ok "COPY --from= an image of the store and a stage built from it"
	else bad "COPY --from: $(debugfs -R 'ls -l /' "$img" 2> /dev/null | tr '\n' ' ')"; fi
elif grep -q Landlock "$tmp/err"; then
	skipped "COPY --from=IMAGE reads the image with debugfs, confined by Landlock, which this kernel lacks"
else bad "COPY --from=IMAGE: $(tr '\n' ' ' < "$tmp/err")"; fi
printf 'FROM scratch AS me\nCOPY --from=me /x /x\n' > ctx/Self
printf 'FROM scratch AS a\nCOPY --from=b /x /x\nFROM scratch AS b\nCOPY --from=a /y /y\n' > ctx/Cycle
n=0
run 1 image build -f ctx/Self -t bad ctx && grep -q 'Self: line 2: COPY --from=me: that is this stage itself' "$tmp/err" && n=$((n + 1))
run 1 image build -f ctx/Cycle -t bad ctx &&
	grep -q 'Cycle: line 2: COPY --from=b: a cycle of stages: stage b needs stage a' "$tmp/err" && n=$((n + 1))
if [ $n = 2 ]; then ok "COPY --from= the stage itself or a cycle of stages: an error naming the line"
else bad "COPY --from= itself or a cycle: $(tr '\n' ' ' < "$tmp/err")"; fi

# A hostile build context and Dockerfile (ctx2: buildah below reads ctx):
# a FIFO is refused before it is opened (it blocked the build forever); a
# link to what .dockerignore excludes is excluded (it was copied); nested
# ${a:-...} is bounded (200,000 of them overflowed the stack).
mkdir ctx2
echo s > ctx2/secret
echo secret > ctx2/.dockerignore
ln -s secret ctx2/alias
mkfifo ctx2/fifo
printf 'FROM scratch\nCOPY fifo /f\n' > ctx2/Fifo
printf 'FROM scratch\nADD fifo /f\n' > ctx2/AddFifo
printf 'FROM scratch\nCOPY alias /s\n' > ctx2/Alias
python3 -c 'print("FROM scratch\nENV A=" + "${a:-" * 200000 + "x" + "}" * 200000)' > ctx2/Deep
n=0
run 1 image build -f ctx2/Fifo -t bad ctx2 && grep -q 'COPY: fifo: a FIFO: COPY and ADD take regular files' "$tmp/err" &&
	n=$((n + 1))
run 1 image build -f ctx2/AddFifo -t bad ctx2 && grep -q 'ADD: fifo: a FIFO' "$tmp/err" && n=$((n + 1))
if [ $n = 2 ]; then ok "COPY/ADD of a FIFO in the context: refused, the build does not block"
else bad "a FIFO in the context: $(tr '\n' ' ' < "$tmp/err")"; fi
if run 1 image build -f ctx2/Alias -t bad ctx2 &&
	grep -q 'COPY: alias: a link to secret, which .dockerignore excludes' "$tmp/err"; then
	ok "COPY of a link to a file .dockerignore excludes: refused"
else bad "a link to an ignored file: $(tr '\n' ' ' < "$tmp/err")"; fi
if run 1 image build -f ctx2/Deep -t bad ctx2 &&
	grep -q 'Deep: step 2/2 (line 2) ENV: ${a...}: expansions nested more than 32 deep' "$tmp/err"; then
	ok "200,000 nested \${a:- in one line: an error naming the line"
else
	cut -c1-200 "$tmp/err" > "$tmp/err.cut" && mv "$tmp/err.cut" "$tmp/err" # the progress line is 1 MB
	bad "deep expansion: $(tr '\n' ' ' < "$tmp/err")"
fi
[ ! -e "$VMM_IMAGE_DIR/bad" ] || bad "a failed build left an image version"

# buildah builds the same Dockerfile: the same tree.
if command -v buildah > /dev/null; then
	B=(buildah --storage-driver vfs --root "$tmp/bs" --runroot "$tmp/br")
	if "${B[@]}" bud --isolation chroot -f ctx/Dockerfile -t dfcmp ctx > /dev/null 2> "$tmp/err" &&
		c=$("${B[@]}" from dfcmp 2> "$tmp/err") && m=$("${B[@]}" mount "$c" 2> "$tmp/err"); then
		list "$m" > buildah.txt
		if diff buildah.txt vm.txt > diff.txt; then
			ok "buildah bud makes the same tree ($(wc -l < vm.txt) entries: paths, types, modes, owners, links, content)"
		else bad "buildah's tree differs: $(tr '\n' ' ' < diff.txt)"; fi
		"${B[@]}" umount "$c" > /dev/null 2>&1
		"${B[@]}" rm "$c" > /dev/null 2>&1
		"${B[@]}" rmi -a -f > /dev/null 2>&1
	else skipped "buildah bud does not work here: $(tail -1 "$tmp/err")"; fi
else skipped "no buildah (apt-get install buildah)"; fi

echo "dockerfile: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
