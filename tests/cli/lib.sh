# Sourced by the tests/cli scripts: a scratch directory ($tmp), background
# processes to kill at exit ($pids), and the ok/bad/skipped counters.
tmp=$(mktemp -d)
pids=()
cleanup() {
	local p
	# and each one's process group: a host guest-init --serve-unix started
	# with setsid leads one, and its forked helpers outlive a kill of it
	# alone (orphans that held a caller's flock after the tier ended)
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null; kill -- "-$p" 2> /dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$tmp/err" ] && sed 's/^/     | /' "$tmp/err" | tail -5; }
skipped() { skip=$((skip + 1)); echo "skip $1"; }

# run STATUS ARGS...: vmm ARGS ($vmm, stdin /dev/null, at most RUN_TIMEOUT
# s, 20 unless set), its output in $tmp/out and $tmp/err; 0 if it exited
# with STATUS, else says how it did.
run() {
	local want=$1 got
	shift
	timeout "${RUN_TIMEOUT:-20}" "$vmm" "$@" < /dev/null > "$tmp/out" 2> "$tmp/err"
	got=$?
	[ "$got" = "$want" ] && return 0
	echo "     vmm $*: exit status $got, expected $want"
	return 1
}
# need_image_tools NAME: the image builds' tools (root, debugfs and
# mkfs.ext4), or the script ends here, its counts said as NAME's skip.
need_image_tools() {
	[ "$(id -u)" = 0 ] && command -v debugfs > /dev/null && command -v mkfs.ext4 > /dev/null && return 0
	echo "skip all: needs root, debugfs and mkfs.ext4"
	echo "$1: 0 passed, 0 failed, 1 skipped"
	exit 0
}
# cli_state: a fresh VMM_STATE_DIR of the test's, and no KVM device.
cli_state() {
	export VMM_STATE_DIR=$tmp/state
	mkdir -m 700 "$VMM_STATE_DIR"
	export VMM_KVM_DEVICE=$tmp/no-kvm
}
