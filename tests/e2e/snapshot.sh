# Sourced by run.sh (uses its ok/bad/check, $vmm, $asan_vmm, $tmp): the
# snapshot tier. One boot (the "gold" sandbox, snapshotted when its API is
# ready and stopped); everything else restores from it.
export VMM_STATE_DIR=$tmp/state
e2e_dir=${e2e_dir:-$(dirname "$0")}

# ready NAME: waits until the sandbox's API runs a command (max 120 s).
ready() {
	for _ in $(seq 240); do
		timeout 20 "$vmm" exec "$1" -- true > /dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}

# restore_bg NAME [ARGS]: a clone from the gold snapshot, in the background.
restore_bg() {
	local name=$1
	shift
	timeout 900 "$vmm" restore "$tmp/gold" --name "$name" --console "file:$tmp/$name.console" "$@" \
		< /dev/null > "$tmp/$name.out" 2> "$tmp/$name.err" &
}

stop_sandbox() { # through the guest: powers off, the VMM exits 0
	timeout 60 "$vmm" exec "$1" -- sh -c 'vmmctl poweroff 2>/dev/null || poweroff -f' > /dev/null 2>&1
}

# ---- the gold boot --------------------------------------------------------
cp "$rootfs" "$tmp/gold-root.img"
start=$(date +%s)
timeout 1200 "$vmm" run --name gold --kernel "$kernel" --mem 256 --disk "path=$tmp/gold-root.img,root" \
	--token e2e-token --console "file:$tmp/gold.console" < /dev/null 2> "$tmp/gold.err" &
gold_pid=$!
for _ in $(seq 1200); do
	grep -q "API ready" "$tmp/gold.console" 2>/dev/null && break
	kill -0 $gold_pid 2>/dev/null || break
	sleep 0.5
done
echo "     gold sandbox: API ready after $(( $(date +%s) - start )) s (a full boot)"
check "api: guest-init wrote the boot marker once the API listened" "$tmp/gold.err" "boot marker: guest ready"
if timeout 120 "$vmm" snapshot --stop gold "$tmp/gold" > "$tmp/gold.snap" 2>&1; then
	ok "snapshot: gold sandbox at API-ready ($(grep -o '"total_ms":[0-9]*' "$tmp/gold.snap"))"
else bad "snapshot: $(cat "$tmp/gold.snap")"; fi
wait $gold_pid
st=$?
if [ "$st" = 0 ] && [ ! -e "$VMM_STATE_DIR/gold" ]; then ok "snapshot --stop: VMM exited 0, its folder removed"
else bad "snapshot --stop: status $st, folder $(ls "$VMM_STATE_DIR" 2>&1)"; fi
mem_alloc=$(( $(stat -c %b "$tmp/gold/memory") * 512 ))
if [ -s "$tmp/gold/state" ] && [ "$(stat -c %s "$tmp/gold/memory")" = $((256 << 20)) ] &&
	[ "$mem_alloc" -lt $((200 << 20)) ]; then
	ok "snapshot: state file + sparse memory file ($((mem_alloc >> 20)) MiB of 256 allocated)"
else bad "snapshot: files $(ls -ls "$tmp/gold" 2>&1)"; fi
gold_disk_md5=$(md5sum < "$tmp/gold/disk0")

# ---- a clone continues where the original was ---------------------------
restore_bg e2e-a
if ready e2e-a; then ok "restore: clone e2e-a answers vmm exec"
else bad "restore: e2e-a never answered: $(tail -3 "$tmp/e2e-a.err")"; fi
# The counter renames its file into place: a reader never sees it empty.
run_in e2e-a sh -c 'echo from-a > /root/mark.txt; sync
	(i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done) < /dev/null > /dev/null 2>&1 &
	sleep 2; cat /tmp/count' > "$tmp/a.count0" 2>&1
timeout 120 "$vmm" snapshot e2e-a "$tmp/snap-a" > "$tmp/a.snap" 2>&1 || bad "snapshot of a running clone: $(cat "$tmp/a.snap")"
c_after=$(run_in e2e-a cat /tmp/count)
if [ -n "$c_after" ] && [ "$c_after" -gt "$(cat "$tmp/a.count0")" ]; then
	ok "snapshot: the original resumes (its counter went on: $(cat "$tmp/a.count0") -> $c_after)"
else bad "snapshot: original's counter $(cat "$tmp/a.count0") -> '$c_after'"; fi
timeout 900 "$vmm" restore "$tmp/snap-a" --name e2e-b --console "file:$tmp/e2e-b.console" \
	< /dev/null > /dev/null 2> "$tmp/e2e-b.err" &
