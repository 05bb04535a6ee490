#!/usr/bin/env bash
# The egress proxy end to end (docs/egress.md). Sourced by run.sh after
# lifecycle.sh (uses its ok/bad, $vmm, $tmp and the gold snapshot
# $tmp/gold), or run alone (one boot for a gold snapshot of its own, or
# EGRESS_GOLD=DIR to reuse one):
#   [VMM_E2E_EGRESS_IMAGE=IMG] tests/e2e/egress.sh VMM KERNEL ROOTFS
# IMG: the Debian image with the real HTTPS clients (egress_clients.sh),
# made by tests/e2e/debian_image.sh egress PACKAGES VMM IMG on a host with network.
# An HTTPS upstream on loopback with a CA the test makes stands in for the
# API; the sandbox is a clone of the gold snapshot (taken without the
# proxy: restore starts the guest side through the sync op), without a
# network device.
if [ -z "${tmp:-}" ]; then
	set -u
	vmm=$1 kernel=$2 rootfs=$3
	tmp=$(mktemp -d)
	pass=0 fail=0
	trap 'rm -rf "$tmp"' EXIT
	. "$(dirname "$0")/lib.sh"
	egress_alone=1
	if [ -n "${EGRESS_GOLD:-}" ]; then
		ln -s "$EGRESS_GOLD" "$tmp/gold"
	else
		export VMM_STATE_DIR=$tmp/egold
		cp "$rootfs" "$tmp/gold-root.img"
		timeout 1200 "$vmm" run --name gold --kernel "$kernel" --mem 256 --disk "path=$tmp/gold-root.img,root" \
			--token e2e-token --console "file:$tmp/gold.console" < /dev/null 2> "$tmp/gold.err" &
		gold_pid=$!
		for _ in $(seq 1200); do
			grep -q "API ready" "$tmp/gold.console" 2>/dev/null && break
			kill -0 $gold_pid 2>/dev/null || break
			sleep 0.5
		done
		timeout 120 "$vmm" snapshot --stop gold "$tmp/gold" > /dev/null 2>&1 || bad "egress: gold snapshot"
		wait $gold_pid
	fi
fi
export VMM_STATE_DIR=$tmp/estate
ed=$tmp/egress
mkdir -p "$ed"
e2e_dir=${e2e_dir:-$(dirname "$0")}

# ---- a CA, a certificate for the upstream's names, the upstream ------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=vmm e2e CA" \
	-keyout "$ed/ca.key" -out "$ed/ca.pem" > /dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=api.test" -keyout "$ed/up.key" -out "$ed/up.csr" > /dev/null 2>&1
printf 'subjectAltName=DNS:api.test,DNS:slow.test,DNS:untrusted.test,DNS:tunnel.test\n' > "$ed/ext"
openssl x509 -req -in "$ed/up.csr" -CA "$ed/ca.pem" -CAkey "$ed/ca.key" -CAcreateserial -days 2 \
	-extfile "$ed/ext" -out "$ed/up.pem" > /dev/null 2>&1
up_port=$((20000 + RANDOM % 20000))
silent_port=$((up_port + 1))
closed_port=$((up_port + 2))
python3 "$e2e_dir/egress_upstream.py" "$ed/up.pem" "$ed/up.key" "$up_port" "$silent_port" "$ed/upstream.log" \
	> "$ed/upstream.out" 2>&1 &
up_pid=$!
for _ in $(seq 100); do grep -q ready "$ed/upstream.out" 2>/dev/null && break; sleep 0.1; done

# The credential: only in this shell's environment and the VMM's memory.
secret="sk-e2e-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat > "$ed/policy.json" <<EOF
{"allow": [
  {"host": "api.test", "path_prefix": "/v1", "methods": ["GET", "POST"],
   "inject": {"header": "Authorization", "value_env": "E2E_EGRESS_KEY", "prefix": "Bearer "},
   "connect": "127.0.0.1:$up_port", "ca_file": "$ed/ca.pem"},
  {"host": "tunnel.test", "connect": "127.0.0.1:$up_port"},
  {"host": "slow.test", "connect": "127.0.0.1:$silent_port", "ca_file": "$ed/ca.pem", "timeout_ms": 1500},
  {"host": "down.test", "connect": "127.0.0.1:$closed_port", "ca_file": "$ed/ca.pem"},
  {"host": "untrusted.test", "connect": "127.0.0.1:$up_port"}
]}
EOF

