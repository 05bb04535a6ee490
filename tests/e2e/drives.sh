#!/usr/bin/env bash
# Drives end to end (docs/cli.md "Drives", docs/virtio-fs.md): two
# sandboxes on one drive (one allowed by name, one by a label rule), a
# file one writes read by the other; a token scoped to the drive reads and
# writes it through `vmm mcp --listen`, served on the host; a sandbox
# not on the drive's list refused before boot; writes past the drive's
# size limit get ENOSPC in the guest, the VMM unaffected; a snapshot of a
# sandbox restored as a clone gets the drive back (allow list, limit,
# inspect); the drive and its files outlive both sandboxes. Sourced by run.sh (its ok/bad, $vmm,
# $kernel, $rootfs, $tmp), or run alone:
#   tests/e2e/drives.sh VMM KERNEL ROOTFS
if [ -z "${tmp:-}" ]; then
	set -u
	vmm=$1 kernel=$2 rootfs=$3
	tmp=$(mktemp -d)
	pass=0 fail=0
	trap 'rm -rf "$tmp"' EXIT
	. "$(dirname "$0")/lib.sh"
	drives_alone=1
fi
export VMM_STATE_DIR=$tmp/drvstate VMM_DRIVE_DIR=$tmp/drvstore
mkdir -p -m 700 "$VMM_STATE_DIR"

dx() { timeout 300 "$vmm" exec "$1" -- sh -c "$2" 2>&1; }
d_start() { # d_start NAME DRIVE-ARGS...: a detached sandbox, ready for exec
	local n=$1 i
	shift
	cp "$rootfs" "$tmp/$n-root.img"
	timeout 1200 "$vmm" run -d --name "$n" --kernel "$kernel" --mem 256 --disk "path=$tmp/$n-root.img,root" \
		--console "file:$tmp/$n.console" "$@" < /dev/null > "$tmp/$n.out" 2> "$tmp/$n.err" || return 1
	for i in $(seq 480); do
		timeout 20 "$vmm" exec "$n" -- true > /dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
d_stop() { timeout 120 "$vmm" stop "$1" > /dev/null 2>&1; timeout 60 "$vmm" rm "$1" > /dev/null 2>&1; }

"$vmm" drive create work --size 8M --allow alice --allow label:team=review > /dev/null 2>&1
# The SQLite writer below, put there before the first mount so that the
# drive's byte count (rebuilt then) includes it.
sq=$(dirname "$vmm")/guest/sqlitecount
[ -x "$sq" ] && cp "$sq" "$VMM_DRIVE_DIR/work/data/sqlitecount"
if d_start alice --drive work && d_start bob --label team=review --drive work:/shared; then
	ok "drives: two sandboxes on one drive booted (bob by its label)"
else bad "drives: boot: $(tail -n 3 "$tmp/alice.err" "$tmp/bob.err")"; fi
if [ "$(dx alice 'echo from-alice > /drives/work/note; cat /drives/work/note')" = from-alice ] &&
	[ "$(dx bob 'cat /shared/note')" = from-alice ]; then
	ok "drives: a file alice writes bob reads (at /drives/work and /shared)"
else bad "drives: share: $(dx bob 'ls -la /shared; mount | grep virtiofs')"; fi
if "$vmm" drive inspect work > "$tmp/insp" && python3 -c "
import json; d = json.load(open('$tmp/insp')); assert sorted(d['used_by']) == ['alice', 'bob'], d" &&
	"$vmm" inspect alice | grep -q '"drives":"work:/drives/work"'; then
	ok "drives: inspect shows who uses the drive, and the sandbox's drives"
else bad "drives: inspect: $(cat "$tmp/insp")"; fi

# A token scoped to the drive (docs/mcp.md, "Access tokens"): the file
# tools on alice's /drives/work only, served on the host; bob sees what it
# wrote at once, and a path off the drive is refused.
tok=$("$vmm" token create --scope mcp,drive:work alice 2> "$tmp/tok.err")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$vmm" mcp alice --listen "127.0.0.1:$port" > /dev/null 2> "$tmp/mcp.err" & mcppid=$!
mcp_out=$(timeout 120 python3 - "$port" "$tok" << 'PY' 2>&1
import http.client, json, sys, time
port, tok = int(sys.argv[1]), sys.argv[2]
sess = None
def rpc(i, method, params):
    global sess
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "Authorization": "Bearer " + tok}
            if sess:
                h["Mcp-Session-Id"] = sess
            c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}), h)
            r = c.getresponse()
            sess = sess or r.getheader("Mcp-Session-Id")
            return r.status, json.loads(r.read())
        except ConnectionRefusedError:
            time.sleep(0.1)
rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}})
s, b = rpc(2, "tools/call", {"name": "read_file", "arguments": {"path": "/drives/work/note"}})
print("read", s, b["result"]["content"][0]["text"].strip())
s, b = rpc(3, "tools/call", {"name": "write_file", "arguments": {"path": "/drives/work/mcp/from-mcp", "content": "via-mcp\n"}})
print("write", s, b["result"]["isError"])
s, b = rpc(4, "tools/call", {"name": "read_file", "arguments": {"path": "/etc/hostname"}})
print("off-drive", s, b["error"]["code"])
PY
)
kill "$mcppid" 2> /dev/null; wait "$mcppid" 2> /dev/null
if [ "$mcp_out" = "$(printf 'read 200 from-alice\nwrite 200 False\noff-drive 403 -32001')" ] &&
	[ "$(dx bob 'cat /shared/mcp/from-mcp')" = via-mcp ]; then
	ok "drives: a drive-scoped token reads and writes the drive over MCP (host side), bob sees it; off the drive: 403"
else bad "drives: mcp drive scope: $mcp_out $(cat "$tmp/tok.err" "$tmp/mcp.err" | tail -3)"; fi
dx alice 'rm -r /drives/work/mcp' > /dev/null

# SQLite from both sandboxes at once (and the host, in rollback mode): each
# transaction inserts a row and adds one to a counter it has read, so both
# end exact only if the POSIX locks SQLite takes exclude across sandboxes
# (docs/virtio-fs.md, Locks). WAL mode runs with locking_mode=EXCLUSIVE, as
# SQLite requires where its shared-memory index cannot be shared.
if [ -x "$sq" ]; then
	ddata=$VMM_DRIVE_DIR/work/data
	for mode in delete wal; do
		"$ddata/sqlitecount" init "$ddata/$mode.db" $mode
		# A WAL writer reopens the database every 3 transactions, which
		# costs more lock and file round trips: fewer of them.
		each=60
		[ $mode = wal ] && each=30
		t0=$(date +%s)
		dx alice "/drives/work/sqlitecount insert /drives/work/$mode.db $mode alice $each && echo done" > "$tmp/sq-a.out" & sqa=$!
		dx bob "/shared/sqlitecount insert /shared/$mode.db $mode bob $each && echo done" > "$tmp/sq-b.out" & sqb=$!
		want=$((2 * each))
		if [ $mode = delete ]; then
			"$ddata/sqlitecount" insert "$ddata/$mode.db" $mode host $each
			want=$((3 * each))
		fi
		wait $sqa $sqb
		t1=$(date +%s)
		got=$(dx alice "/drives/work/sqlitecount check /drives/work/$mode.db")
		if [ "$got" = "integrity=ok rows=$want counter=$want" ] &&
			[ "$("$ddata/sqlitecount" check "$ddata/$mode.db")" = "$got" ]; then
			ok "drives: SQLite ($mode journal) from two sandboxes$([ $mode = delete ] && echo ' and the host') at once: $got ($((t1 - t0)) s)"
		else bad "drives: SQLite ($mode): '$got' (want $want rows) after $((t1 - t0)) s: alice '$(tail -c 300 "$tmp/sq-a.out")' bob '$(tail -c 300 "$tmp/sq-b.out")'"; fi
	done
	dx alice 'rm -f /drives/work/*.db* /drives/work/sqlitecount' > /dev/null # through the VMM: its byte count stays exact
else bad "drives: $sq not built (make e2e builds it)"; fi

# Past the limit: 8 MiB in all, alice writes 6, bob then 6 more.
out=$(dx alice 'dd if=/dev/zero of=/drives/work/a bs=1M count=6 2>&1; echo rc=$?')
out2=$(dx bob 'dd if=/dev/zero of=/shared/b bs=1M count=6 2>&1; echo rc=$?')
if [[ "$out" == *rc=0* ]] && [[ "$out2" == *"No space left"* ]] && [[ "$out2" != *rc=0* ]]; then
	ok "drives: a write past the size limit gets ENOSPC in the other sandbox"
else bad "drives: limit: alice: $out | bob: $out2"; fi
used=$(du -sk "$VMM_DRIVE_DIR/work/data" | cut -f1)
if [ "$used" -le $((8 * 1024 + 64)) ] && [ "$(dx alice 'rm /drives/work/a; dd if=/dev/zero of=/drives/work/c bs=1M count=3 2>&1; echo rc=$?' | tail -1)" = rc=0 ] &&
	[ "$(dx bob 'echo still-alive')" = still-alive ]; then
	ok "drives: $used KiB used of 8 MiB; a removed file's space comes back; both VMMs unaffected"
