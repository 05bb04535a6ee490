#!/usr/bin/env bash
# The README's examples replayed as an operator types them (issue 24):
# each must work, and the build's artefacts must be byte-identical
# afterwards. Needs KVM and a built tree (make all); skips without.
#   readme_replay.sh BUILD_DIR   (e.g. build)
# NOT RUN where it was written (no /dev/kvm there).
set -u
build=$(realpath "${1:-build}")
vmm=$build/vmm
if [ ! -c /dev/kvm ] || [ ! -f "$build/kernel/vmlinux" ]; then
	echo "skip readme replay: no /dev/kvm or no $build/kernel/vmlinux"
	exit 0
fi
tmp=$(mktemp -d)
export VMM_STATE_DIR=$tmp/state
trap '"$vmm" rm -f dev > /dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   readme: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL readme: $1"; }
sums() { sha256sum "$build"/kernel/vmlinux "$build"/initramfs.cpio "$build"/rootfs.ext4 2> /dev/null; }
before=$(sums)

out=$("$vmm" run -q -- uname -a 2>&1) && grep -q Linux <<< "$out" && ok "run -- uname -a" || bad "run -- uname -a: $out"
name=$("$vmm" run -d --name dev --image base 2> "$tmp/err") && [ "$name" = dev ] && ok "run -d --name dev --image base" ||
	bad "run -d: $(cat "$tmp/err")"
echo hello > "$tmp/hello.txt"
"$vmm" cp "$tmp/hello.txt" dev:/root/ && [ "$("$vmm" exec dev cat /root/hello.txt)" = hello ] &&
	ok "cp into dev:/root/, exec dev cat (no --)" || bad "cp/exec"
[ "$("$vmm" exec -w /tmp dev -- pwd)" = /tmp ] && ok "exec -w" || bad "exec -w"
"$vmm" exec -w /nonexistent dev -- sh -c pwd 2>&1 | grep -q "working directory /nonexistent" &&
	ok "exec -w /nonexistent names the directory" || bad "exec -w /nonexistent"
"$vmm" ps | grep -q "^dev .*running" && [ "$("$vmm" ls --format '{{.Name}} {{.State}}')" = "dev running" ] &&
	ok "ps, ls --format" || bad "ps / ls --format"
"$vmm" logs --tail 5 dev > /dev/null && ok "logs --tail 5 dev" || bad "logs --tail"
start=$(date +%s)
"$vmm" stop -t 10 dev > /dev/null 2> "$tmp/err"
took=$(($(date +%s) - start))
! grep -q "did not power off within" "$tmp/err" || [ "$took" -ge 10 ] && ok "stop -t 10 dev (${took}s)" ||
	bad "stop -t 10 said it waited 10 s after ${took}s"
"$vmm" stop dev > /dev/null 2> "$tmp/err" && [ ! -s "$tmp/err" ] && ok "stop of a stopped sandbox: quiet, 0" ||
	bad "stop twice: $(cat "$tmp/err")"
"$vmm" rm dev > /dev/null && [ -z "$("$vmm" ls -q)" ] && ok "rm dev" || bad "rm dev"
[ "$(sums)" = "$before" ] && ok "build artefacts byte-identical afterwards" || bad "build artefacts changed"
echo "readme replay: $pass passed, $fail failed"
[ "$fail" = 0 ]
