# Sourced by the tests/cli scripts: a scratch directory ($tmp), background
# processes to kill at exit ($pids), and the ok/bad/skipped counters.
tmp=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$tmp/err" ] && sed 's/^/     | /' "$tmp/err" | tail -5; }
skipped() { skip=$((skip + 1)); echo "skip $1"; }
