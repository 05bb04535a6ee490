#!/usr/bin/env bash
# CLI checks of drives that need no KVM (docs/cli.md, "Drives"): create,
# ls, inspect, allow/deny, rm (the store's folder removed, a --path one
# kept), names refused, a concurrent create of one name won once, and a
# run the allow list refuses stopped before boot with the drive named.
#   drive.sh VMM   (KERNEL: a file, the VM is never built)
set -u
vmm=$1
kernel=${2:-Makefile}
. "$(dirname "$0")/lib.sh"
cli_state
export VMM_DRIVE_DIR=$tmp/drives

json() { python3 -c "import json,sys; d=json.load(open('$tmp/out')); print($1)"; }

if run 0 drive create work --size 8M --allow alice --allow bob:ro && [ "$(cat "$tmp/out")" = work ] &&
	[ -d "$tmp/drives/work/data" ]; then ok "create: a drive with its folder in the store"; else bad "create"; fi
if run 1 drive create work && grep -q "drive work exists" "$tmp/err"; then
	ok "create: a name in use refused"; else bad "create twice"; fi
names_ok=1
for n in ../x .hidden -x "a/b" abcdefghijabcdefghijabcdefghijabcdef; do
	# 1: the name refused; 2: taken for an option or too long for one
	"$vmm" drive create "$n" > /dev/null 2>&1 && names_ok=0
	[ -e "$tmp/drives/$n" ] && names_ok=0
done
[ "$(ls "$tmp/drives")" = work ] || names_ok=0
if [ $names_ok = 1 ]; then ok "create: bad names refused, nothing left"; else bad "bad names"; fi
if run 2 drive create w2 --allow 'x:rx'; then ok "create: a bad rule is a usage error"; else bad "bad rule"; fi

# Eight creates of one name at once: exactly one wins.
for i in $(seq 8); do ("$vmm" drive create race > "$tmp/race.$i" 2>&1; echo $? > "$tmp/race.$i.rc") & done
wait
wins=$(grep -l '^0$' "$tmp"/race.*.rc | wc -l)
if [ "$wins" = 1 ]; then ok "create: one of 8 concurrent creates wins"; else bad "concurrent creates: $wins won"; fi

mkdir "$tmp/mine"
echo hello > "$tmp/mine/f"
if run 0 drive create mine --path "$tmp/mine" --allow '*:ro'; then ok "create --path"; else bad "create --path"; fi
if run 0 drive ls && grep -q '^work .*8388608 alice,bob:ro' "$tmp/out" && grep -q '^mine ' "$tmp/out" &&
	grep -q '^race ' "$tmp/out"; then ok "ls"; else bad "ls"; cat "$tmp/out"; fi
if run 0 drive inspect mine && [ "$(json 'd["path"], d["own_folder"], d["bytes_used"] > 0, d["allow"], d["used_by"]')" = \
	"$tmp/mine False True [{'who': '*', 'ro': True}] []" ]; then ok "inspect: JSON"; else bad "inspect"; cat "$tmp/out"; fi
if run 0 drive allow work carol && run 0 drive deny work bob && run 0 drive inspect work &&
	[ "$(json '[(a["who"], a["ro"]) for a in d["allow"]]')" = "[('alice', False), ('carol', False)]" ]; then
	ok "allow/deny change the list"; else bad "allow/deny"; cat "$tmp/out"; fi
if run 1 drive deny work nobody; then ok "deny: no such rule"; else bad "deny nobody"; fi

# Refused before boot (the KVM device does not exist: a run that got past
# its checks would fail on it instead, saying so).
if run 1 run --kernel "$kernel" --name eve --drive work -- true && grep -q "drive work does not allow sandbox eve" "$tmp/err" &&
	! grep -qi kvm "$tmp/err"; then ok "run: a sandbox not on the list refused before boot"; else bad "refusal"; fi
if run 1 run --kernel "$kernel" --name bob --drive mine -- true && grep -q "read-only" "$tmp/err"; then
	ok "run: rw on a read-only rule refused"; else bad "ro rule"; fi
if run 1 run --kernel "$kernel" --name alice --drive work:/work -- true && ! grep -q "does not allow" "$tmp/err"; then
	ok "run: an allowed sandbox gets past the drive check"; else bad "allowed"; fi
