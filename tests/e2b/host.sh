#!/usr/bin/env bash
# The E2B tier's part that needs no VM: `vmm e2b serve` in front of the
# host build of guest-init (tests/api/host.sh's sandbox folder: its vsock
# socket is guest-init --serve-unix's), checked with curl against
# openapi.yml's schemas and E2B's error answers, then the official SDK's
# commands, files and control calls (tests/e2b/sdk_test.mjs host).
#   host.sh VMM GUEST_INIT
# Prints ok/FAIL lines and "e2b-host: N passed, M failed".
set -u
vmm=$(realpath "$1")
gi=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
specs=${VMM_SPECS:-$here/../../../shared/specs}
tmp=$(mktemp -d)
ok=0 fail=0
res() { if [ "$1" = 0 ]; then echo "ok   $2"; ok=$((ok + 1)); else echo "FAIL $2${3:+: $3}"; fail=$((fail + 1)); fi; }
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -- -"$p" 2> /dev/null; kill "$p" 2> /dev/null; done
	wait 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
export VMM_STATE_DIR=$tmp/state VMM_API_PORT=0
mkdir -m 700 "$tmp/state" "$tmp/state/e2b-host" "$tmp/work"
VMM_API_TOKEN=host-e2b-token setsid "$gi" --serve-unix "$tmp/api.sock" > "$tmp/gi.log" 2>&1 &
gipid=$!
pids+=("$gipid")
disown "$gipid" # the reaper kills it (the timeout check): no "Killed" line
for _ in $(seq 50); do [ -S "$tmp/api.sock" ] && break; sleep 0.1; done
sb=$tmp/state/e2b-host
ln -s "$tmp/api.sock" "$sb/vsock.sock"
( umask 077; printf host-e2b-token > "$sb/token" )
st=$(sed 's/^.*) //' "/proc/$gipid/stat" | cut -d' ' -f20)
read -r dev ino < <(stat -L -c '%d %i' "/proc/$gipid/exe")
echo "$gipid $st $dev $ino" > "$sb/process"
# The record `vmm e2b serve` keeps of a sandbox it started, with an envd
# access token `vmm token` makes (the scopes the gateway's have).
tok=$("$vmm" token create e2b-host --scope exec,files:read,files:write,processes)
now=$(date +%s)
printf '{"templateID":"base","startedAt":%s,"endAt":%s,"autoPause":false,"token":"%s","metadata":{"k":"v"},"envVars":{"SBX_ENV":"from-create"}}' \
	"$now" $((now + 3600)) "$tok" > "$sb/e2b.json"
key=$("$vmm" e2b key create)
res $? "vmm e2b key create"
[ "$(stat -c %a "$tmp/state/.e2b")" = 700 ] && [ "$(stat -c %a "$tmp/state/.e2b/tokens")" = 600 ]
res $? "the keys are owner-only (.e2b 0700, its tokens 0600)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
setsid "$vmm" e2b serve --listen "127.0.0.1:$port" > "$tmp/gw.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do grep -q "serving the E2B API" "$tmp/gw.log" && break; sleep 0.1; done
url=http://127.0.0.1:$port
export E2B_API_URL=$url E2B_SANDBOX_URL=$url E2B_API_KEY=$key
# ---- curl: keys, errors, schemas ----
code=$(curl -s -o "$tmp/out" -w '%{http_code}' "$url/v2/sandboxes")
[ "$code" = 401 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["code"]==401 and d["message"]' "$tmp/out"
res $? "no API key: 401 with E2B's Error body" "$code $(cat "$tmp/out")"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: vmt_x_y" "$url/v2/sandboxes")
res $([ "$code" = 401 ]; echo $?) "a wrong API key: 401" "$code"
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -H "X-API-KEY: $key" "$url/sandboxes/nope")
res $([ "$code" = 404 ]; echo $?) "a missing sandbox: 404" "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $key" -H "E2b-Sandbox-Id: e2b-host" "$url/files?path=/etc/hostname")
res $([ "$code" = 401 ]; echo $?) "envd without X-Access-Token: 401" "$code"
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" "$url/files?path=$tmp/nothing")
res $([ "$code" = 404 ]; echo $?) "envd: a missing file is 404" "$code"
# a chunked upload (Transfer-Encoding: chunked, as a streamed body comes)
printf 'chunked body' | curl -s -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' --data-binary @- \
	"$url/files?path=$tmp/work/chunked.txt" > "$tmp/code"
