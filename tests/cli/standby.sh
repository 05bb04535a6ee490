#!/usr/bin/env bash
# Standby without KVM: made-up sandboxes on standby (a folder with a
# standby/ state and no VMM, as vmm suspend leaves it: cli/sandbox/sandbox_standby.h) and
# what every verb does with one; a resume that fails keeps the state and
# says why; the keeper's --idle-ttl and its wake on a published port.
#   standby.sh VMM
set -u
vmm=$1
. "$(dirname "$0")/lib.sh"

cli_state

RUN_TIMEOUT=30 # run (lib.sh)

# standby NAME [EXPIRES]: a sandbox on standby whose state cannot restore
# (its state file is no snapshot), so every resume fails.
standby() {
	local d=$VMM_STATE_DIR/$1
	mkdir -m 700 "$d" "$d/standby"
	printf '{"name":"%s","kind":"run","source":"k","cpus":1,"mem_mib":256,"created":%s,"expires":%s,"detached":true,"publish":"","net":"","image":""}' \
		"$1" "$(date +%s)" "${2:-0}" > "$d/config.json"
	echo tok > "$d/token"
	echo "not a state file" > "$d/standby/state"
	truncate -s 1M "$d/standby/memory"
	date +%s > "$d/standby.since"
}

standby s1
if run 0 ls --format '{{.Name}} {{.State}}' && grep -qx "s1 standby" "$tmp/out"; then
	ok "ls: a suspended sandbox is standby"
else bad "ls: standby state"; fi
sum=$(md5sum < "$VMM_STATE_DIR/s1/standby/state")

# A wake that fails: status 1, said why, still standby, state untouched.
if run 1 exec s1 -- true && grep -q "cannot wake it from standby" "$tmp/err" &&
	[ "$(md5sum < "$VMM_STATE_DIR/s1/standby/state")" = "$sum" ] &&
	[ -s "$VMM_STATE_DIR/s1/standby.error" ]; then
	ok "exec on standby: the failed resume keeps the state and says why"
else bad "exec on standby, failed resume"; fi
if run 0 inspect s1 && grep -q '"state":"standby"' "$tmp/out" && grep -q 'resume failed' "$tmp/out"; then
	ok "inspect: standby with the resume's error"
else bad "inspect after a failed resume"; cat "$tmp/out"; fi
if run 1 resume s1 && run 0 ls --format '{{.Name}} {{.State}}' && grep -qx "s1 standby" "$tmp/out"; then
	ok "resume that fails: still standby"
else bad "resume that fails"; fi

# Two wakers at once share the lock: both fail the same way, one restore
# at a time (the second finds the error and tries once more itself).
( timeout 30 "$vmm" exec s1 -- true > /dev/null 2> "$tmp/e1"; echo $? > "$tmp/r1" ) &
( timeout 30 "$vmm" exec s1 -- true > /dev/null 2> "$tmp/e2"; echo $? > "$tmp/r2" ) &
wait
if [ "$(cat "$tmp/r1")" = 1 ] && [ "$(cat "$tmp/r2")" = 1 ] &&
	[ "$(md5sum < "$VMM_STATE_DIR/s1/standby/state")" = "$sum" ]; then
	ok "two concurrent wakers: both return, state untouched"
else bad "two concurrent wakers"; fi

# Mid-restore a sandbox reads as dead (its standby state consumed, the
# new VMM's pid not yet recorded) while the waker holds the wake lock: a
# second exec waits for that waker, then looks again, instead of saying
# "dead" at once. Here the "restore" (a flock held for 2 s) leaves it
# dead: the exec says so only after the holder let go.
standby s9
mv "$VMM_STATE_DIR/s9/standby/state" "$VMM_STATE_DIR/s9/standby/state.consumed"
: > "$VMM_STATE_DIR/s9/wake.lock"
flock -x "$VMM_STATE_DIR/s9/wake.lock" sh -c "echo held > '$tmp/held'; sleep 2; echo released > '$tmp/released'" &
holder=$!
for _ in $(seq 50); do [ -e "$tmp/held" ] && break; sleep 0.1; done
if run 1 exec s9 -- true && grep -q "s9 is not running (dead)" "$tmp/err" && [ -e "$tmp/released" ]; then
	ok "exec on a sandbox another waker is restoring: waits for the wake lock, then looks again"
else bad "exec during another's restore: $(cat "$tmp/err"), released: $(cat "$tmp/released" 2> /dev/null)"; fi
wait "$holder"
if run 0 ls --format '{{.Name}} {{.State}}' && grep -qx "s9 dead" "$tmp/out" && run 1 exec s9 -- true &&
	grep -q "not running (dead)" "$tmp/err"; then
	ok "exec on a dead sandbox with no restore under way: refused at once"