if ready e2e-b; then
	b1=$(run_in e2e-b cat /tmp/count)
	sleep 2
	b2=$(run_in e2e-b cat /tmp/count)
	if [ -n "$b1" ] && [ "$b1" -ge "$(cat "$tmp/a.count0")" ] && [ "$b2" -gt "$b1" ]; then
		ok "restore: the counting process continues in the clone ($(cat "$tmp/a.count0") at snapshot, then $b1, $b2)"
	else bad "restore: counter in the clone '$b1' '$b2' (snapshot at $(cat "$tmp/a.count0")); its VMM said: $(tail -5 "$tmp/e2e-b.err")"; fi
	if [ "$(run_in e2e-b cat /root/mark.txt)" = from-a ]; then
		ok "restore: a file written before the snapshot is there after it"
	else bad "restore: /root/mark.txt in the clone is not 'from-a'"; fi
	gt=$(run_in e2e-b date +%s)
	if [ -n "$gt" ] && [ $(( gt - $(date +%s) )) -le 5 ] && [ $(( $(date +%s) - gt )) -le 5 ]; then
		ok "restore: the clone's clock is the host's (sync after restore)"
	else bad "restore: clone clock $gt, host $(date +%s)"; fi
else bad "restore: e2e-b never answered: $(tail -3 "$tmp/e2e-b.err")"; fi
stop_sandbox e2e-b
stop_sandbox e2e-a

# ---- four clones at once from one snapshot ------------------------------
for n in 1 2 3 4; do restore_bg "e2e-c$n"; done
all=1
for n in 1 2 3 4; do ready "e2e-c$n" || all=0; done
if [ $all = 1 ]; then ok "restore: 4 clones of one snapshot started concurrently, each answers vmm exec"
else bad "restore: not all 4 clones answered"; fi
for n in 1 2 3 4; do
	run_in "e2e-c$n" sh -c "echo clone-$n > /root/who; sync; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'" \
		> "$tmp/c$n.rand" 2>&1 &
done
for n in 1 2 3 4; do
	for _ in $(seq 120); do [ -s "$tmp/c$n.rand" ] && break; sleep 0.5; done
done
sleep 1
own=1
for n in 1 2 3 4; do
	[ "$(run_in "e2e-c$n" cat /root/who)" = "clone-$n" ] || own=0
done
if [ $own = 1 ]; then ok "clones: each clone's disk writes stay its own (4 writes to one path, 4 contents)"
else bad "clones: a clone saw another's write"; fi
if [ "$(for n in 1 2 3 4; do cat "$tmp/c$n.rand"; echo; done | sort -u | wc -l)" = 4 ] &&
	[ "$(wc -c < "$tmp/c1.rand")" = 32 ]; then
	ok "clones: fresh entropy after restore (4 clones read 4 different /dev/urandom values)"
else bad "clones: /dev/urandom in the clones: $(cat "$tmp"/c?.rand)"; fi
if [ "$(md5sum < "$tmp/gold/disk0")" = "$gold_disk_md5" ]; then ok "clones: the snapshot's disk is unchanged"
else bad "clones: a clone wrote into the snapshot's disk"; fi
# The sandbox API suite against one clone (powers it off at the end).
# (A clone's token is its own, not the gold's e2e-token: lifecycle.sh.)
timeout 1200 python3 "$e2e_dir/../api/api_test.py" "$vmm" "$VMM_STATE_DIR/e2e-c1/vsock.sock" 1024 \
	"$(cat "$VMM_STATE_DIR/e2e-c1/token")" \
	--scale full --shutdown --console "$tmp/e2e-c1.console" > "$tmp/api.log" 2>&1
sed 's/^/     | /' "$tmp/api.log"
if grep -q "^api: [1-9][0-9]* passed, 0 failed" "$tmp/api.log"; then
	ok "api: $(grep -c '^ok' "$tmp/api.log") checks through vmm exec / vmm cp against a restored sandbox"
else bad "api: checks against guest-init failed"; fi
# MCP over stdio and HTTP with scoped tokens against another clone
# (issue 20's session: exec, write/read/edit_file in the guest).
timeout 600 python3 "$e2e_dir/../api/mcp_e2e.py" "$vmm" "$VMM_STATE_DIR" e2e-c2 > "$tmp/mcp.log" 2>&1
sed 's/^/     | /' "$tmp/mcp.log"
if grep -q "^mcp-e2e: [1-9][0-9]* passed, 0 failed" "$tmp/mcp.log"; then
	ok "mcp: a session over stdio and over HTTP with scoped tokens against a restored sandbox"