ex() { T=120 run_in e1 sh -c "$*" 2>&1; }

# A policy naming a variable that is not set is refused before anything runs.
if E2E_EGRESS_KEY= env -u E2E_EGRESS_KEY timeout 60 "$vmm" restore -d "$tmp/gold" --name e0 \
	--egress-policy "$ed/policy.json" > "$ed/e0.out" 2>&1; then
	bad "egress: a policy whose credential is missing was accepted"
	"$vmm" rm -f e0 > /dev/null 2>&1
else grep -q "E2E_EGRESS_KEY is not set" "$ed/e0.out" && ok "egress: a missing credential is refused at start, by name" ||
	bad "egress: missing credential: $(cat "$ed/e0.out")"; fi

if E2E_EGRESS_KEY=$secret timeout 300 "$vmm" restore -d "$tmp/gold" --name e1 \
	--egress-policy "$ed/policy.json" > "$ed/e1.out" 2>&1; then
	ok "egress: restore -d --egress-policy (a clone of a snapshot taken without it)"
else bad "egress: restore: $(cat "$ed/e1.out")"; fi

# The environment commands get.
env_out=$(ex env)
echo "$env_out" | grep -q "^HTTP_PROXY=http://127.0.0.1:3128$" && echo "$env_out" | grep -q "^no_proxy=\|^NO_PROXY=localhost" &&
	ok "egress: commands get HTTP_PROXY=http://127.0.0.1:3128 and NO_PROXY" || bad "egress: env: $env_out"

# An allowed GET: the credential arrives upstream, the guest's own
# Authorization does not.
got=$(ex "wget -q -O - --header 'Authorization: Bearer guest-fake' http://api.test/v1/models")
[ "$got" = "upstream-ok GET /v1/models" ] && ok "egress: an allowed GET reaches the upstream over TLS" ||
	bad "egress: GET got '$got'"
if python3 - "$ed/upstream.log" "$secret" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
r = [x for x in reqs if x["path"] == "/v1/models"][0]
auth = [v for k, v in r["headers"] if k.lower() == "authorization"]
assert auth == ["Bearer " + sys.argv[2]], auth
host = [v for k, v in r["headers"] if k.lower() == "host"]
assert host == ["api.test"], host
assert not [k for k, v in r["headers"] if k.lower().startswith("proxy-")]
EOF
then ok "egress: the upstream got the credential (once; the guest's Authorization dropped) and Host: api.test"
else bad "egress: upstream headers: $(tail -3 "$ed/upstream.log")"; fi

# Raw requests, all in one exec (each exec costs seconds where guest ring
# 0 is emulated): "== NAME" then the proxy's answer. nc ends when the
# proxy closes (one request per connection); a tunnel stays open, so
# timeout ends that one.
cat > "$ed/probes.sh" <<'PROBES'
probe() { echo "== $1"; printf "$2" | timeout 30 nc 127.0.0.1 3128; echo; }
probe post 'POST http://api.test/v1/chat HTTP/1.1\r\nContent-Length: 10\r\n\r\nhello-body'
probe chunked 'POST http://api.test/v1/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n-world\r\n0\r\n\r\n'
probe path 'GET http://api.test/admin HTTP/1.1\r\n\r\n'
probe method 'DELETE http://api.test/v1/x HTTP/1.1\r\n\r\n'
probe garbage 'this is not http\r\n\r\n'
probe origin 'GET /v1/x HTTP/1.1\r\nHost: api.test\r\n\r\n'
probe down 'GET http://down.test/ HTTP/1.1\r\n\r\n'
probe untrusted 'GET http://untrusted.test/ HTTP/1.1\r\n\r\n'
probe slow 'GET http://slow.test/ HTTP/1.1\r\n\r\n'
echo "== tunnel"; printf 'CONNECT tunnel.test:443 HTTP/1.1\r\n\r\n' | timeout 5 nc 127.0.0.1 3128 | head -c 64; echo
probe connect-evil 'CONNECT evil.test:443 HTTP/1.1\r\n\r\n'
echo "== big"; wget -q -O - http://api.test/v1/big | wc -c
echo "== end"
PROBES
timeout 60 "$vmm" cp "$ed/probes.sh" e1:/root/probes.sh
T=600 run_in e1 sh /root/probes.sh > "$ed/probes.out" 2>&1
answer() { awk -v n="== $1" '$0 == n {on = 1; next} /^== / {on = 0} on' "$ed/probes.out" | tr -d '\r'; }
answer post | grep -q "upstream-ok POST /v1/chat" && grep -q '"body": "hello-body"' "$ed/upstream.log" &&
	ok "egress: a POST body (Content-Length) arrives upstream" || bad "egress: POST: $(answer post)"
