# Sourced by run.sh after snapshot.sh (uses $tmp/gold, its ok/bad, $vmm):
# the lifecycle CLI on named, detached sandboxes restored from the gold
# snapshot (fast, no boot).
export VMM_STATE_DIR=$tmp/lstate
lsline() { "$vmm" ls | awk -v n="$1" '$1 == n {print $2}'; }

if out=$(timeout 300 "$vmm" restore -d "$tmp/gold" --name l1 2> "$tmp/l1.err") && [ "$out" = l1 ]; then
	ok "lifecycle: restore -d returns once the API answers, prints the name"
else bad "lifecycle: restore -d: $out $(cat "$tmp/l1.err")"; fi
[ "$(lsline l1)" = running ] && ok "lifecycle: ls shows l1 running" || bad "lifecycle: ls: $("$vmm" ls)"
if "$vmm" ls --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[0]["name"]=="l1" and d[0]["state"]=="running" and d[0]["pid"]>0'; then
	ok "lifecycle: ls --json"
else bad "lifecycle: ls --json: $("$vmm" ls --json)"; fi
# A snapshot right after restore -d returned: guest-init forks its next
# spare API worker only once the clone's sync is done, and the snapshot
# waits for it (settle_ms), so a clone of this snapshot still finds one
# waiting for its sync (its helper says when it does not).
if timeout 120 "$vmm" snapshot l1 "$tmp/l1fresh" > "$tmp/l1fresh.out" 2>&1 &&
	grep -q '"settle_ms":[0-9]' "$tmp/l1fresh.out" &&
	timeout 300 "$vmm" restore -d "$tmp/l1fresh" --name l0 > /dev/null 2> "$tmp/l0.err" &&
	[ -s "$VMM_STATE_DIR/l0/vmm.log" ] && ! grep -q "held no waiting API worker" "$VMM_STATE_DIR/l0/vmm.log" "$tmp/l0.err"; then
	ok "lifecycle: a snapshot taken as restore -d returns holds a spare API worker ($(grep -o '"settle_ms":[0-9]*' "$tmp/l1fresh.out"))"
else bad "lifecycle: fresh snapshot: $(cat "$tmp/l1fresh.out") $(cat "$tmp/l0.err" "$VMM_STATE_DIR/l0/vmm.log" 2>&1 | tail -3)"; fi
# Power-off (guest-init): a process still running 3 s after SIGTERM is
# killed, and the console says so.
timeout 60 "$vmm" exec l0 -- sh -c 'trap "" TERM; exec sleep 1000' > /dev/null 2>&1 &
sleep 2
if timeout 120 "$vmm" stop l0 > /dev/null 2>&1 && "$vmm" logs l0 | grep -q "still running 3 s after SIGTERM: killed"; then
	ok "lifecycle: stop: a process that ignores SIGTERM is killed after 3 s, and the console says so"
else bad "lifecycle: stop with a SIGTERM-proof process: $("$vmm" logs l0 | tail -3)"; fi
wait
"$vmm" rm -f l0 > /dev/null 2>&1
rm -rf "$tmp/l1fresh"
echo lifecycle-data > "$tmp/l.txt"
if "$vmm" cp "$tmp/l.txt" l1:/root/l.txt && [ "$(run_in l1 cat /root/l.txt)" = lifecycle-data ]; then
	ok "lifecycle: cp and exec by name"
else bad "lifecycle: cp/exec by name"; fi
# Guest root stays out of reach of a process that gave up root (uid 65534):
# no API token in /proc/cmdline, no port I/O (the vmm port's token window),
# no API over vsock loopback even with the right token (only CID 2 may
# connect). vsock_test api-escape (tests/e2e/vsock_test.c) says which.
esc_rc=cp-failed
if "$vmm" cp "$(dirname "$vmm")/guest/vsock_test" l1:/root/vsock_test && { esc_rc=0
	timeout 120 "$vmm" exec l1 -- sh -c 'chmod 755 /root/vsock_test && /root/vsock_test api-escape 1024' \
		> "$tmp/escape.out" 2>&1 || esc_rc=$?; [ "$esc_rc" = 0 ]; } && grep -q "api-escape: root-token=window" "$tmp/escape.out" &&
	grep -q "api-escape: loopback=works" "$tmp/escape.out" && grep -q "api-escape: uid=65534" "$tmp/escape.out" &&
	grep -q "api-escape: loopback-cid-1=refused" "$tmp/escape.out" &&
	grep -q "api-escape: verdict=contained" "$tmp/escape.out"; then
	ok "lifecycle: an unprivileged guest process finds no token and cannot reach the API ($(grep -c api-escape "$tmp/escape.out") checks)"
else bad "lifecycle: api-escape (exit $esc_rc): $(tr '\n' ' ' < "$tmp/escape.out")"; fi
# A clone's token is its own: the gold snapshot's token does not open it.
if [ -s "$VMM_STATE_DIR/l1/token" ] && [ "$(cat "$VMM_STATE_DIR/l1/token")" != e2e-token ] &&
	! timeout 60 "$vmm" exec --token e2e-token l1 -- true > /dev/null 2>&1; then
	ok "lifecycle: a clone has a token of its own (the snapshot's is refused)"
