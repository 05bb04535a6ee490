#!/usr/bin/env bash
# CLI checks that need no KVM (they run everywhere, in a second or two):
# disk locks held by another process or by a made-up sandbox, and verbs
# on made-up sandboxes in a temporary state directory (their records as
# the VMM writes them: cli/sandbox/sandbox.c, docs/cli.md).
#   state.sh VMM KERNEL [GUEST_INIT]   (KERNEL: any file, the VM is never
#   built; GUEST_INIT: the host build of guest-init, for vmm exec)
set -u
vmm=$1
kernel=$2
. "$(dirname "$0")/lib.sh"

if ! command -v python3 > /dev/null; then
	echo "skip all: no python3"
	echo "cli: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
export VMM_STATE_DIR=$tmp/state
mkdir -m 700 "$VMM_STATE_DIR"
# No VM is ever built: a run that got past its checks fails on the KVM
# device, and says so.
export VMM_KVM_DEVICE=$tmp/no-kvm

# lock_holder FILE MODE READY: a process holding an OFD lock (MODE r or
# w) on FILE, as a VMM's disk device does; READY appears once it holds
# it. Its pid in $holder.
lock_holder() {
	python3 - "$1" "$2" "$3" > /dev/null 2>&1 <<'PY' &
import fcntl, os, struct, sys, time
path, mode, ready = sys.argv[1:4]
fd = os.open(path, os.O_RDWR if mode == "w" else os.O_RDONLY)
lk = struct.pack("hhqqi4x", fcntl.F_WRLCK if mode == "w" else fcntl.F_RDLCK, 0, 0, 0, 0)
fcntl.fcntl(fd, getattr(fcntl, "F_OFD_SETLK", 37), lk)
open(ready, "w").close()
time.sleep(600)
PY
	holder=$!
	pids+=("$holder")
	for _ in $(seq 100); do [ -e "$3" ] && break; sleep 0.05; done
}


truncate -s 1M "$tmp/d.img" "$tmp/ro.img"

# A disk another process writes: refused before anything is built.
lock_holder "$tmp/d.img" w "$tmp/ready1"
if run 1 run --kernel "$kernel" --disk "path=$tmp/d.img" &&
	grep -q "in use by another process" "$tmp/err" && ! grep -q "$tmp/no-kvm" "$tmp/err"; then
	ok "disk locked by another process: refused, status 1"
else bad "disk locked by another process"; fi
if run 1 run --kernel "$kernel" --disk "path=$tmp/d.img,ro" && grep -q "in use by another process" "$tmp/err"; then
	ok "read-only disk another process writes: refused"
else bad "read-only disk another process writes"; fi
# lock=off: the check is skipped (the run goes on to the missing KVM).
if run 1 run --kernel "$kernel" --disk "path=$tmp/d.img,lock=off" && ! grep -q "in use" "$tmp/err" &&
	grep -q "$tmp/no-kvm" "$tmp/err"; then
	ok "lock=off: not refused"
else bad "lock=off"; fi
kill "$holder"; wait "$holder" 2> /dev/null

# Shared locks: readers together, no writer.
lock_holder "$tmp/ro.img" r "$tmp/ready2"
if run 1 run --kernel "$kernel" --disk "path=$tmp/ro.img,ro" && ! grep -q "in use" "$tmp/err" &&
	run 1 run --kernel "$kernel" --disk "path=$tmp/ro.img" && grep -q "in use by another process" "$tmp/err"; then
	ok "a read-only disk: shared with readers, refused to a writer"
else bad "read-only sharing"; fi

# record_process DIR PID: the record a VMM leaves (cli/sandbox/sandbox.c: pid,
# start time, its binary's device and inode), so the CLI takes PID for
# the sandbox's VMM; a bare pid file is never trusted.
record_process() {
	local st dev ino
	st=$(sed 's/^.*) //' "/proc/$2/stat" | cut -d' ' -f20)
	read -r dev ino < <(stat -L -c '%d %i' "/proc/$2/exe")
	echo "$2 $st $dev $ino" > "$1/process"
	echo "$2" > "$1/pid"
}

# The holder named: a sandbox whose record lists the disk and whose VMM
# (here the lock holder) is alive.
mkdir -m 700 "$VMM_STATE_DIR/owner"
record_process "$VMM_STATE_DIR/owner" "$holder"
realpath "$tmp/ro.img" > "$VMM_STATE_DIR/owner/disks"
echo '{"name":"owner","kind":"run","source":"k","cpus":1,"mem_mib":64,"created":1,"expires":0,"detached":true}' \
	> "$VMM_STATE_DIR/owner/config.json"
if run 1 run --kernel "$kernel" --disk "path=$tmp/../$(basename "$tmp")/ro.img" &&
	grep -q "in use by sandbox owner" "$tmp/err"; then
	ok "disk locked by a sandbox: its name in the message"