answer chunked | grep -q "upstream-ok POST /v1/up" && grep -q '"body": "hello-world"' "$ed/upstream.log" &&
	ok "egress: a chunked request body arrives upstream" || bad "egress: chunked: $(answer chunked)"
answer path | grep -q "^HTTP/1.1 403" && answer path | grep -q "path not allowed" &&
	ok "egress: a disallowed path gets 403 with the reason" || bad "egress: path: $(answer path)"
answer method | grep -q "method not allowed" && ok "egress: a disallowed method gets 403" || bad "egress: method: $(answer method)"
answer garbage | grep -q "^HTTP/1.1 400" && ok "egress: a malformed request gets 400" || bad "egress: malformed: $(answer garbage)"
answer origin | grep -q "^HTTP/1.1 400" && ok "egress: an origin-form request gets 400" || bad "egress: origin-form: $(answer origin)"
answer down | grep -q "^HTTP/1.1 502" && ok "egress: an upstream that refuses gets 502" || bad "egress: refused upstream: $(answer down)"
answer untrusted | grep -q "^HTTP/1.1 502" && answer untrusted | grep -q "not trusted" &&
	ok "egress: an upstream certificate from an unknown CA gets 502 (verified by default)" ||
	bad "egress: untrusted: $(answer untrusted)"
answer slow | grep -q "^HTTP/1.1 504" && ok "egress: an upstream that does not answer gets 504" || bad "egress: slow upstream: $(answer slow)"
answer tunnel | grep -q "^HTTP/1.1 200 Connection established" && ok "egress: CONNECT to an allowed host is tunnelled" ||
	bad "egress: CONNECT: $(answer tunnel)"
answer connect-evil | grep -q "^HTTP/1.1 403" && ok "egress: CONNECT to another host gets 403" ||
	bad "egress: CONNECT evil: $(answer connect-evil)"
[ "$(answer big | tr -d ' ')" = $((256 << 10)) ] && ok "egress: a 256 KiB response comes back whole" ||
	bad "egress: big response: $(answer big) bytes"
# A disallowed host, through the proxy variables.
got=$(ex "wget -q -O - http://evil.test/ 2>&1; echo st=\$?")
echo "$got" | grep -q "403" && ok "egress: a disallowed host gets 403" || bad "egress: disallowed host: $got"
# Several at once.
got=$(T=600 run_in e1 sh -c 'for i in 1 2 3 4 5 6; do wget -q -O - http://api.test/v1/c$i > /tmp/c$i & done; wait; cat /tmp/c* | grep -c upstream-ok' 2>&1)
[ "$got" = 6 ] && ok "egress: 6 concurrent requests all answered" || bad "egress: concurrent: $got"

# The log: one complete JSON line per request, never the credential.
sleep 0.5
if python3 - "$VMM_STATE_DIR/e1/egress.log" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
keys = {"time", "sandbox", "method", "host", "path", "status", "bytes_up", "bytes_down", "duration_ms"}
for l in lines:
    assert keys <= set(l), l
    assert l["sandbox"] == "e1", l
