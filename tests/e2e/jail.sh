# Sourced by run.sh after snapshot.sh (uses $tmp/gold, its ok/bad, $vmm):
# a jailed sandbox (vmm restore --jail, root only) works end to end: exec,
# cp both ways, snapshot to a host folder, a jailed restore of that
# snapshot; from inside it the host's files and network are not there.
# Then a VMM jailed as root (--jail-uid 0) serving a share.
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

# --jail-uid 0 (how vmm oci runs its VMs): the jailed VMM stays root with a
# file server's capabilities only, so a share's files keep their owners:
# the guest's root reads a file of another uid that only it may read
# (CAP_DAC_OVERRIDE), changes its mode (CAP_FOWNER) and owner
# (CAP_CHOWN), and what it creates is root's; yet the VMM cannot write
# the records in its folder, and holds no other capability.
mkdir -p "$tmp/jfs"
echo only-1234 > "$tmp/jfs/other"
chown 1234:1234 "$tmp/jfs/other" && chmod 600 "$tmp/jfs/other"
if timeout 300 "$vmm" run -d --name j0 --jail --jail-uid 0 --kernel "$kernel" --initrd "$initrd" --mem 256 \
	--fs "tag=jfs,path=$tmp/jfs" > /dev/null 2> "$tmp/j0.err" &&
	[ "$(run_in j0 cat /mnt/jfs/other)" = only-1234 ] &&
	run_in j0 sh -c 'chmod 640 /mnt/jfs/other && chown 0:0 /mnt/jfs/other && echo new > /mnt/jfs/made' > /dev/null &&
	[ "$(stat -c %u:%g:%a "$tmp/jfs/other")" = 0:0:640 ] && [ "$(stat -c %u:%g "$tmp/jfs/made")" = 0:0 ]; then
	ok "jail uid 0: the guest's root reads another uid's 0600 file, chmods and chowns it; new files are root's"
else bad "jail uid 0: $(tail -2 "$tmp/j0.err") $(stat -c %u:%g:%a "$tmp/jfs/other" 2>&1)"; fi
j0=$(cat "$VMM_STATE_DIR/j0/pid" 2> /dev/null)
if [ -n "$j0" ] && grep -q "^CapEff:[[:space:]]*000000000000001f" /proc/$j0/status &&
	grep -q "^CapBnd:[[:space:]]*000000000000001f" /proc/$j0/status &&
	[ ! -e /proc/$j0/root/etc/passwd ] && [ ! -e /proc/$j0/root/proc/sys ] &&
	awk -v d="$VMM_STATE_DIR/j0" '$5 == d' /proc/$j0/mountinfo | tail -1 | grep -q " ro,"; then
	ok "jail uid 0: CapEff/CapBnd 0x1f, no host files, no /proc/sys, its folder read-only to it"
else bad "jail uid 0: VMM $j0: $(grep -E 'CapEff|CapBnd' /proc/$j0/status 2>&1 | tr '\n' ' ')"; fi
"$vmm" rm -f j0 > /dev/null 2>&1
sleep 1
[ -z "$(ls "$VMM_STATE_DIR")" ] && ok "jail uid 0: its folder removed after rm" ||
	bad "jail uid 0: left in the state directory: $(ls "$VMM_STATE_DIR")"
unset VMM_STATE_DIR
fi