else bad "holder's name"; fi
kill "$holder"; wait "$holder" 2> /dev/null
rm -rf "$VMM_STATE_DIR/owner"

# made_up NAME: a sandbox folder as the VMM leaves it (token, config).
made_up() {
	mkdir -m 700 "$VMM_STATE_DIR/$1"
	echo tok > "$VMM_STATE_DIR/$1/token"
	echo "{\"name\":\"$1\",\"kind\":\"run\",\"source\":\"k\",\"cpus\":1,\"mem_mib\":64,\"created\":1,\"expires\":0,\"detached\":true}" \
		> "$VMM_STATE_DIR/$1/config.json"
}
echo x > "$tmp/file"
# exited: its exit record; created: vmm create's marker.
made_up ex
printf '0\nthe guest powered off\n' > "$VMM_STATE_DIR/ex/exit"
made_up cr
: > "$VMM_STATE_DIR/cr/created"
for v in ex cr; do
	want="$v is not running (exited)"
	[ $v = cr ] && want="$v is not running (created: vmm start $v)"
	if run 1 exec $v -- true && grep -qF "$want" "$tmp/err" &&
		run 1 cp "$tmp/file" "$v:/tmp/file" && grep -qF "$want" "$tmp/err"; then
		ok "exec and cp into a sandbox that is $([ $v = ex ] && echo exited || echo created): '$want'"
	else bad "exec/cp into $v"; fi
done
# paused: its VMM (a stand-in here) answers the control socket, says
# paused, and its vsock socket accepts and never answers (a paused device).
made_up pz
python3 - "$VMM_STATE_DIR/pz" > /dev/null 2>&1 <<'PY' &
import os, socket, sys, threading
d = sys.argv[1]
vs = socket.socket(socket.AF_UNIX); vs.bind(d + "/vsock.sock"); vs.listen(8)
cs = socket.socket(socket.AF_UNIX); cs.bind(d + "/control.sock"); cs.listen(8)
open(d + "/pid", "w").write("%d\n" % os.getpid())
held = []
threading.Thread(target=lambda: [held.append(vs.accept()) for _ in iter(int, 1)], daemon=True).start()
while True:
    c, _ = cs.accept()
    req = b""
    while not req.endswith(b"\n"):
        req += c.recv(4096) or b"\n"
    c.sendall(b'{"ok":true,"state":"paused"}\n')
    c.close()
PY
pids+=($!)
for _ in $(seq 100); do [ -S "$VMM_STATE_DIR/pz/control.sock" ] && [ -s "$VMM_STATE_DIR/pz/pid" ] && break; sleep 0.05; done
record_process "$VMM_STATE_DIR/pz" "$(cat "$VMM_STATE_DIR/pz/pid")"
start=$(date +%s)
if run 1 exec pz -- true && grep -qF "pz is paused (vmm resume pz)" "$tmp/err" &&
	run 1 cp "$tmp/file" "pz:/tmp/file" && grep -qF "pz is paused (vmm resume pz)" "$tmp/err" &&
	[ $(($(date +%s) - start)) -lt 10 ]; then
	ok "exec and cp into a paused sandbox: 'pz is paused (vmm resume pz)' at once"
else bad "exec/cp into a paused sandbox"; fi

# A jailed sandbox's snapshot is written by its VMM (the jail uid) into
# jail-rw and moved out by root: a VMM its guest took over (a stand-in
# here) that leaves a link to a host file as the memory must not get it
# kept, for a later restore to read as root.
made_up js
mkdir -m 700 "$VMM_STATE_DIR/js/jail-rw"
echo host-secret > "$tmp/secret"
python3 - "$VMM_STATE_DIR/js" "$tmp/secret" > /dev/null 2>&1 <<'PY' &
import json, os, socket, sys
d, secret = sys.argv[1:3]
cs = socket.socket(socket.AF_UNIX); cs.bind(d + "/control.sock"); cs.listen(8)
open(d + "/pid", "w").write("%d\n" % os.getpid())
while True:
    c, _ = cs.accept()
    req = b""
    while not req.endswith(b"\n"):
        req += c.recv(4096) or b"\n"
    r = json.loads(req)
    if r.get("op") == "snapshot":
        os.mkdir(r["dir"])
        open(r["dir"] + "/state", "w").write("x")
        os.symlink(secret, r["dir"] + "/memory")
        c.sendall(b'{"ok":true}\n')
    else:
        c.sendall(b'{"ok":true,"state":"running"}\n')
    c.close()
