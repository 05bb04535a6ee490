#!/usr/bin/env bash
# The E2B tier's VM part: `vmm e2b serve` starting real sandboxes from the
# base image (built here, warmed: Sandbox.create restores its snapshot),
# driven by the official SDK (tests/e2b/sdk_test.mjs vm): create, commands,
# files, watch, setTimeout, list, pause then connect, a second sandbox,
# kill. Then the figure beside it: `vmm run -d --image base` + `vmm exec`
# to the first output, in the same run. Where there is no /dev/kvm, make
# runs it in the QEMU TCG VM (tests/vmhost): its figures are the harness's.
#   vm.sh VMM [BUSYBOX]
# Prints ok/FAIL lines and "e2b-vm: N passed, M failed".
set -u
vmm=$(realpath "$1")
busybox=${2:-/bin/busybox}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
ok=0 fail=0
res() { if [ "$1" = 0 ]; then echo "ok   $2"; ok=$((ok + 1)); else echo "FAIL $2${3:+: $3}"; fail=$((fail + 1)); fi; }
export VMM_STATE_DIR=$tmp/state VMM_IMAGE_DIR=$tmp/images
gw=
cleanup() {
	[ -n "$gw" ] && kill "$gw" 2> /dev/null
	for n in $("$vmm" ls -q 2> /dev/null); do "$vmm" rm -f "$n" > /dev/null 2>&1; done
	wait 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "skip all: /dev/kvm is not usable on this host"
	echo "e2b-vm: 0 passed, 0 failed"
	exit 0
fi
if ! sdk=$("$here/sdk.sh"); then
	echo "FAIL the E2B SDK is not installed (tests/e2b/sdk.sh)"
	exit 1
fi
now_ms() { date +%s%3N; }
t=$(now_ms)
timeout 600 "$vmm" image build base --busybox "$busybox" -q > /dev/null 2> "$tmp/build.err" &&
	timeout 900 "$vmm" image warm base > /dev/null 2> "$tmp/warm.err"
res $? "the base image, built and warmed ($(( $(now_ms) - t )) ms)" "$(tail -n 3 "$tmp/build.err" "$tmp/warm.err")"
# The same start through the CLI from the same warm image, before the
# SDK's and after it (the first start after the warm is the slower one).
cli_figure() {
	local t n=cli-fig-$1
	t=$(now_ms)
	if "$vmm" run -d --name "$n" --image base > /dev/null 2> "$tmp/run.err" &&
		[ "$("$vmm" exec "$n" -- echo first)" = first ]; then
		echo "figure: vmm run -d --image base + vmm exec to the first output ($1): $(( $(now_ms) - t )) ms"
		res 0 "vmm run -d + vmm exec beside it ($1)"
	else
		res 1 "vmm run -d + vmm exec beside it ($1)" "$(tail -n 3 "$tmp/run.err")"
	fi
	"$vmm" rm -f "$n" > /dev/null 2>&1
}
cli_figure before
key=$("$vmm" e2b key create)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# --run-arg: an option each vmm run -d gets (--ttl: one a warm restore honours)
VMM_LOG=debug "$vmm" e2b serve --listen "127.0.0.1:$port" --run-arg=--ttl=3h > "$tmp/gw.log" 2>&1 &
gw=$!
for _ in $(seq 100); do grep -q "serving the E2B API" "$tmp/gw.log" && break; sleep 0.1; done
url=http://127.0.0.1:$port
E2B_API_URL=$url E2B_SANDBOX_URL=$url E2B_API_KEY=$key E2B_SDK_DIR=$sdk timeout 1500 \
	node "$here/sdk_test.mjs" vm | tee "$tmp/sdk.out"
sok=$(sed -n 's/^  sdk: \([0-9]*\) ok, \([0-9]*\) failed$/\1/p' "$tmp/sdk.out")
sfail=$(sed -n 's/^  sdk: \([0-9]*\) ok, \([0-9]*\) failed$/\2/p' "$tmp/sdk.out")
ok=$((ok + ${sok:-0}))
fail=$((fail + ${sfail:-1}))
cli_figure after
# a create with curl: the gateway's --run-arg reached vmm run (its TTL),
# and DELETE removes it
id=$(curl -s -X POST -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"templateID":"base","timeout":60}' \
	"$url/v2/sandboxes" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sandboxID"])' 2> /dev/null)
ttl=$("$vmm" inspect "$id" 2> /dev/null | python3 -c 'import json,sys,time; d=json.load(sys.stdin); d=d[0] if isinstance(d,list) else d; print(int(d["expires"]-time.time()))' 2> /dev/null)
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "X-API-KEY: $key" "$url/sandboxes/$id")
res $([ -n "$id" ] && [ "${ttl:-0}" -gt 10000 ] && [ "${ttl:-0}" -le 10800 ] && [ "$code" = 204 ] &&
	! "$vmm" inspect "$id" > /dev/null 2>&1; echo $?) "--run-arg reaches each vmm run -d (--ttl 3h); DELETE removes the sandbox" \
	"id=$id ttl=$ttl delete=$code"
# the gateway's side of each create (vmm run -d, then the record)
sed -n 's/^.*debug: e2b: \(i[a-z0-9]*\): created in \([0-9]*\) ms$/figure: the gateway created \1 in \2 ms/p' "$tmp/gw.log"
# What a failure leaves to go on, in lines CI's summary keeps
# (tests/run-tiers.sh): the machine's memory and /tmp (the sandboxes'
# folders; in the harness a tmpfs), any process the kernel's OOM killer
# took, the gateway's errors and time-outs, and each sandbox's last log
# lines.
diagnose() {
	echo "diagnosis: memory: $(free -m | awk 'NR == 2 { print $3 " MiB used, " $7 " available of " $2 }');" \
		"/tmp: $(df -m --output=used,size /tmp | awk 'NR == 2 { print $1 " of " $2 " MiB used" }')"
	dmesg 2> /dev/null | grep -iE 'out of memory|oom-kill|killed process|segfault|general protection' | tail -5 |
		sed 's/^/diagnosis: kernel: /'
	grep -iE 'error|warn|fail|timed out' "$tmp/gw.log" | tail -8 | cut -c1-180 | sed 's/^/diagnosis: gateway: /'
	for d in "$VMM_STATE_DIR"/*/; do
		[ -f "$d/vmm.log" ] || continue
		tail -3 "$d/vmm.log" | cut -c1-160 | sed "s|^|diagnosis: $(basename "$d"): |"
	done
}
[ "$fail" = 0 ] || { echo "--- gateway log"; tail -30 "$tmp/gw.log"; diagnose; }
echo "e2b-vm: $ok passed, $fail failed"
[ "$fail" = 0 ]
