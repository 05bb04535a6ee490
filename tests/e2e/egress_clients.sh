# The egress proxy with real, unmodified HTTPS clients inside a sandbox
# (docs/egress.md "HTTPS"): curl, Python requests and git, given only the
# variables guest-init exports (HTTPS_PROXY, the CA bundle), against the
# test's HTTPS upstream. Sourced by egress.sh (uses its $ed, $secret,
# $up_port, policy and upstream, and lib.sh's ok/bad/run_in).
#
# The clients come from a Debian image (tests/e2e/debian_image.sh, made on
# the host before the KVM tier: the vmhost VM has no network), named by
# VMM_E2E_EGRESS_IMAGE; where it could not be made, IMAGE.skip says why
# and these checks skip, saying so. The image is booted once, snapshotted
# at API-ready, and the sandbox under test is a restore of that snapshot
# with --egress-policy (the clone path: its CA and proxy come through sync).
img=${VMM_E2E_EGRESS_IMAGE:-}
e2e_input "egress: real clients" "$img" VMM_E2E_EGRESS_IMAGE debian_image.sh file || return 0

dx() { T=${T:-180} run_in ed sh -c "$*" 2>&1; }
cp "$img" "$tmp/deb-root.img"
timeout 600 "$vmm" run --name dgold --kernel "$kernel" --mem 256 --disk "path=$tmp/deb-root.img,root" \
	--cmdline "console=ttyS0 reboot=k panic=-1 init=/sbin/vmm-init" --token e2e-token \
	--console "file:$tmp/dgold.console" < /dev/null 2> "$tmp/dgold.err" &
dgold_pid=$!
for _ in $(seq 1200); do
	grep -q "API ready" "$tmp/dgold.console" 2>/dev/null && break
	kill -0 $dgold_pid 2>/dev/null || break
	sleep 0.5
done
if timeout 120 "$vmm" snapshot --stop dgold "$ed/dgold" > "$ed/dgold.out" 2>&1; then
	ok "egress: the Debian image with curl, requests and git booted and was snapshotted at API-ready"
else bad "egress: Debian image snapshot: $(cat "$ed/dgold.out"; tail -5 "$tmp/dgold.console" "$tmp/dgold.err")"; fi
wait $dgold_pid
if ! E2E_EGRESS_KEY=$secret timeout 300 "$vmm" restore -d "$ed/dgold" --name ed \
	--egress-policy "$ed/policy.json" > "$ed/ed.out" 2>&1; then
	bad "egress: restore of the Debian image with --egress-policy: $(cat "$ed/ed.out")"
	return 0
fi