PY
pids+=($!)
for _ in $(seq 100); do [ -S "$VMM_STATE_DIR/js/control.sock" ] && [ -s "$VMM_STATE_DIR/js/pid" ] && break; sleep 0.05; done
record_process "$VMM_STATE_DIR/js" "$(cat "$VMM_STATE_DIR/js/pid")"
run 1 snapshot js "$tmp/js-snap"
if [ ! -L "$tmp/js-snap/memory" ] && [ ! -e "$tmp/js-snap" ] && grep -q "not a folder of plain files" "$tmp/err"; then
	ok "a jailed VMM's snapshot holding a link to a host file: refused and removed"
else bad "a jailed VMM's snapshot with a link in it (kept: $(ls -l "$tmp/js-snap" 2>&1 | tr '\n' ' '))"; fi

# A long state directory (issue 39: containerd's root and a 64-hex
# Kubernetes ID put the sockets past sun_path's 108 bytes): a run is no
# longer refused for it (it goes on to the missing KVM device), and the
# verbs reach a sandbox there through the folder (vmm/base/unixsock.h).
long=$tmp/$(printf 'r%.0s' $(seq 150))
hex=$(printf '%064x' 39)
mkdir -m 700 "$long"
if VMM_STATE_DIR=$long run 1 run --name "$hex" --kernel "$kernel" && ! grep -q "too long" "$tmp/err" &&
	grep -q "$tmp/no-kvm" "$tmp/err"; then
	ok "run under a ${#long}-byte state directory with a 64-hex name: not refused for the socket paths"
else bad "run under a long state directory"; fi
mkdir -m 700 "$long/$hex"
echo tok > "$long/$hex/token"
echo "{\"name\":\"$hex\",\"kind\":\"run\",\"source\":\"k\",\"cpus\":1,\"mem_mib\":64,\"created\":1,\"expires\":0,\"detached\":true}" \
	> "$long/$hex/config.json"
# its stand-in VMM binds through the folder too (Python's bind has the same limit)
python3 - "$long/$hex" > /dev/null 2>&1 <<'PY' &
import os, socket, sys
d = sys.argv[1]
fd = os.open(d, os.O_PATH)
cs = socket.socket(socket.AF_UNIX); cs.bind("/proc/self/fd/%d/control.sock" % fd); cs.listen(8)
open(d + "/pid", "w").write("%d\n" % os.getpid())
while True:
    c, _ = cs.accept()
    req = b""
    while not req.endswith(b"\n"):
        req += c.recv(4096) or b"\n"
    c.sendall(b'{"ok":true,"state":"paused"}\n')
    c.close()
PY
pids+=($!)
for _ in $(seq 100); do [ -S "$long/$hex/control.sock" ] && [ -s "$long/$hex/pid" ] && break; sleep 0.05; done
record_process "$long/$hex" "$(cat "$long/$hex/pid")"
sock="$long/$hex/control.sock"
if VMM_STATE_DIR=$long run 1 exec "$hex" -- true && grep -qF "$hex is paused" "$tmp/err" &&
	VMM_STATE_DIR=$long run 0 ls && grep -q "$hex" "$tmp/out"; then
	ok "exec and ls reach a sandbox whose control socket is ${#sock} bytes long"
else bad "a sandbox under a long state directory"; fi

# vmm exec in the background of a terminal (`vmm exec ... &`): it must not
# stop on the terminal (SIGTTOU for -t's raw mode, SIGTTIN for stdin), and
# reads it once brought to the foreground. Against the host build of
# guest-init (the sandbox API without a VM).
if [ -n "${3:-}" ] && [ -x "$3" ]; then
	mkdir "$tmp/reg"
	VMM_API_TOKEN=tok VMM_API_REGISTRY="$tmp/reg" setsid "$3" --serve-unix "$tmp/api.sock" > /dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -S "$tmp/api.sock" ] && break; sleep 0.05; done
	pty=$(dirname "$0")/pty_background.py
	export VMM_API_PORT=0 VMM_TOKEN=tok
	for t in "" -t; do
		if timeout 60 python3 "$pty" --timeout 20 -- "$vmm" exec $t "$tmp/api.sock" -- echo in-the-background \
			> "$tmp/err" 2>&1 && grep -q in-the-background "$tmp/err"; then
			ok "vmm exec $t ... & on a terminal: runs to the end in the background"
		else bad "vmm exec $t ... & on a terminal (stopped?)"; fi
		if timeout 60 python3 "$pty" --timeout 20 --fg-on READY --type 'typed-in\r\x04' -- \
			"$vmm" exec $t "$tmp/api.sock" -- sh -c 'echo READY; tr a-z A-Z' > "$tmp/err" 2>&1 &&
			grep -q TYPED-IN "$tmp/err"; then
			ok "vmm exec $t ... &, then fg: reads the terminal once in the foreground"
		else bad "vmm exec $t ... &, then fg"; fi
	done
	unset VMM_API_PORT VMM_TOKEN
else skipped "vmm exec in the background of a terminal: no host guest-init (make build/tools/guest-init)"; fi

echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
