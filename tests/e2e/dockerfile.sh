#!/usr/bin/env bash
# vmm image build -f with RUN steps (needs /dev/kvm: each RUN boots a
# sandbox from the step's tree): FROM a vmm image (busybox), RUN with the
# stage's ENV, ARG and WORKDIR, COPY between RUNs, a second build that runs
# no RUN, a changed COPY source that reruns only the steps after it, a
# failing RUN that fails the build with its step and line and leaves no
# BUILT version, and a sandbox from the image running its CMD in its
# WorkingDir with its Env.
#   dockerfile.sh VMM GUEST_INIT BUSYBOX
set -u
vmm=$(realpath "$1")
gi=$(realpath "$2")
bb=${3:-/bin/busybox}
. "$(dirname "$0")/../cli/lib.sh"

if [ ! -w /dev/kvm ] || [ "$(id -u)" != 0 ]; then
	echo "skip all: needs /dev/kvm and root (tests/vmhost/run.sh runs this on a host without)"
	echo "dockerfile-e2e: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
export VMM_IMAGE_DIR=$tmp/images VMM_LIB_DIR=$tmp/lib VMM_CACHE=$tmp/cache VMM_STATE_DIR=$tmp/state
mkdir -p "$tmp/lib/guest" "$tmp/ctx"
cp "$gi" "$tmp/lib/guest/guest-init"
ln -s "$(dirname "$vmm")/kernel" "$tmp/lib/kernel" 2> /dev/null
"$vmm" image build bb --busybox "$bb" -q > /dev/null 2> "$tmp/err" || { bad "base image"; exit 1; }
cd "$tmp/ctx"
echo one > input.txt
cat > Dockerfile <<'DF'
FROM bb
ARG GREETING=hello
ENV APP=/app WHO="the builder"
WORKDIR $APP
RUN echo "$GREETING from $WHO in $(pwd)" > made.txt && mkdir -p /var/lib/x /home/u && echo ok > /var/lib/x/state && chown 1000:1000 /home/u
COPY input.txt .
RUN cat input.txt made.txt > both.txt
USER 1000:1000
RUN echo "$(id -u):$(id -g)" > /home/u/ids
CMD ["/bin/sh", "-c", "cat both.txt; echo APP=$APP; id -u"]
DF
cd "$tmp"
if "$vmm" image build -f ctx/Dockerfile -t dfrun ctx > out 2> log1 && grep -qx dfrun:1 out; then
	ok "a Dockerfile with two RUN steps builds"
else cp log1 "$tmp/err"; bad "build with RUN"; fi
mkdir t1
debugfs -R "rdump / $tmp/t1" "$VMM_IMAGE_DIR/dfrun/1/rootfs.ext4" 2> /dev/null
if [ "$(cat t1/app/both.txt 2> /dev/null)" = "one
hello from the builder in /app" ] && [ "$(cat t1/var/lib/x/state)" = ok ]; then
	ok "RUN saw ARG, ENV and WORKDIR; its files are in the image; the second RUN saw the COPY"
else bad "RUN results: $(cat t1/app/both.txt t1/var/lib/x/state 2>&1 | tr '\n' ' ')"; fi
if [ "$(cat t1/home/u/ids 2> /dev/null)" = 1000:1000 ]; then ok "a RUN after USER 1000:1000 runs as 1000:1000"
else bad "RUN after USER: $(cat t1/home/u/ids 2>&1)"; fi
"$vmm" image build -f ctx/Dockerfile -t dfrun ctx > /dev/null 2> log2
if grep -q ', 0 RUN steps run' log2; then ok "the second build runs no RUN"
else cp log2 "$tmp/err"; bad "second build"; fi
echo two > ctx/input.txt
"$vmm" image build -f ctx/Dockerfile -t dfrun ctx > /dev/null 2> log3
if grep -q ', 2 RUN steps run' log3 && grep -A1 'STEP 5/10' log3 | grep -q -- '--> cached'; then
	ok "a changed COPY source: the RUN before it cached, the two after it rerun"
else cp log3 "$tmp/err"; bad "rebuild after a change"; fi
printf 'FROM bb\nRUN echo partial > /x\nRUN exit 3\n' > ctx/Bad
if ! "$vmm" image build -f ctx/Bad -t dfbad ctx > /dev/null 2> log4 &&
	grep -q 'step 3/3 (line 3) RUN: the command exited with status 3' log4 && [ ! -e "$VMM_IMAGE_DIR/dfbad" ]; then
	ok "a failing RUN fails the build with its step and line, no image version"
else cp log4 "$tmp/err"; bad "failing RUN"; fi
if out=$("$vmm" run -q --image dfrun 2> "$tmp/err") && [ "$out" = "two
hello from the builder in /app
APP=/app
1000" ]; then
	ok "vmm run --image runs the built CMD in its WorkingDir with its Env, as its User"
else bad "run --image: $out"; fi
if "$vmm" run -d -q --name dfu --image dfrun > /dev/null 2> "$tmp/err" &&
	[ "$("$vmm" exec dfu -- id -u 2> "$tmp/err")" = 1000 ] && [ "$("$vmm" exec -u 0 dfu -- id -u 2> "$tmp/err")" = 0 ] &&
	[ "$("$vmm" exec -u 7:9 dfu -- id -g 2> "$tmp/err")" = 9 ]; then
	ok "vmm exec runs as the image's User; -u 0 and -u 7:9 override it"
else bad "exec as the image's user"; fi
"$vmm" exec -u nosuchuser dfu -- true 2> ue
if grep -q 'user nosuchuser: not in the sandbox' ue; then ok "exec -u of an unknown name says so"
else bad "exec -u unknown: $(cat ue)"; fi
"$vmm" rm -f dfu > /dev/null 2>&1
echo "dockerfile-e2e: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