# What guest-init gave the sandbox: its CA in the system bundle (once),
# the variables.
host_ca=$(sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "$VMM_STATE_DIR/ed/egress-ca.pem")
got=$(dx "grep -c 'vmm egress CA (begin)' /etc/ssl/certs/ca-certificates.crt; cat /run/vmm-egress-ca.pem")
[ -n "$host_ca" ] && [ "$got" = "1
$host_ca" ] && ok "egress: Debian: the sandbox's CA is in the system bundle, once" || bad "egress: Debian CA: $got"
timeout 60 "$vmm" cp "$ed/ca.pem" ed:/root/test-ca.pem

# curl: two requests in one tunnel (kept alive upstream: one upstream
# connection), the guest's own Authorization replaced.
got=$(dx "curl -sS -H 'Authorization: Bearer guest-fake' https://api.test/v1/https-curl https://api.test/v1/https-curl2 https://api.test/v1/ka-curl1 https://api.test/v1/ka-curl2")
[ "$got" = "upstream-ok GET /v1/https-curl
upstream-ok GET /v1/https-curl2
upstream-ok GET /v1/ka-curl1
upstream-ok GET /v1/ka-curl2" ] && ok "egress: curl https:// through HTTPS_PROXY, unmodified, four requests in one tunnel" ||
	bad "egress: curl https: '$got'"
got=$(dx "curl -sS -o /dev/null -w '%{http_code}' https://api.test/admin")
[ "$got" = 403 ] && ok "egress: curl: a refused path gets 403 inside the tunnel" || bad "egress: curl 403: '$got'"
got=$(dx "curl -sS https://evil.test/ 2>&1; echo rc=\$?")
echo "$got" | grep -q "403" && ok "egress: curl: a host without a rule is refused at CONNECT" || bad "egress: curl evil: $got"
got=$(dx "curl -sS --cacert /root/test-ca.pem https://tunnel.test/v1/piped")
[ "$got" = "upstream-ok GET /v1/piped" ] &&
	ok "egress: curl: a pass-through tunnel with the upstream's own certificate" || bad "egress: curl pipe: '$got'"
# Python requests: a session (one tunnel), a refused path in the middle.
got=$(T=300 dx "python3 -c \"import requests; s = requests.Session(); print(*[s.get('https://api.test' + p).status_code for p in ('/v1/py1', '/nope', '/v1/py2')]); print(s.post('https://api.test/v1/py-post', data=b'py-body').text.strip())\"")
[ "$got" = "200 403 200
upstream-ok POST /v1/py-post" ] && grep -q '"body": "py-body"' "$ed/upstream.log" &&
	ok "egress: Python requests: a session through the proxy, the refused path 403, a POST body" ||
	bad "egress: requests: '$got'"

# git: the test upstream is no git server; the request reaching it with
# the credential is what counts.
dx "git ls-remote https://api.test/v1/repo.git" > "$ed/git.out" 2>&1
grep -q '"path": "/v1/repo.git/info/refs?service=git-upload-pack"' "$ed/upstream.log" &&
	ok "egress: git ls-remote https:// reaches the upstream through the proxy" ||
	bad "egress: git ls-remote: $(cat "$ed/git.out")"

if python3 - "$ed/upstream.log" "$secret" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
https = [r for r in reqs if "/v1/https-curl" in r["path"] or "/v1/ka-curl" in r["path"] or "/v1/py" in r["path"]
         or "repo.git" in r["path"]]
assert len(https) >= 8, [r["path"] for r in https]
for r in https:
    auth = [v for k, v in r["headers"] if k.lower() == "authorization"]
    assert auth == ["Bearer " + sys.argv[2]], (r["path"], auth)
ka = {r["conn"] for r in reqs if "/v1/ka-curl" in r["path"]}
assert len(ka) == 1, ka
for r in [r for r in reqs if r["path"] == "/v1/piped"]:
    assert not [v for k, v in r["headers"] if k.lower() == "authorization"], r
EOF
then ok "egress: every request of curl, requests and git got the credential once (kept-alive ones on one upstream connection), the piped one none"
else bad "egress: HTTPS upstream headers: $(tail -3 "$ed/upstream.log")"; fi

# The policy changed on the running sandbox: the next request sees it
# (/v1 refused, /v2 allowed with another credential).
secret2="sk-e2e2-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sed -e 's|"path_prefix": "/v1"|"path_prefix": "/v2"|' -e 's|E2E_EGRESS_KEY|E2E_EGRESS_KEY2|' \
	"$ed/policy.json" > "$ed/policy2.json"
if E2E_EGRESS_KEY2=$secret2 timeout 60 "$vmm" egress set ed "$ed/policy2.json" > "$ed/set.out" 2>&1; then
	got=$(dx "curl -sS -o /dev/null -w '%{http_code}\n' https://api.test/v1/after; curl -sS https://api.test/v2/after")
	[ "$got" = "403
upstream-ok GET /v2/after" ] &&
		grep '"path": "/v2/after"' "$ed/upstream.log" | grep -qF "Bearer $secret2" &&
		ok "egress: vmm egress set on the running sandbox: the next requests see the new rules and credential" ||
		bad "egress: after egress set: $got"
else bad "egress: vmm egress set: $(cat "$ed/set.out")"; fi

# Neither credential anywhere the sandbox can see: its processes'
# environments and command lines, its files (what it could write to), its
# memory (a snapshot), its folder and logs on the host.
T=120 run_in ed sh -c 'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; env' > "$ed/deb-env" 2>/dev/null
T=300 run_in ed sh -c 'tar cf - /etc /root /run /tmp /var /home /usr/local 2>/dev/null' > "$ed/deb.tar" 2>/dev/null
if [ -s "$ed/deb-env" ] && [ -s "$ed/deb.tar" ] && ! grep -aqF -e "$secret" -e "$secret2" "$ed/deb-env" "$ed/deb.tar"; then
	ok "egress: Debian: the credentials are in no process's environment or argv, nor in its files"
else bad "egress: Debian: a credential (or the search) in the guest: $(grep -alF -e "$secret" -e "$secret2" "$ed/deb-env" "$ed/deb.tar")"; fi
if timeout 120 "$vmm" snapshot ed "$ed/dsnap" > /dev/null 2>&1 && [ -s "$ed/dsnap/memory" ]; then
	if grep -raqF -e "$secret" -e "$secret2" "$ed/dsnap" "$VMM_STATE_DIR/ed"; then
		bad "egress: Debian: a credential in the snapshot or the sandbox folder: $(grep -ralF -e "$secret" -e "$secret2" "$ed/dsnap" "$VMM_STATE_DIR/ed")"
	else ok "egress: Debian: the credentials are in neither its snapshot (memory included) nor its folder and logs"; fi
else bad "egress: snapshot of ed"; fi
"$vmm" rm -f ed > /dev/null 2>&1
rm -rf "$ed/dgold" "$ed/dsnap" "$tmp/deb-root.img" "$ed/deb.tar"