else bad "drives: after the limit: $used KiB"; fi

# Not on the list: refused before boot.
cp "$rootfs" "$tmp/eve-root.img"
if ! timeout 120 "$vmm" run -d --name eve --kernel "$kernel" --mem 256 --disk "path=$tmp/eve-root.img,root" \
	--drive work > /dev/null 2> "$tmp/eve.err" && grep -q "drive work does not allow sandbox eve" "$tmp/eve.err" &&
	! "$vmm" ls | grep -q '^eve '; then ok "drives: a sandbox not on the list refused before boot"
else bad "drives: eve: $(cat "$tmp/eve.err")"; fi

if ! "$vmm" drive rm work > /dev/null 2> "$tmp/rm.err" && grep -q "in use by alice,bob" "$tmp/rm.err" &&
	[ -f "$VMM_DRIVE_DIR/work/data/note" ]; then ok "drives: rm refused while sandboxes use the drive"
else bad "drives: rm in use: $(cat "$tmp/rm.err")"; fi
# A snapshot of alice restored as a new sandbox: its drive is the drive
# again, checked for the clone's name before anything runs, with the size
# limit and the shared count (docs/snapshot.md, "Drives").
d_ready() { for _ in $(seq 480); do timeout 20 "$vmm" exec "$1" -- true > /dev/null 2>&1 && return 0; sleep 0.5; done; return 1; }
if timeout 600 "$vmm" snapshot alice "$tmp/snap-alice" > /dev/null 2> "$tmp/snap.err" &&
	! timeout 120 "$vmm" restore -d "$tmp/snap-alice" --name dave > /dev/null 2> "$tmp/dave.err" &&
	grep -q "drive work does not allow sandbox dave" "$tmp/dave.err" && ! "$vmm" ls | grep -q '^dave '; then
	ok "drives: a clone the drive's list does not name refused before anything runs"
else bad "drives: clone refusal: $(cat "$tmp/snap.err" "$tmp/dave.err")"; fi
"$vmm" drive allow work clone > /dev/null 2>&1
if timeout 1200 "$vmm" restore -d "$tmp/snap-alice" --name clone < /dev/null > "$tmp/clone.out" 2> "$tmp/clone.err" &&
	d_ready clone && [ "$(dx clone 'cat /drives/work/note')" = from-alice ]; then
	ok "drives: a restored clone of alice sees the drive's files"
else bad "drives: clone: $(tail -3 "$tmp/clone.err")"; fi
out=$(dx clone 'dd if=/dev/zero of=/drives/work/d bs=1M count=9 2>&1; echo rc=$?; rm -f /drives/work/d')
if [[ "$out" == *"No space left"* ]] && [[ "$out" != *rc=0* ]] && [ "$(dx alice 'echo still-alive')" = still-alive ]; then
	ok "drives: the clone's write past the drive's limit gets ENOSPC"
else bad "drives: clone limit: $out"; fi
if "$vmm" drive inspect work > "$tmp/insp" && python3 -c "
import json; d = json.load(open('$tmp/insp')); assert sorted(d['used_by']) == ['alice', 'bob', 'clone'], d" &&
	"$vmm" inspect clone | grep -q '"drives":"work:/drives/work"'; then
	ok "drives: inspect shows the clone on the drive"
else bad "drives: clone inspect: $(cat "$tmp/insp")"; fi
d_stop clone
rm -rf "$tmp/snap-alice"

d_stop alice
d_stop bob
"$vmm" drive allow work carol > /dev/null 2>&1
if [ "$(cat "$VMM_DRIVE_DIR/work/data/note" 2>/dev/null)" = from-alice ] && d_start carol --drive work:/w:ro &&
	[ "$(dx carol 'cat /w/note')" = from-alice ]; then
	ok "drives: the drive and its files outlive both sandboxes (a third reads them, read-only)"
else bad "drives: after both: $(ls -la "$VMM_DRIVE_DIR/work/data") $(tail -2 "$tmp/carol.err")"; fi
d_stop carol
"$vmm" drive rm work > /dev/null 2>&1
if [ ! -e "$VMM_DRIVE_DIR/work" ]; then ok "drives: rm removes the store's folder"; else bad "drives: rm"; fi
if [ -n "${drives_alone:-}" ]; then
	echo "e2e drives: $pass passed, $fail failed"
	[ "$fail" = 0 ]
fi