else bad "exec on a dead sandbox: $(cat "$tmp/err")"; fi
"$vmm" rm -f s9 > /dev/null 2>&1

if run 2 suspend s1 -x; then ok "suspend: usage"; else bad "suspend usage"; fi
if run 0 suspend s1 && grep -qx s1 "$tmp/out"; then
	ok "suspend of a sandbox on standby: nothing to do"
else bad "suspend on standby"; fi

if run 0 stop s1 && run 0 ls --format '{{.Name}} {{.State}}' && grep -qx "s1 exited" "$tmp/out" &&
	[ ! -e "$VMM_STATE_DIR/s1/standby/state" ]; then
	ok "stop on standby: exited, the state dropped"
else bad "stop on standby"; fi
if run 1 suspend s1 && grep -q "not running" "$tmp/err"; then
	ok "suspend of an exited sandbox: refused"
else bad "suspend of an exited sandbox"; fi

standby s2
if run 0 rm s2 && [ ! -e "$VMM_STATE_DIR/s2" ]; then
	ok "rm on standby: removed"
else bad "rm on standby"; fi
standby s3 $(($(date +%s) - 5))
if run 0 prune && grep -qx s3 "$tmp/out" && [ ! -e "$VMM_STATE_DIR/s3" ]; then
	ok "prune: a standby sandbox whose --ttl ran out is removed"
else bad "prune of an expired standby sandbox"; fi

if run 2 run --kernel /dev/null --idle-timeout soon; then
	ok "--idle-timeout: a duration"
else bad "--idle-timeout parsing"; fi
if run 2 restore /nonexistent --in-place -d; then
	ok "--in-place: only as vmm resume uses it"
else bad "--in-place checks"; fi

# The keeper (started by a VMM; here by a subshell that exits at once, as
# a suspended VMM does): --idle-ttl removes the sandbox on standby.
if command -v python3 > /dev/null; then
	standby s4
	printf -- '--idle-ttl\0001s\000' > "$VMM_STATE_DIR/s4/standby.args"
	echo $(($(date +%s) - 10)) > "$VMM_STATE_DIR/s4/standby.since"
	true & gone=$!; wait $gone # a VMM that has exited
	"$vmm" __keeper s4 $gone > "$tmp/k4" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -e "$VMM_STATE_DIR/s4" ] || break; sleep 0.1; done
	if [ ! -e "$VMM_STATE_DIR/s4" ]; then
		ok "keeper: --idle-ttl removes a sandbox on standby"
	else bad "keeper --idle-ttl"; cat "$tmp/k4"; fi

	# A published port stays open while it sleeps; a connection wakes it
	# (here the resume fails: the error is recorded, the port still listens).
	standby s5
	python3 - "$vmm" "$tmp/port" > "$tmp/k5" 2>&1 <<'PY' &
import os, socket, subprocess, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[2], "w").write(str(s.getsockname()[1]))
os.dup2(s.fileno(), 3)
os.set_inheritable(3, True)
port = s.getsockname()[1]
env = dict(os.environ, VMM_LISTEN_FDS="3=127.0.0.1:%d:80" % port)
subprocess.Popen([sys.argv[1], "__keeper", "s5", str(os.getpid())], pass_fds=(3,), env=env)
PY
	wait
	for _ in $(seq 50); do [ -e "$VMM_STATE_DIR/s5/keeper" ] && break; sleep 0.1; done
	port=$(cat "$tmp/port")
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 5)" 2> /dev/null
	conn=$?
	for _ in $(seq 100); do [ -s "$VMM_STATE_DIR/s5/standby.error" ] && break; sleep 0.1; done
	if [ "$conn" = 0 ] && [ -s "$VMM_STATE_DIR/s5/standby.error" ]; then
		ok "keeper: a connection to a published port while on standby wakes it"
	else bad "keeper: published port wake"; cat "$tmp/k5"; fi
	rm -rf "$VMM_STATE_DIR/s5" # its keeper sees the folder go and exits
else
	skipped "keeper tests: no python3"
fi

# A VMM that died after a resume from standby (running, or killed in a
# suspend before its commit): the state it came from is consumed (the
# marker names it; here a made-up state no marker can match), so it is
# dead, and resume says why instead of asking its control socket.
standby s6
head -c 16 /dev/zero > "$VMM_STATE_DIR/s6/standby/state.consumed"
if run 0 ls --format '{{.Name}} {{.State}}' && grep -qx "s6 dead" "$tmp/out" &&
	run 1 resume s6 && grep -q "consumed at the resume" "$tmp/err"; then
	ok "dead after a resume from standby: nothing to resume, and resume says why"
else bad "dead after resume: $(cat "$tmp/out" "$tmp/err")"; fi

echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