[ "$(cat "$tmp/code")" = 200 ] && [ "$(cat "$tmp/work/chunked.txt")" = "chunked body" ]
res $? "envd: a chunked upload" "$(cat "$tmp/code") $(cat "$tmp/out")"
rm -f "$tmp/work/chunked.txt"
# Connect: a unary error's status and body, an unsupported binary call
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Content-Type: application/json' -d "{\"path\":\"$tmp/nothing\"}" "$url/filesystem.Filesystem/Stat")
[ "$code" = 404 ] && grep -q '"code":"not_found"' "$tmp/out"
res $? "Connect: Stat of a missing path is not_found (404)" "$code $(cat "$tmp/out")"
# binary protobuf (the Python SDK's codec): StatRequest{path=1} by hand
printf '\x0a\x0b/etc/passwd' > "$tmp/stat.bin"
code=$(curl -s -o "$tmp/out" -w '%{http_code} %{content_type}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Content-Type: application/proto' --data-binary @"$tmp/stat.bin" "$url/filesystem.Filesystem/Stat")
[ "$code" = "200 application/proto" ] && head -c 8 "$tmp/out" | od -An -c | tr -d ' \n' | grep -q '^\\n'
res $? "Connect binary: Stat answers a binary StatResponse" "$code"
printf '\x0a\x08/nothing' > "$tmp/stat.bin"
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Content-Type: application/proto' --data-binary @"$tmp/stat.bin" "$url/filesystem.Filesystem/Stat")
[ "$code" = 404 ] && grep -q '"code":"not_found"' "$tmp/out"
res $? "Connect binary: an error is JSON with its status (not_found, 404)" "$code $(cat "$tmp/out")"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Content-Type: application/xml' --data-binary x "$url/filesystem.Filesystem/Stat")
res $([ "$code" = 415 ]; echo $?) "Connect: another codec is refused (415)" "$code"
# polled watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher: the
# Python SDK's synchronous watch_dir)
mkdir "$tmp/wdir"
rpc() { curl -s -o "$tmp/out" -w '%{http_code}' -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Content-Type: application/json' -d "$2" "$url/filesystem.Filesystem/$1"; }
code=$(rpc CreateWatcher "{\"path\":\"$tmp/wdir\"}")
wid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["watcherId"])' "$tmp/out" 2> /dev/null)
res $([ "$code" = 200 ] && [ -n "$wid" ]; echo $?) "CreateWatcher: an ID" "$code $(cat "$tmp/out")"
printf x | curl -s -o /dev/null -H "E2b-Sandbox-Id: e2b-host" -H "X-Access-Token: $tok" \
	-H 'Content-Type: application/octet-stream' --data-binary @- "$url/files?path=$tmp/wdir/polled.txt"
for _ in $(seq 50); do
	rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}" > "$tmp/code"
	cat "$tmp/out" >> "$tmp/events"
	grep -q polled.txt "$tmp/out" && break
	sleep 0.1
done
grep -q '"name":"polled.txt","type":"EVENT_TYPE_WRITE"' "$tmp/events"
res $? "GetWatcherEvents: the write" "$(cat "$tmp/events")"
rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}" > /dev/null
grep -q '^{"events":\[\]}$' "$tmp/out"
res $? "GetWatcherEvents: emptied by the poll" "$(cat "$tmp/out")"
code=$(rpc RemoveWatcher "{\"watcherId\":\"$wid\"}")
code2=$(rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}")
res $([ "$code" = 200 ] && [ "$code2" = 404 ]; echo $?) "RemoveWatcher: then it is gone (404)" "$code $code2"
# schemas: the answers against openapi.yml
curl -s -H "X-API-KEY: $key" "$url/v2/sandboxes" > "$tmp/list.json"
curl -s -H "X-API-KEY: $key" "$url/sandboxes/e2b-host" > "$tmp/detail.json"
curl -s -X POST -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"timeout":300}' \
	"$url/v2/sandboxes/e2b-host/connect" > "$tmp/connect.json"
curl -s -H "X-API-KEY: $key" "$url/sandboxes/nope" > "$tmp/error.json"
if [ -f "$specs/e2b/openapi.yml" ]; then
	python3 "$here/schema_check.py" "$specs/e2b/openapi.yml" \
		"$tmp/list.json:array:ListedSandbox" "$tmp/detail.json:SandboxDetail" \
		"$tmp/connect.json:Sandbox" "$tmp/error.json:Error"
	res $? "the control plane's answers match openapi.yml (ListedSandbox, SandboxDetail, Sandbox, Error)"
else
	echo "skip schema checks: no $specs/e2b/openapi.yml (set VMM_SPECS)"
fi
# ---- the SDK ----
# the SDK as it is (Connect's JSON), then with its transport on binary
# protobuf (E2B_TEST_BINARY: the Python SDK's codec)
if sdk=$("$here/sdk.sh"); then
	for codec in json binary; do
		echo "--- the SDK, Connect $codec"
		rm -rf "$tmp/work" && mkdir "$tmp/work"
		E2B_TEST_BINARY=$([ $codec = binary ] && echo 1) E2B_SDK_DIR=$sdk timeout 300 \
			node "$here/sdk_test.mjs" host e2b-host "$tmp/work" | tee "$tmp/sdk.out"
		sok=$(sed -n 's/^  sdk: \([0-9]*\) ok, \([0-9]*\) failed$/\1/p' "$tmp/sdk.out")
		sfail=$(sed -n 's/^  sdk: \([0-9]*\) ok, \([0-9]*\) failed$/\2/p' "$tmp/sdk.out")
		ok=$((ok + ${sok:-0}))
		fail=$((fail + ${sfail:-1}))
	done
else
	echo "FAIL the E2B SDK could not be installed (tests/e2b/sdk.sh)"
	fail=$((fail + 1))
fi
# the timeout: once its end has passed, the gateway's reaper kills the
# sandbox (here: its stand-in VMM, this guest-init) and removes it
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-API-KEY: $key" -H 'Content-Type: application/json' \
	-d '{"timeout":1}' "$url/sandboxes/e2b-host/timeout")
gone=1
for _ in $(seq 50); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $key" "$url/sandboxes/e2b-host")" = 404 ] &&
		[ ! -e "$sb" ] && { gone=0; break; }
	sleep 0.2
done
res $([ "$code" = 204 ] && [ $gone = 0 ]; echo $?) "the timeout: the sandbox is killed and removed past its end" "$code"
[ "$fail" = 0 ] || { echo "--- gateway log"; tail -20 "$tmp/gw.log"; }
echo "e2b-host: $ok passed, $fail failed"
[ "$fail" = 0 ]
