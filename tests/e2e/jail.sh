# Sourced by run.sh after snapshot.sh (uses $tmp/gold, its ok/bad, $vmm):
# a jailed sandbox (vmm restore --jail, root only) works end to end: exec,
# cp both ways, snapshot to a host folder, a jailed restore of that
# snapshot; from inside it the host's files and network are not there.
if [ "$(id -u)" != 0 ] || ! unshare -m -n true 2> /dev/null; then
	echo "skip jail: needs root and mount/network namespaces"
else
export VMM_STATE_DIR=$tmp/jstate
if timeout 300 "$vmm" restore -d "$tmp/gold" --name j1 --jail --limit-mem 1G --limit-pids 256 > /dev/null 2> "$tmp/j1.err" &&
	[ "$(run_in j1 echo in-jail)" = in-jail ]; then
	ok "jail: restore --jail; vmm exec answers"
else bad "jail: restore --jail: $(tail -2 "$tmp/j1.err")"; fi
jpid=$(cat "$VMM_STATE_DIR/j1/pid" 2> /dev/null)
if [ -n "$jpid" ] && grep -q "^CapEff:[[:space:]]*0000000000000000" /proc/$jpid/status &&
	[ ! -e /proc/$jpid/root/etc/passwd ] && [ "$(readlink /proc/$jpid/ns/net)" != "$(readlink /proc/self/ns/net)" ]; then
	ok "jail: the jailed VMM has no capabilities, no host files, its own network namespace"
else bad "jail: VMM $jpid: $(grep Cap /proc/$jpid/status 2>&1 | head -2)"; fi
echo jailed-data > "$tmp/j.txt"
if timeout 60 "$vmm" cp "$tmp/j.txt" j1:/root/j.txt && timeout 60 "$vmm" cp j1:/root/j.txt "$tmp/j2.txt" &&
	[ "$(cat "$tmp/j2.txt")" = jailed-data ]; then
	ok "jail: vmm cp both ways"
else bad "jail: vmm cp"; fi
if timeout 120 "$vmm" snapshot j1 "$tmp/jsnap" > /dev/null && [ -s "$tmp/jsnap/state" ] &&
	[ "$(run_cmd timeout 300 "$vmm" restore "$tmp/jsnap" --jail -- cat /root/j.txt 2> "$tmp/j3.err")" = jailed-data ]; then
	ok "jail: snapshot to a host folder, a jailed restore of it has the file"
else bad "jail: snapshot/restore: $(tail -2 "$tmp/j3.err" 2>&1)"; fi
timeout 60 "$vmm" exec j1 -- sh -c 'vmmctl poweroff 2>/dev/null || poweroff -f' > /dev/null 2>&1
sleep 2
"$vmm" rm -f j1 > /dev/null 2>&1
[ -z "$(ls "$VMM_STATE_DIR")" ] && ok "jail: sandbox folders removed after exit" ||
	bad "jail: left in the state directory: $(ls "$VMM_STATE_DIR")"
unset VMM_STATE_DIR
fi