st = {(l["method"], l["host"], l["path"]): l["status"] for l in lines}
assert st[("GET", "api.test", "/v1/models")] == 200, st
assert st[("GET", "evil.test", "/")] == 403, st
assert st[("DELETE", "api.test", "/v1/x")] == 403, st
assert st[("GET", "down.test", "/")] == 502, st
assert st[("GET", "slow.test", "/")] == 504, st
# opened (200), then no ClientHello came before nc hung up: logged 403
assert st[("CONNECT", "tunnel.test", "")] == 403, st
assert any(l["status"] == 400 for l in lines)
post = [l for l in lines if l["path"] == "/v1/chat"][0]
assert post["bytes_up"] == len("hello-body"), post
big = [l for l in lines if l["path"] == "/v1/big"][0]
assert big["bytes_down"] > 256 << 10, big
assert len(lines) >= 19, len(lines)
EOF
then ok "egress: egress.log has a complete JSON line per request ($(wc -l < "$VMM_STATE_DIR/e1/egress.log") lines)"
else bad "egress: egress.log: $(tail -3 "$VMM_STATE_DIR/e1/egress.log")"; fi
"$vmm" logs e1 --egress | grep -q '"host":"evil.test".*"status":403' && ok "egress: vmm logs --egress prints it" ||
	bad "egress: vmm logs --egress: $("$vmm" logs e1 --egress 2>&1 | tail -2)"

# ---- HTTPS: interception with the sandbox's CA (docs/egress.md "HTTPS") ------
# What guest-init installs, here in the busybox image; the real clients
# (curl, Python requests, git) run in a Debian sandbox further down
# (egress_clients.sh).
host_ca=$(sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "$VMM_STATE_DIR/e1/egress-ca.pem")
guest_ca=$(ex "cat /run/vmm-egress-ca.pem")
[ -n "$host_ca" ] && [ "$guest_ca" = "$host_ca" ] && ok "egress: the guest installed its sandbox's CA certificate" ||
	bad "egress: guest CA: '$guest_ca'"
[ "$(stat -c %a "$VMM_STATE_DIR/e1/egress-ca.pem")" = 600 ] && ok "egress: the CA key is kept mode 0600 on the host" ||
	bad "egress: CA file mode $(stat -c %a "$VMM_STATE_DIR/e1/egress-ca.pem")"
env_out=$(ex env)
for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do
	echo "$env_out" | grep -q "^$v=/run/vmm-egress-bundle.pem$" || bad "egress: $v not exported: $env_out"
done
echo "$env_out" | grep -q "^NODE_EXTRA_CA_CERTS=/run/vmm-egress-ca.pem$" &&
	ok "egress: commands get SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, NODE_EXTRA_CA_CERTS" ||
	bad "egress: NODE_EXTRA_CA_CERTS: $env_out"
ex "grep -c 'vmm egress CA (begin)' /etc/ssl/certs/ca-certificates.crt 2>/dev/null || echo none" | grep -qx "1\|none" &&
	ok "egress: the system bundle holds the CA once (or there is none)" || bad "egress: system bundle"
ca_key=$(sed -n '/BEGIN PRIVATE KEY/,/END PRIVATE KEY/p' "$VMM_STATE_DIR/e1/egress-ca.pem" | sed -n 2p)

# The credential never enters the sandbox: not in any process's
# environment or command line, not in its files, not in its folder on the
# host, not in a snapshot of it (memory included).
T=120 run_in e1 sh -c 'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; env' > "$ed/guest-env" 2>/dev/null
T=300 run_in e1 sh -c 'tar cf - /bin /sbin /etc /root /run /tmp /var /usr /home /mnt 2>/dev/null' > "$ed/guest.tar" 2>/dev/null
if [ -s "$ed/guest-env" ] && [ -s "$ed/guest.tar" ] && ! grep -aqF "$secret" "$ed/guest-env" "$ed/guest.tar"; then
	ok "egress: the credential is in no guest process's environment or argv, nor in its files ($(( $(stat -c %s "$ed/guest.tar") >> 20 )) MiB searched)"
else bad "egress: the credential (or the search) in the guest: $(grep -alF "$secret" "$ed/guest-env" "$ed/guest.tar")"; fi
if timeout 120 "$vmm" snapshot e1 "$ed/snap" > /dev/null 2>&1 && [ -s "$ed/snap/memory" ]; then
	if [ -n "$ca_key" ] && grep -raqF "$ca_key" "$ed/snap" "$ed/guest.tar" "$ed/guest-env"; then
		bad "egress: the CA key is in the guest or its snapshot"
	elif [ -n "$ca_key" ]; then ok "egress: the CA key is in neither the guest's files nor its snapshot"; fi
	if grep -raqF "$secret" "$ed/snap" "$VMM_STATE_DIR"; then
		bad "egress: the credential is in the snapshot or the sandbox folder: $(grep -ralF "$secret" "$ed/snap" "$VMM_STATE_DIR")"
	else ok "egress: the credential is in neither a snapshot of the sandbox (memory included) nor its folder"; fi
