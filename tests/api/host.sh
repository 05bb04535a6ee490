#!/usr/bin/env bash
# Runs tests/api/api_test.py, cp_test.py and mcp_test.py against the host build of
# guest-init serving on a Unix socket (no VM): the API's behaviour in seconds.
#   host.sh VMM GUEST_INIT
# HOST_TESTS="mcp mcp_conc" runs only those (names: api cp mcp mcp_drive mcp_e2e mcp_conc spare nohup orphans).
set -u
want() { [ -z "${HOST_TESTS:-}" ] || [[ " $HOST_TESTS " == *" $1 "* ]]; }
vmm=$1
gi=$2
tmp=$(mktemp -d)
mkdir -p "$tmp/reg"
VMM_API_TOKEN=host-test-token VMM_API_REGISTRY="$tmp/reg" setsid "$gi" --serve-unix "$tmp/api.sock" > "$tmp/log" 2>&1 &
pid=$!
# The server, then whatever it started that left its process group
# (detached processes, spare workers: they setsid) but still names this
# socket: left running, they outlived every run and held what the test's
# caller held open (a flock on a lock file, a pipe).
stop_server() {
	kill -- -"$pid" 2> /dev/null
	wait "$pid" 2> /dev/null
	pkill -KILL -f -- "--serve-unix $tmp/api.sock" 2> /dev/null
	rm -rf "$tmp"
}
trap stop_server EXIT
for _ in $(seq 50); do [ -S "$tmp/api.sock" ] && break; sleep 0.1; done
rc=0
if want api; then timeout 600 python3 "$(dirname "$0")/api_test.py" "$vmm" "$tmp/api.sock" 0 host-test-token --scale full || rc=1; fi
# vmm cp out of a hostile sandbox (a deep tree, guest modes, a fake server's listings)
if want cp; then timeout 900 python3 "$(dirname "$0")/cp_test.py" "$vmm" "$tmp/api.sock" host-test-token || rc=1; fi
# vmm mcp (stdio and HTTP) and vmm token: a sandbox folder in a state
# directory of our own whose vsock socket is this guest-init's API.
mkdir -m 700 "$tmp/state" "$tmp/state/mcp-sb"
ln -s "$tmp/api.sock" "$tmp/state/mcp-sb/vsock.sock"
( umask 077; printf host-test-token > "$tmp/state/mcp-sb/token" )
# Its "VMM" is this guest-init: the record the CLI trusts (pid, start
# time, binary: cli/sandbox/sandbox.c), so the sandbox counts as running.
st=$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f20)
read -r dev ino < <(stat -L -c '%d %i' "/proc/$pid/exe")
echo "$pid $st $dev $ino" > "$tmp/state/mcp-sb/process"
if want mcp; then timeout 600 python3 "$(dirname "$0")/mcp_test.py" "$vmm" "$tmp/state" mcp-sb || rc=1; fi
# drive scopes: the file tools on a drive's mount, served on the host
if want mcp_drive; then timeout 300 python3 "$(dirname "$0")/mcp_drive_test.py" "$vmm" "$tmp/state" mcp-sb || rc=1; fi
# A nohup job outlives the exec that started it (issue 38), with this
# guest-init as nohup (tools.h) and nothing else on the PATH: through
# pipes, and on the exec's terminal (-t), whose hang-up it ignores.
if want nohup; then
	mkdir "$tmp/tools"
	for t in nohup flock script; do ln -s "$(realpath "$gi")" "$tmp/tools/$t"; done
	# NAME AFTER [EXEC OPTIONS]: the job writes $tmp/NAME a second after
	# the exec's command ran AFTER and ended. On a terminal, as with ssh -t,
	# the command must not end before nohup has ignored SIGHUP: the
	# hang-up of its end reaches the job too.
	nohup_case() {
		local name=$1 after=$2 i
		shift 2
		VMM_STATE_DIR=$tmp/state VMM_API_PORT=0 timeout 30 "$vmm" exec "$@" -e PATH="$tmp/tools" mcp-sb -- \
			/bin/sh -c "cd $tmp && nohup /bin/sh -c '/bin/sleep 1; echo done > $tmp/$name' > /dev/null 2>&1 & $after" \
			< /dev/null
		for i in $(seq 100); do [ -s "$tmp/$name" ] && break; sleep 0.1; done
		if [ "$(cat "$tmp/$name" 2> /dev/null)" = done ]; then
			echo "ok   nohup: a background job outlives its exec ($name)"
		else
			echo "FAIL nohup: the job of exec $* never wrote $tmp/$name"
			rc=1
		fi
	}
	nohup_case pipes :
	nohup_case pty "/bin/sleep 0.3" -t
fi
# The session tests/e2e runs on a restored clone (files only through the tools).
if want mcp_e2e; then VMM_API_PORT=0 timeout 300 python3 "$(dirname "$0")/mcp_e2e.py" "$vmm" "$tmp/state" mcp-sb || rc=1; fi
# vmm mcp --listen under many clients: concurrency, the connection limit,
# slowloris and idle timeouts, shutdown
if want mcp_conc; then timeout 600 python3 "$(dirname "$0")/mcp_conc_test.py" "$vmm" "$tmp/state" mcp-sb || rc=1; fi
# guest-init's spare worker (a server of its own: it counts children)
if want spare; then timeout 120 python3 "$(dirname "$0")/spare_test.py" "$gi" || rc=1; fi
# The server killed alone (not its group): its forked API children (the
# spare worker, connection handlers) die with it, as they would with the
# VM, instead of serving a dead server's socket on.
if want orphans; then
	VMM_API_TOKEN=t setsid "$gi" --serve-unix "$tmp/lone.sock" > /dev/null 2>&1 &
	lone=$!
	for _ in $(seq 50); do [ -S "$tmp/lone.sock" ] && break; sleep 0.1; done
	# The server, its process manager and its idle spare worker.
	for _ in $(seq 50); do [ "$(pgrep -f -c -- "--serve-unix $tmp/lone.sock")" -ge 3 ] && break; sleep 0.1; done
	before=$(pgrep -f -c -- "--serve-unix $tmp/lone.sock")
	# Idle, none of them wakes (issue 42: an idle sandbox's guest sleeps;
	# the process manager once polled for its parent every second).
	woke() { for p in $(pgrep -f -- "--serve-unix $tmp/lone.sock"); do
		echo "$p $(grep -s '^voluntary_ctxt_switches' "/proc/$p/status" | cut -f2)"; done; }
	w1=$(woke); sleep 3; w2=$(woke)
	awoke=$(join <(sort <<< "$w1") <(sort <<< "$w2") | awk '$3 > $2 { printf "%s (%s) ", $1, $3 - $2 }')
	if [ -z "$awoke" ]; then
		echo "ok   idle: the server, its process manager and spare worker sleep (no wakeup in 3 s)"
	else
		echo "FAIL idle: woke in 3 s with nothing asked: $awoke(pid, wakeups)"
		rc=1
	fi
	{ kill -KILL "$lone"; wait "$lone"; } 2> /dev/null
	for _ in $(seq 50); do pgrep -f -- "--serve-unix $tmp/lone.sock" > /dev/null || break; sleep 0.1; done
	left=$(pgrep -f -- "--serve-unix $tmp/lone.sock" | grep -vx "$lone" | tr '\n' ' ')
	if [ "$before" -ge 3 ] && [ -z "$left" ]; then
		echo "ok   orphans: the server killed alone, none of its $((before - 1)) forked children outlives it"
	else
		echo "FAIL orphans: $before processes before the kill, left: ${left:-none}"
		rc=1
	fi
fi
exit $rc
