#!/usr/bin/env bash
# The README's and docs/cli.md's examples replayed as an operator types
# them (issue 24): each must work, and the build's artefacts must be
# byte-identical afterwards. Needs KVM and a built tree (make all); skips
# without. Run by tests/e2e/run.sh; alone:
#   readme_replay.sh BUILD_DIR   (e.g. build)
# Its own state and image directories (nothing of the user's is touched);
# the base image is built there as the README's install step says.
set -u
build=$(realpath "${1:-build}")
vmm=$build/vmm
if [ ! -c /dev/kvm ] || [ ! -f "$build/kernel/vmlinux" ] || [ ! -f "$build/initramfs.cpio" ]; then
	echo "skip readme replay: no /dev/kvm, or no $build/kernel/vmlinux or $build/initramfs.cpio"
	exit 0
fi
tmp=$(mktemp -d)
export VMM_STATE_DIR=$tmp/state VMM_IMAGE_DIR=$tmp/images
cleanup() {
	local n
	for n in $("$vmm" ls -q 2> /dev/null); do "$vmm" rm -f "$n" > /dev/null 2>&1; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   readme: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL readme: $1"; }
sums() { sha256sum "$build"/kernel/vmlinux "$build"/initramfs.cpio "$build"/rootfs.ext4 2> /dev/null; }
before=$(sums)
cd "$tmp" || exit 1

# Set up: one command in a fresh sandbox (not a terminal: the boot status
# comes as plain lines on stderr, the command's output on stdout).
out=$("$vmm" run -- uname -a 2> "$tmp/err") && grep -q Linux <<< "$out" &&
	grep -q "sandbox .*: API ready" "$tmp/err" && ok "run -- uname -a (status lines on stderr)" ||
	bad "run -- uname -a: $out $(cat "$tmp/err")"
out=$("$vmm" run -q -- uname -a 2> "$tmp/err") && grep -q Linux <<< "$out" && [ ! -s "$tmp/err" ] &&
	ok "run -q -- uname -a: nothing on stderr" || bad "run -q: $(cat "$tmp/err")"
# The install step's base image, per user.
"$vmm" image build base --busybox "${BUSYBOX:-/bin/busybox}" -q > /dev/null 2> "$tmp/err" &&
	ok "image build base --busybox" || bad "image build base: $(cat "$tmp/err")"

# Install (staged with DESTDIR): the installed vmm, run from another
# directory, finds its kernel in PREFIX/lib/vmm and runs a sandbox.
src=$(dirname "$build")
if [ -f "$src/Makefile" ] && [ "$(basename "$build")" = build ]; then
	if make -s -C "$src" install DESTDIR="$tmp/root" PREFIX=/usr > "$tmp/err" 2>&1 &&
		[ "$(cd / && "$tmp/root/usr/bin/vmm" run -q -- echo installed 2> "$tmp/err")" = installed ]; then
		ok "make install DESTDIR=... PREFIX=/usr; the installed vmm runs a sandbox from /"
	else bad "make install / installed vmm: $(tail -3 "$tmp/err")"; fi
	rm -rf "$tmp/root"
fi

# Boot from a disk: a copy, never the build's own file.
cp --reflink=auto "$build/rootfs.ext4" my.ext4 &&
	[ "$("$vmm" run -q --disk path=my.ext4,root -- hostname)" = sandbox ] &&
	ok "cp --reflink=auto build/rootfs.ext4 my.ext4 && run --disk path=my.ext4,root" || bad "run --disk ...,root"

# Sandboxes by name.
name=$("$vmm" run -d --name dev --image base 2> "$tmp/err") && [ "$name" = dev ] &&
	ok "run -d --name dev --image base" || bad "run -d: $(cat "$tmp/err")"
"$vmm" exec dev -- ls / | grep -q '^root$' && ok "exec dev -- ls /" || bad "exec dev -- ls /"
echo hello > file.txt
"$vmm" cp file.txt dev:/root/file.txt && [ "$("$vmm" exec dev cat /root/file.txt)" = hello ] &&
	ok "cp file.txt dev:/root/file.txt, exec dev cat (no --)" || bad "cp/exec"
"$vmm" cp file.txt dev:/tmp/ && [ "$("$vmm" exec dev cat /tmp/file.txt)" = hello ] &&
	mkdir back && "$vmm" cp dev:/tmp/file.txt back/ && [ "$(cat back/file.txt)" = hello ] &&
	ok "cp into a directory (DST/), both ways" || bad "cp into DST/"
[ "$("$vmm" exec -w /tmp dev -- pwd)" = /tmp ] && ok "exec -w" || bad "exec -w"
"$vmm" exec -w /nonexistent dev -- sh -c pwd 2>&1 | grep -q "working directory /nonexistent" &&
	ok "exec -w /nonexistent names the directory" || bad "exec -w /nonexistent"
"$vmm" ls | grep -q "^dev .*running" && "$vmm" ps | grep -q "^dev .*running" &&
	[ "$("$vmm" ls --format '{{.Name}} {{.State}}')" = "dev running" ] &&
	ok "ls, ps, ls --format" || bad "ls / ps / ls --format"
"$vmm" logs dev > /dev/null && "$vmm" logs --tail 5 dev > /dev/null && ok "logs dev, logs --tail 5 dev" || bad "logs"

# A command detached in a new sandbox (docs/cli.md: run -d -- CMD).
name=$("$vmm" run -d --name job --image base -- sh -c 'echo started; sleep 600' 2> "$tmp/err") && [ "$name" = job ] &&
	sleep 1 && "$vmm" logs --process main job | grep -q started && "$vmm" top job | grep -q "main.*running" &&
	ok "run -d -- CMD: the sandbox runs on, CMD as its detached process 'main'" ||
	bad "run -d -- CMD: $name $(cat "$tmp/err"; "$vmm" top job 2>&1)"
"$vmm" rm -f job > /dev/null 2>&1
if ! "$vmm" run -d --name job2 --image base -- /no/such/cmd > "$tmp/out" 2> "$tmp/err" &&
	grep -q "command not found" "$tmp/err" && grep -q "did not start: stopped and removed" "$tmp/err" &&
	[ ! -s "$tmp/out" ] && ! "$vmm" ls -q | grep -q job2; then
	ok "run -d -- a command that cannot start: said, status 1, the sandbox stopped and removed"
else bad "run -d -- /no/such/cmd: $(cat "$tmp/err"; "$vmm" ls)"; fi

# Snapshots: stop dev into a snapshot, then clones in the background.
if "$vmm" snapshot --stop dev "$tmp/snap" > /dev/null 2> "$tmp/err"; then
	ok "snapshot --stop dev DIR"
	"$vmm" restore "$tmp/snap" --name a > "$tmp/a.out" 2>&1 &
	"$vmm" restore "$tmp/snap" --name b > "$tmp/b.out" 2>&1 &
	for _ in $(seq 300); do
		[ "$("$vmm" exec a cat /root/file.txt 2> /dev/null)" = hello ] &&
			[ "$("$vmm" exec b cat /root/file.txt 2> /dev/null)" = hello ] && break
		sleep 0.2
	done
	[ "$("$vmm" exec a cat /root/file.txt 2> /dev/null)" = hello ] &&
		[ "$("$vmm" exec b cat /root/file.txt 2> /dev/null)" = hello ] &&
		ok "restore DIR --name a & (and b): both answer with dev's files" || bad "restore &: $(cat "$tmp/a.out")"
	"$vmm" stop a b > /dev/null 2>&1
	wait
else bad "snapshot --stop dev: $(cat "$tmp/err")"; fi

start=$(date +%s)
"$vmm" stop -t 10 dev > /dev/null 2> "$tmp/err"
took=$(($(date +%s) - start))
! grep -q "did not power off within" "$tmp/err" || [ "$took" -ge 10 ] && ok "stop -t 10 dev" ||
	bad "stop -t 10 said it waited 10 s after ${took}s"
"$vmm" stop dev > /dev/null 2> "$tmp/err" && [ ! -s "$tmp/err" ] && ok "stop of a stopped sandbox: quiet, 0" ||
	bad "stop twice: $(cat "$tmp/err")"
"$vmm" rm dev > /dev/null 2>&1
"$vmm" prune > /dev/null 2>&1
[ -z "$("$vmm" ls -q)" ] && ok "rm dev, prune: nothing left" || bad "left behind: $("$vmm" ls)"
[ "$(sums)" = "$before" ] && ok "the build's kernel, initramfs and rootfs.ext4 are byte-identical afterwards" ||
	bad "build artefacts changed"
echo "readme replay: $pass passed, $fail failed"
[ "$fail" = 0 ]