else bad "egress: snapshot of e1"; fi
"$vmm" rm -f e1 > /dev/null 2>&1

# A clone of e1's snapshot with the policy: its own sandbox's CA, not e1's.
if [ -d "$ed/snap" ] && E2E_EGRESS_KEY=$secret timeout 300 "$vmm" restore -d "$ed/snap" --name e3 \
	--egress-policy "$ed/policy.json" > "$ed/e3.out" 2>&1; then
	e3_ca=$(sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "$VMM_STATE_DIR/e3/egress-ca.pem")
	got=$(T=120 run_in e3 cat /run/vmm-egress-ca.pem 2>&1)
	[ -n "$e3_ca" ] && [ "$got" = "$e3_ca" ] && [ "$e3_ca" != "$host_ca" ] &&
		ok "egress: a clone restored from a snapshot gets its own sandbox's CA (through sync)" ||
		bad "egress: clone CA: $got"
else bad "egress: restore e3: $(cat "$ed/e3.out" 2>/dev/null)"; fi
"$vmm" rm -f e3 > /dev/null 2>&1

# A clone without --egress-policy has no proxy variables.
if timeout 300 "$vmm" restore -d "$tmp/gold" --name e2 > /dev/null 2>&1; then
	run_in e2 env | grep -q PROXY && bad "egress: a clone without a policy got proxy variables" ||
		ok "egress: a clone without a policy has no proxy variables"
else bad "egress: restore e2"; fi
"$vmm" rm -f e2 > /dev/null 2>&1

# ---- real HTTPS clients in a Debian sandbox ---------------------------------
. "$e2e_dir/egress_clients.sh"
# Jailed: the VMM's network namespace is empty, so the proxy runs in a
# companion process on the host's network, unprivileged (the jail's uid,
# no capabilities).
if [ "$(id -u)" = 0 ] && unshare -m -n true 2> /dev/null; then
	if E2E_EGRESS_KEY=$secret timeout 300 "$vmm" restore -d "$tmp/gold" --name ej --jail \
		--egress-policy "$ed/policy.json" > "$ed/ej.out" 2>&1; then
		got=$(T=120 run_in ej sh -c 'wget -q -O - http://api.test/v1/jailed' 2>&1)
		jp=$(cat "$VMM_STATE_DIR/ej/pid" 2> /dev/null)
		cp_=$(pgrep -x vmm-companion | head -1)
		if [ "$got" = "upstream-ok GET /v1/jailed" ] && [ -n "$cp_" ] &&
			[ "$(awk '/^Uid/ {print $2}' /proc/$cp_/status)" = "$(awk '/^Uid/ {print $2}' /proc/$jp/status)" ] &&
			grep -q "^CapEff:[[:space:]]*0000000000000000" /proc/$cp_/status &&
			[ "$(readlink /proc/$cp_/ns/net)" = "$(readlink /proc/self/ns/net)" ] &&
			[ "$(readlink /proc/$jp/ns/net)" != "$(readlink /proc/self/ns/net)" ]; then
			ok "egress: a jailed sandbox reaches the upstream through an unprivileged proxy process on the host's network"
		else bad "egress: jailed: got '$got', VMM $jp, companion '$cp_' $(grep -E '^(Uid|CapEff)' /proc/$cp_/status 2>&1 | tr '\n' ' ')"; fi
	else bad "egress: restore --jail: $(cat "$ed/ej.out")"; fi
	"$vmm" rm -f ej > /dev/null 2>&1
	for _ in $(seq 20); do [ -d "/proc/$cp_" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$cp_/status" || break; sleep 0.5; done
	[ -n "$cp_" ] && [ -d "/proc/$cp_" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$cp_/status" &&
		bad "egress: the jailed sandbox's proxy process outlived it" ||
		ok "egress: the proxy process ends with its jailed sandbox"
else echo "skip egress: jailed: needs root and namespaces"; fi
kill $up_pid 2>/dev/null
wait $up_pid 2>/dev/null
unset VMM_STATE_DIR
if [ -n "${egress_alone:-}" ]; then
	e2e_finish
	echo "egress: $pass passed, $fail failed"
	[ "$fail" = 0 ]
fi