else bad "lifecycle: clone token: $(cat "$VMM_STATE_DIR/l1/token" 2>&1)"; fi
"$vmm" pause l1 && [ "$(lsline l1)" = paused ] && "$vmm" resume l1 && [ "$(lsline l1)" = running ] &&
	ok "lifecycle: pause / resume" || bad "lifecycle: pause/resume: $("$vmm" ls)"
if timeout 120 "$vmm" snapshot l1 "$tmp/l1snap" > /dev/null && timeout 300 "$vmm" restore -d "$tmp/l1snap" --name l2 > /dev/null &&
	[ "$(run_in l2 cat /root/l.txt)" = lifecycle-data ]; then
	ok "lifecycle: snapshot, restore under a new name (the file came along)"
else bad "lifecycle: snapshot/restore under a new name"; fi
# The console's shell (interactive: it ignores SIGTERM) gets a hang-up,
# so it is not among the processes killed after 3 s.
shell_ps=$(run_in l1 ps | grep -c -- ' -sh$')
if timeout 120 "$vmm" stop l1 > /dev/null && [ "$(lsline l1)" = exited ] &&
	"$vmm" inspect l1 | grep -q '"exit_status":0'; then
	ok "lifecycle: stop through the guest; ls and inspect show it exited (0)"
else bad "lifecycle: stop: $("$vmm" ls) $("$vmm" inspect l1)"; fi
if [ "$shell_ps" = 1 ] && ! "$vmm" logs l1 | grep -q "still running 3 s after SIGTERM"; then
	ok "lifecycle: stop: the console's shell ends on its hang-up, nothing left to kill"
else bad "lifecycle: stop with the console shell (shells seen: $shell_ps): $("$vmm" logs l1 | tail -3)"; fi
"$vmm" logs l1 | grep -q "powering off" && ok "lifecycle: logs shows the console" || bad "lifecycle: logs"
"$vmm" rm l2 > /dev/null 2>&1 && bad "lifecycle: rm of a running sandbox was not refused" ||
	ok "lifecycle: rm refuses a running sandbox"
"$vmm" rm l1 > /dev/null && [ -z "$(lsline l1)" ] && [ ! -e "$VMM_STATE_DIR/l1" ] &&
	ok "lifecycle: rm removes it and its folder" || bad "lifecycle: rm l1"
kill -9 "$(cat "$VMM_STATE_DIR/l2/pid")"
sleep 1
[ "$(lsline l2)" = dead ] && ok "lifecycle: a VMM killed with SIGKILL shows as dead" || bad "lifecycle: killed: $("$vmm" ls)"
if timeout 300 "$vmm" run --name l2 --kernel "$kernel" -- true > /dev/null 2> "$tmp/l2.err"; then
	bad "lifecycle: the dead sandbox's name was reused"
else grep -q "VMM gone" "$tmp/l2.err" && ok "lifecycle: a dead sandbox's name is not silently reused" ||
	bad "lifecycle: reuse of a dead name: $(cat "$tmp/l2.err")"; fi
timeout 300 "$vmm" restore -d "$tmp/gold" --name l3 --ttl 5s > /dev/null
left=$("$vmm" ls | awk '$1 == "l3" {print $NF}')
[ -n "$left" ] && [ "$left" != - ] && ok "lifecycle: ls shows the time left ($left)" || bad "lifecycle: ttl in ls: $("$vmm" ls)"
sleep 8
[ -z "$(lsline l3)" ] && [ ! -e "$VMM_STATE_DIR/l3" ] && ok "lifecycle: --ttl stopped and removed the sandbox" ||
	bad "lifecycle: ttl: $("$vmm" ls)"
[ "$("$vmm" prune)" = l2 ] && [ -z "$("$vmm" ls | tail -n +2)" ] && ok "lifecycle: prune removes the dead one" ||
	bad "lifecycle: prune: $("$vmm" ls)"
# A published port: a page from a server in the guest to curl on the host;
# a guest port nobody listens on closes the client's connection at once.
port=$((20000 + RANDOM % 20000))
if timeout 300 "$vmm" restore -d "$tmp/gold" --name l4 --publish "127.0.0.1:$port:8000" --publish "$((port + 1)):8001" > /dev/null &&
	run_in l4 sh -c 'mkdir -p /root/www && echo page-from-the-guest > /root/www/index.html && busybox httpd -p 8000 -h /root/www'; then
	got=$(curl -s -m 60 "http://127.0.0.1:$port/")
	[ "$got" = page-from-the-guest ] && ok "publish: curl on the host gets the guest's page through --publish" ||
		bad "publish: curl got '$got'"
	start=$(date +%s)
	curl -s -m 60 "http://127.0.0.1:$((port + 1))/" > /dev/null
	st=$?
	[ "$st" != 0 ] && [ $(( $(date +%s) - start )) -lt 30 ] && ok "publish: a guest port nobody listens on closes the connection (curl $st), no hang" ||
		bad "publish: unused guest port: curl $st after $(( $(date +%s) - start )) s"
	"$vmm" ls | grep -q "127.0.0.1:$port:8000" && ok "publish: ls shows the ports" || bad "publish: ls: $("$vmm" ls)"
else bad "publish: l4 did not start"; fi
"$vmm" rm -f l4 > /dev/null
unset VMM_STATE_DIR