else bad "mcp: the MCP session against a restored sandbox failed"; fi
for n in 2 3 4; do stop_sandbox "e2e-c$n"; done
sleep 2
if [ -z "$(ls "$VMM_STATE_DIR")" ]; then ok "clones: every sandbox folder (sockets, disk copies) removed on exit"
else bad "clones: left behind in the state directory: $(ls "$VMM_STATE_DIR")"; fi

# ---- restore -- CMD, the one-shot form ----------------------------------
timeout 600 "$vmm" restore "$tmp/gold" --console "file:$tmp/oneshot.console" \
	-- sh -c 'echo restored $(cat /etc/hostname 2>/dev/null || hostname); exit 5' \
	< /dev/null > "$tmp/oneshot.out" 2> "$tmp/oneshot.err"
st=$?
if [ "$st" = 5 ] && grep -q "^restored" "$tmp/oneshot.out"; then ok "vmm restore DIR -- CMD: output, exit status 5"
else bad "vmm restore -- CMD: status $st, $(cat "$tmp/oneshot.out" "$tmp/oneshot.err" | tail -3)"; fi

# ---- refusals: before any guest code runs --------------------------------
refused() { # refused DESCRIPTION PATTERN DIR [VMM]
	local v=${4:-$vmm}
	timeout 120 "$v" restore "$3" --name refused -- true < /dev/null > "$tmp/ref.out" 2> "$tmp/ref.err"
	local st=$?
	if [ "$st" = 1 ] && grep -qE -- "$2" "$tmp/ref.err" && [ ! -e "$VMM_STATE_DIR/refused" ]; then ok "refused: $1"
	else bad "refused: $1: status $st, $(tail -2 "$tmp/ref.err")"; fi
}
variant() { rm -rf "$tmp/bad"; mkdir "$tmp/bad"; cp --reflink=auto --sparse=always "$tmp/gold/"* "$tmp/bad/"; }
variant; truncate -s -100 "$tmp/bad/state"; refused "truncated state file" "truncated" "$tmp/bad"
variant; printf 'X' | dd of="$tmp/bad/state" bs=1 seek=0 conv=notrunc 2> /dev/null
refused "bad magic" "bad magic" "$tmp/bad"
variant; printf '\x09' | dd of="$tmp/bad/state" bs=1 seek=8 conv=notrunc 2> /dev/null
refused "another format version (or header damage)" "header is corrupted|version" "$tmp/bad"
variant; printf '\xff' | dd of="$tmp/bad/state" bs=1 seek=200 conv=notrunc 2> /dev/null
refused "corrupted body (checksum)" "checksum" "$tmp/bad"
variant; truncate -s 1M "$tmp/bad/memory"; refused "truncated memory file" "memory file" "$tmp/bad"
variant; rm "$tmp/bad/state"; refused "no state file (an unfinished snapshot)" "no state file" "$tmp/bad"
refused "not a directory" "No such file|not a" "$tmp/nonexistent"
variant; python3 "$e2e_dir/snaptamper.py" "$tmp/bad/state" queue-outside-ram > /dev/null
refused "tampered queue address, checksums recomputed (ASan build)" "outside guest RAM" "$tmp/bad" "$asan_vmm"
variant; python3 "$e2e_dir/snaptamper.py" "$tmp/bad/state" queue-misaligned > /dev/null
refused "tampered queue alignment, checksums recomputed (ASan build)" "misaligned" "$tmp/bad" "$asan_vmm"
rm -rf "$tmp/bad"

# A full disk while snapshotting leaves nothing that looks like a snapshot.
if [ "$(id -u)" = 0 ] && mkdir -p "$tmp/small" && mount -t tmpfs -o size=8m tmpfs "$tmp/small" 2> /dev/null; then
	restore_bg e2e-full
	if ready e2e-full; then
		timeout 120 "$vmm" snapshot e2e-full "$tmp/small/snap" > "$tmp/full.out" 2>&1
		st=$?
		if [ "$st" = 1 ] && grep -q "No space left" "$tmp/full.out" && [ -z "$(ls "$tmp/small")" ]; then
			ok "snapshot on a full disk: refused, nothing left behind, the sandbox runs on"
		else bad "snapshot on a full disk: status $st, $(cat "$tmp/full.out"), left: $(ls "$tmp/small")"; fi
		T=30 run_in e2e-full true || bad "the sandbox died after a failed snapshot"
	else bad "e2e-full never answered"; fi
	stop_sandbox e2e-full
	sleep 1
	umount "$tmp/small"
else
	echo "skip snapshot on a full disk: needs root to mount a small tmpfs"
fi
unset VMM_STATE_DIR
