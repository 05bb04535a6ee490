# Sourced by run.sh after snapshot.sh (uses $tmp/gold, ok/bad, ready,
# stop_sandbox, $vmm): the Firecracker-compatible API on a Linux guest,
# without a boot: `vmm --api-sock` loads the gold snapshot with PUT
# /snapshot/load and the guest answers; pause, snapshot and resume over
# HTTP, a second VMM loads that snapshot, bad input leaves it running;
# then two VMs booted through it carry the balloon and entropy devices
# (tests/e2e/fc_devices.sh).
export VMM_STATE_DIR=$tmp/fcstate

# fc SOCK METHOD PATH [BODY]: prints the body, then the status on its own line.
fc() {
	if [ $# -gt 3 ]; then
		curl -s --max-time 120 --unix-socket "$1" -X "$2" "http://localhost$3" \
			-H 'Content-Type: application/json' -d "$4" -w '\n%{http_code}\n'
	else
		curl -s --max-time 120 --unix-socket "$1" -X "$2" "http://localhost$3" -w '\n%{http_code}\n'
	fi
}
fc_start() { # fc_start NAME: a VMM with no VM, serving $tmp/NAME.sock
	timeout 600 "$vmm" --api-sock "$tmp/$1.sock" --id "$1" --console "file:$tmp/$1.console" \
		< /dev/null > /dev/null 2> "$tmp/$1.err" &
	fc_pids="$fc_pids $!"
	for _ in $(seq 100); do [ -S "$tmp/$1.sock" ] && break; sleep 0.1; done
}
fc_pids=

fc_start fca
s=$tmp/fca.sock
out=$(fc "$s" PUT /snapshot/load "{\"snapshot_path\": \"$tmp/gold\", \"resume_vm\": true,
	\"mem_backend\": {\"backend_type\": \"File\", \"backend_path\": \"$tmp/gold/memory\"}}")
if [ "$(echo "$out" | tail -1)" = 204 ] && ready fca && [ "$(run_in fca echo fc-hello)" = fc-hello ]; then
	ok "fc-api: vmm --api-sock, PUT /snapshot/load of the gold snapshot: the Linux guest answers"
else bad "fc-api: load: $out $(tail -3 "$tmp/fca.err")"; fi
run_in fca sh -c 'echo fc-data > /root/fc.txt; sync'
out=$(fc "$s" PUT /machine-config '{"vcpu_count": 1,' ; fc "$s" PUT /boot-source '{"kernel_image_path": "/x"}';
      fc "$s" GET /nope; fc "$s" PATCH /vm '{"state": "Frozen"}')
if [ "$(echo "$out" | grep -c '^400$')" = 4 ] && [ "$(run_in fca cat /root/fc.txt)" = fc-data ]; then
	ok "fc-api: bad JSON, config after start, unknown path, bad state value: 400 each; the guest runs on"
else bad "fc-api: bad input: $out"; fi
if [ "$(fc "$s" PATCH /vm '{"state": "Paused"}' | tail -1)" = 204 ] && fc "$s" GET / | grep -q '"state":"Paused"' &&
	[ "$(fc "$s" PUT /snapshot/create "{\"snapshot_path\": \"$tmp/fcsnap\", \"mem_file_path\": \"$tmp/fcsnap.mem\"}" | tail -1)" = 204 ] &&
	[ "$(fc "$s" PATCH /vm '{"state": "Resumed"}' | tail -1)" = 204 ] &&
	[ "$(run_in fca echo again)" = again ]; then
	ok "fc-api: PATCH /vm Paused, PUT /snapshot/create, PATCH /vm Resumed: the guest answers again"
else bad "fc-api: pause/snapshot/resume: $(fc "$s" GET /) $(tail -3 "$tmp/fca.err")"; fi
fc_start fcb
out=$(fc "$tmp/fcb.sock" PUT /snapshot/load "{\"snapshot_path\": \"$tmp/fcsnap\", \"mem_file_path\": \"$tmp/fcsnap.mem\", \"resume_vm\": true}")
if [ "$(echo "$out" | tail -1)" = 204 ] && ready fcb && [ "$(run_in fcb cat /root/fc.txt)" = fc-data ]; then
	ok "fc-api: a second vmm --api-sock loads that snapshot: the file written before it is there"
else bad "fc-api: second load: $out $(tail -3 "$tmp/fcb.err")"; fi
# SendCtrlAltDel: a clean shutdown through the guest (guest-init powers off).
fcb_pid=$(echo $fc_pids | awk '{print $2}')
if [ "$(fc "$tmp/fcb.sock" PUT /actions '{"action_type": "SendCtrlAltDel"}' | tail -1)" = 204 ]; then
	for _ in $(seq 600); do kill -0 "$fcb_pid" 2>/dev/null || break; sleep 0.1; done
	if ! kill -0 "$fcb_pid" 2>/dev/null && wait "$fcb_pid"; then
		ok "fc-api: PUT /actions SendCtrlAltDel: the guest shuts down cleanly, the VMM exits with 0"
	else bad "fc-api: SendCtrlAltDel: the VMM still runs or failed: $(tail -3 "$tmp/fcb.err")"; fi
	# Firecracker's path: the default guest kernel drives the i8042, so
	# the keys reach it (not the fallback through guest-init).
	if ! grep -q "asking guest-init" "$tmp/fcb.err"; then
		ok "fc-api: SendCtrlAltDel went through the guest's i8042 keyboard driver"
	else bad "fc-api: SendCtrlAltDel fell back to guest-init: $(grep -m1 SendCtrlAltDel "$tmp/fcb.err")"; fi
else bad "fc-api: SendCtrlAltDel refused"; fi
stop_sandbox fca
stop_sandbox fcb
# The balloon and entropy devices, on VMs booted through this API.
. "$(dirname "${BASH_SOURCE[0]}")/fc_devices.sh"
# shellcheck disable=SC2086
wait $fc_pids