if run 2 run --kernel "$kernel" --name alice --drive work:relative -- true; then ok "run: a relative guest dir refused"; else bad "guest dir"; fi
if run 1 run --kernel "$kernel" --name alice --drive nosuch -- true && grep -q "no drive nosuch" "$tmp/err"; then
	ok "run: an unknown drive named"; else bad "unknown drive"; fi
if run 1 create --name eve --drive work && grep -q "does not allow" "$tmp/err"; then
	ok "create: refused too"; else bad "create refusal"; fi

# The Firecracker-style API (vmm serve, before boot: no KVM needed): PUT
# /fs {"drive": NAME} is checked against the allow list for the --id.
# put_fs ID BODY: "STATUS fault_message" of PUT /fs/w on ID's socket.
put_fs() {
	python3 - "$tmp/$1.sock" "$2" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = sys.argv[2].encode()
s.sendall(b"PUT /fs/w HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
head, _, payload = data.partition(b"\r\n\r\n")
print(head.split()[1].decode(), json.loads(payload)["fault_message"] if payload.strip() else "")
PY
}
serve_api() {
	"$vmm" --api-sock "$tmp/$1.sock" --id "$1" --console none < /dev/null > "$tmp/$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -S "$tmp/$1.sock" ] && break; sleep 0.05; done
}
serve_api eve
serve_api alice
if [ "$(put_fs eve '{"drive":"work"}')" = "400 drive work does not allow sandbox eve (not on its allow list; vmm drive allow work eve)" ]; then
	ok "API: PUT /fs with a drive the list refuses: 400, the run's message"; else bad "API refusal: $(put_fs eve '{"drive":"work"}')"; fi
if [ "$(put_fs alice '{"drive":"work","mount_point":"/work"}')" = "204 " ]; then
	ok "API: an allowed sandbox's PUT /fs with a drive"; else bad "API drive: $(put_fs alice '{"drive":"work"}')"; fi
if put_fs alice '{"drive":"nosuch"}' | grep -q "^400 no drive nosuch"; then ok "API: an unknown drive named"; else bad "API unknown drive"; fi

# Image defaults: an image names drives its sandboxes mount (vmm image
# build --drive); vmm run --image checks them as its own, and its own
# --drive of the same name wins.
if command -v mkfs.ext4 > /dev/null && command -v debugfs > /dev/null; then
	export VMM_IMAGE_DIR=$tmp/images VMM_LIB_DIR=$tmp/lib
	mkdir -p "$tmp/lib/guest" && printf '#!/bin/sh\n' > "$tmp/lib/guest/guest-init"
	printf '#!/bin/sh\n[ "$1" = --list ] && printf "sh\\n"\n' > "$tmp/bb"
	chmod +x "$tmp/bb"
	run 0 drive allow work bob:ro || bad "allow bob:ro"
	if run 0 image build img --busybox "$tmp/bb" --drive work:/w -q && run 0 image inspect img &&
		[ "$(json 'd["drives"]')" = work:/w ]; then ok "image build --drive: recorded"; else bad "image build --drive"; fi
	if run 2 image build img2 --busybox "$tmp/bb" --drive work --drive work:/x -q &&
		run 2 image build img2 --busybox "$tmp/bb" --drive 'a/b' -q; then
		ok "image build --drive: a name twice, a bad name refused"; else bad "image build --drive checks"; fi
	if run 1 run --image img --kernel "$kernel" --name eve -- true && grep -q "drive work does not allow sandbox eve" "$tmp/err"; then
		ok "run --image: the image's drive checked for the sandbox"; else bad "image drive refusal"; fi
	if run 1 run --image img --kernel "$kernel" --name bob -- true && grep -q "read-only" "$tmp/err"; then
		ok "run --image: the image's rw drive refused on a read-only rule"; else bad "image drive ro rule"; fi
	if run 1 run --image img --kernel "$kernel" --name bob --drive work:/w:ro -- true && ! grep -q "drive work" "$tmp/err"; then
		ok "run --image: the run's own --drive of that name wins"; else bad "image drive override"; fi
	if run 1 run --image img --kernel "$kernel" --name alice -- true && ! grep -q "drive work" "$tmp/err"; then
		ok "run --image: an allowed sandbox gets past the image's drive"; else bad "image drive allowed"; fi
else
	skipped "image defaults: needs mkfs.ext4 and debugfs (e2fsprogs)"
fi

# Labels: rules naming a label, the decision's order (own name, labels
# with read-only winning, then *), and the labels a sandbox's record keeps.
if run 0 drive create team --allow label:team=a --allow 'label:role=review:ro' --allow 'zed:rw' &&
	run 0 drive inspect team &&
	[ "$(json '[(a["who"], a["ro"]) for a in d["allow"]]')" = \
		"[('label:team=a', False), ('label:role=review', True), ('zed', False)]" ]; then
	ok "create --allow label:KEY=VALUE[:ro]"; else bad "label rules"; cat "$tmp/out" "$tmp/err"; fi
if run 2 drive allow team 'label:team' && run 2 run --kernel "$kernel" --label 'a b=c' -- true &&
	grep -q -- "--label 'a b=c'" "$tmp/err"; then ok "labels and label rules checked"; else bad "label syntax"; fi
if run 1 run --kernel "$kernel" --name x --label team=a --drive team -- true && ! grep -q "does not allow" "$tmp/err" &&
	! grep -q "read-only" "$tmp/err"; then ok "run: a label rule lets a sandbox in"; else bad "label allowed"; fi
if run 1 run --kernel "$kernel" --name x --label team=a --label role=review --drive team -- true &&
	grep -q "read-only (rule label:role=review:ro)" "$tmp/err"; then
	ok "run: of two label rules read-only wins, named"; else bad "ro label"; cat "$tmp/err"; fi
if run 1 run --kernel "$kernel" --name zed --label role=review --drive team -- true && ! grep -q "read-only" "$tmp/err"; then
	ok "run: the own name rule wins over label rules"; else bad "name over label"; fi
if run 1 run --kernel "$kernel" --name y --label team=b --drive team -- true && grep -q "does not allow sandbox y" "$tmp/err"; then
	ok "run: another label's sandbox refused"; else bad "label refusal"; fi
if run 0 drive deny team label:team=a && run 1 run --kernel "$kernel" --name x --label team=a --drive team -- true &&
	grep -q "does not allow" "$tmp/err"; then ok "deny label:KEY=VALUE"; else bad "deny label"; fi
mkdir -m 700 "$VMM_STATE_DIR/lab1" "$VMM_STATE_DIR/lab2"
for s in lab1 lab2; do
	echo tok > "$VMM_STATE_DIR/$s/token"
	lab=team=a; [ $s = lab2 ] && lab=team=b
	echo "{\"name\":\"$s\",\"kind\":\"run\",\"cpus\":1,\"mem_mib\":64,\"created\":1,\"labels\":\"$lab,x/y=1\"}" \
		> "$VMM_STATE_DIR/$s/config.json"
	printf '0\ndone\n' > "$VMM_STATE_DIR/$s/exit"
done
if run 0 ls --json && [ "$(json '[x["labels"] for x in d if x["name"].startswith("lab")]')" = "[{'team': 'a', 'x/y': '1'}, {'team': 'b', 'x/y': '1'}]" ] &&
	run 0 ls -q --filter label=team=b && [ "$(cat "$tmp/out")" = lab2 ] &&
	run 0 ls -q --filter label=x/y=1 --filter label=team=a && [ "$(cat "$tmp/out")" = lab1 ] &&
	run 0 ls --json --filter label=team=c && [ "$(cat "$tmp/out")" = "[]" ] && run 2 ls --filter team=a; then
	ok "ls --json shows labels, --filter label=KEY=VALUE"; else bad "ls labels"; cat "$tmp/out" "$tmp/err"; fi

if run 0 drive rm mine && [ -f "$tmp/mine/f" ] && [ ! -e "$tmp/drives/mine" ]; then
	ok "rm: a --path folder is kept"; else bad "rm --path"; fi
if run 0 drive rm work && [ ! -e "$tmp/drives/work" ]; then ok "rm: the store's folder goes"; else bad "rm"; fi
if run 1 drive inspect work; then ok "inspect: gone"; else bad "inspect gone"; fi
echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
