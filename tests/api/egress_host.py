#!/usr/bin/env python3
"""The egress proxy's HTTPS side with real clients, on the host, no VM
(docs/egress.md, "HTTPS"): `vmm egress serve` listens on a Unix socket as
a sandbox's proxy does; a relay in this process stands in for guest-init's
forwarder (127.0.0.1:PORT -> the socket). curl and Python requests use it
as HTTPS_PROXY, with the sandbox's CA (fetched through the proxy) in
CURL_CA_BUNDLE / REQUESTS_CA_BUNDLE, against egress_upstream.py (HTTPS with
a CA of this test's).
    egress_host.py VMM
"""
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import requests
from testlib import free_port

vmm = os.path.abspath(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="egress-host.")
secret = "sk-host-" + os.urandom(12).hex()
secret2 = "sk-set-" + os.urandom(12).hex()  # given only to `vmm egress set`
procs = []
passed = failed = 0


def ok(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + (": " + str(detail) if detail != "" else ""))


def sh(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def relay(path):
    """guest-init's forwarder, on the host: TCP on loopback to the socket."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)

    def pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def serve():
        while True:
            c, _ = lsock.accept()
            u = socket.socket(socket.AF_UNIX)
            try:
                u.connect(path)
            except OSError:
                c.close()
                continue
            threading.Thread(target=pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=pipe, args=(u, c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return lsock.getsockname()[1]


def proxy(name, policy):
    d = os.path.join(tmp, name)
    os.mkdir(d)
    with open(os.path.join(d, "policy.json"), "w") as f:
        json.dump(policy, f)
    uds = os.path.join(d, "vsock.sock")
    env = dict(os.environ, E2E_KEY=secret)
    p = subprocess.Popen([vmm, "egress", "serve", "--policy", os.path.join(d, "policy.json"), "--vsock-uds", uds,
                          "--name", name], env=env, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(d, "vmm.err"), "w"))
    procs.append(p)
    for _ in range(200):  # the socket exists from bind(), serves from listen(): wait for the line
        if "egress proxy for" in open(os.path.join(d, "vmm.err")).read():
            break
        time.sleep(0.05)
    return d, p, relay(uds + "_3128")


def log_lines(d):
    with open(os.path.join(d, "egress.log")) as f:
        return [json.loads(x) for x in f]


def wait_log(d, pred, timeout=3.0):
    """The log's lines once pred(lines) holds (a tunnel's line is written when
    it ends, maybe just after the client exits), or as they are at the timeout."""
    end = time.time() + timeout
    while True:
        lines = log_lines(d)
        if pred(lines) or time.time() > end:
            return lines
        time.sleep(0.05)


def upstream_reqs():
    with open(os.path.join(tmp, "upstream.log")) as f:
        return [json.loads(x) for x in f]


def connect_raw(port, host):
    """CONNECT host:443 through the proxy; the socket and the answer's status line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(4096)
        if not d:
            break
        head += d
    return s, head.split(b"\r\n")[0].decode()


def main():
    # ---- a CA of the test's, the upstream's certificate, the upstream --------
    os.chdir(tmp)
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=egress host test CA",
       "-keyout", "tca.key", "-out", "tca.pem")
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=api.test", "-keyout", "up.key", "-out", "up.csr")
    with open("ext", "w") as f:
        f.write("subjectAltName=DNS:api.test,DNS:pipe.test,DNS:nosni.test\n")
    sh("openssl", "x509", "-req", "-in", "up.csr", "-CA", "tca.pem", "-CAkey", "tca.key", "-CAcreateserial", "-days",
       "2", "-extfile", "ext", "-out", "up.pem")
    up_port, silent_port = free_port(), free_port()
    up = subprocess.Popen([sys.executable, os.path.join(here, "..", "e2e", "egress_upstream.py"), "up.pem", "up.key",
                           str(up_port), str(silent_port), os.path.join(tmp, "upstream.log")], stdout=subprocess.PIPE,
                          text=True)
    procs.append(up)
    up.stdout.readline()
    connect = "127.0.0.1:%d" % up_port
    tca = os.path.join(tmp, "tca.pem")
    d, vp, port = proxy("sb", {"allow": [
        {"host": "api.test", "path_prefix": "/v1", "methods": ["GET", "POST"], "connect": connect, "ca_file": tca,
         "inject": {"header": "Authorization", "value_env": "E2E_KEY", "prefix": "Bearer "}},
        {"host": "pipe.test", "connect": connect},
        {"host": "nosni.test", "connect": connect, "require_sni": False},
        {"host": "slow.test", "connect": "127.0.0.1:%d" % silent_port, "ca_file": tca, "timeout_ms": 500,
         "inject": {"header": "X-K", "value_env": "E2E_KEY"}},
    ]})
    px = "http://127.0.0.1:%d" % port

    # ---- the CA ------------------------------------------------------------------
    st = os.stat(os.path.join(d, "egress-ca.pem"))
    ok(st.st_mode & 0o777 == 0o600, "the CA (key and certificate) is kept mode 0600", oct(st.st_mode))
    r = requests.get("http://vmm-egress.invalid/ca.pem", proxies={"http": px})
    ok(r.status_code == 200 and "BEGIN CERTIFICATE" in r.text and "PRIVATE" not in r.text,
       "the proxy hands out the CA certificate, never its key", r.text[:80])
    ca = os.path.join(tmp, "sandbox-ca.pem")
    with open(ca, "w") as f:
        f.write(r.text)
    out = sh("openssl", "x509", "-in", ca, "-noout", "-text").stdout
    ok("CA:TRUE" in out and "prime256v1" in out, "the CA is an EC P-256 CA certificate", out[:200])
    cenv = dict(os.environ, HTTPS_PROXY=px, CURL_CA_BUNDLE=ca)

    # ---- curl, intercepted ----------------------------------------------------
    r = sh("curl", "-sS", "-H", "Authorization: Bearer guest-fake", "https://api.test/v1/models",
           "https://api.test/v1/second", env=cenv)
    ok(r.stdout == "upstream-ok GET /v1/models\nupstream-ok GET /v1/second\n",
       "curl: HTTPS through the proxy, two requests", r.stdout + r.stderr)
    reqs = [x for x in upstream_reqs() if x["path"] in ("/v1/models", "/v1/second")]
    auths = [[v for k, v in x["headers"] if k.lower() == "authorization"] for x in reqs]
    ok(len(reqs) == 2 and all(a == ["Bearer " + secret] for a in auths),
       "curl: the upstream got the credential once per request, the guest's Authorization dropped", auths)
    lines = wait_log(d, lambda ls: any(x["method"] == "CONNECT" for x in ls))
    conns = [x for x in lines if x["method"] == "CONNECT"]
    ok(len(conns) == 1 and conns[0]["tls"] == "intercept",
       "curl: both requests went through one intercepted tunnel (keep-alive)", conns)
    got = {x["path"]: x for x in lines if x["method"] == "GET"}
    ok(got.get("/v1/models", {}).get("injected") is True and got["/v1/models"]["status"] == 200
       and got["/v1/models"].get("decision") == "allow" and got["/v1/models"].get("rule") == 0,
       "the log: a line per request inside the tunnel (status, rule, decision, injected)", got)
    r = sh("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", "https://api.test/v1/x", env=cenv)
    ok(r.stdout == "403", "curl: a method the rule refuses gets 403 inside the tunnel", r.stdout + r.stderr)
    r = sh("curl", "-sS", "-i", "https://api.test/admin", env=cenv)
    ok("\r\n\r\nHTTP/1.1 403 Forbidden" in r.stdout.replace("\n", "\r\n").replace("\r\r", "\r")
       and "path not allowed" in r.stdout,
       "curl: a path the rule refuses gets 403 with the reason", r.stdout)
    r = sh("curl", "-sS", "--http2", "https://api.test/v1/h2", env=cenv)
    ok(r.stdout == "upstream-ok GET /v1/h2\n", "curl --http2 falls back to HTTP/1.1 (ALPN)", r.stdout + r.stderr)
    r = sh("curl", "-sS", "https://api.test/v1/untrusted", env=dict(cenv, CURL_CA_BUNDLE=tca))
    ok(r.returncode == 60, "curl without the sandbox's CA fails its handshake", r.returncode)
    # The proxy writes that line once the handshake has failed on its side,
    # which may be just after curl exits: wait for it (wait_log).
    why = "the sandbox's client does not trust the egress CA"
    ok(any(x.get("reason") == why for x in wait_log(d, lambda ls: any(x.get("reason") == why for x in ls))),
       "... and the proxy logs why")
    r = sh("curl", "-sS", "-x", px, "--proxy-insecure", "https://other.test/", env=cenv)
    ok(r.returncode != 0 and "403" in r.stderr, "curl: a host without a rule is refused at CONNECT", r.stderr)

    # ---- Python requests, intercepted -------------------------------------------
    env = dict(os.environ, HTTPS_PROXY=px, REQUESTS_CA_BUNDLE=ca)
    code = r"""
import requests, sys
s = requests.Session()
out = []
for path in ["/v1/a", "/v1/b", "/nope", "/v1/c"]:
    r = s.get("https://api.test" + path)
    out.append("%d %s" % (r.status_code, r.text.strip()))
r = s.post("https://api.test/v1/post", data=b"hello-body")
out.append("%d %s" % (r.status_code, r.text.strip()))
r = s.post("https://api.test/v1/chunked", data=(x for x in [b"chunk-", b"body"]))
out.append("%d %s" % (r.status_code, r.text.strip()))
for path in ["/v1/ka1", "/nope", "/v1/ka2", "/v1/ka3"]:
    r = s.get("https://api.test" + path)
    out.append("%d %s" % (r.status_code, r.text.strip()))
r = s.post("https://api.test/v1/ka-post", data=b"kept-body")
out.append("%d %s" % (r.status_code, r.text.strip()))
print("\n".join(out))
"""
    before = len([x for x in log_lines(d) if x["method"] == "CONNECT"])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    ok(r.stdout.split("\n")[:4] == ["200 upstream-ok GET /v1/a", "200 upstream-ok GET /v1/b",
                                    "403 vmm egress: path not allowed", "200 upstream-ok GET /v1/c"],
       "requests: a session's GETs answered, the refused one 403", r.stdout + r.stderr)
    ok("200 upstream-ok POST /v1/post" in r.stdout and "200 upstream-ok POST /v1/chunked" in r.stdout,
       "requests: POST bodies, Content-Length and chunked", r.stdout)
    bodies = {x["path"]: x["body"] for x in upstream_reqs()}
    ok(bodies.get("/v1/post") == "hello-body" and bodies.get("/v1/chunked") == "chunk-body",
       "requests: the bodies arrived upstream whole", bodies)
    conns = [x for x in log_lines(d) if x["method"] == "CONNECT"][before:]
    ok(len(conns) == 1, "requests: one tunnel for the whole session (403 inside it included)", conns)
    ka = [x for x in upstream_reqs() if x["path"] in ("/v1/ka1", "/v1/ka2", "/v1/ka3", "/v1/ka-post")]
    ok(r.stdout.split("\n")[6:] == ["200 upstream-ok GET /v1/ka1", "403 vmm egress: path not allowed",
                                    "200 upstream-ok GET /v1/ka2", "200 upstream-ok GET /v1/ka3",
                                    "200 upstream-ok POST /v1/ka-post", ""]
       and len(ka) == 4 and len({x["conn"] for x in ka}) == 1
       and all([v for k, v in x["headers"] if k.lower() == "authorization"] == ["Bearer " + secret] for x in ka)
       and ka[3]["body"] == "kept-body",
       "requests: a keep-alive upstream serves the tunnel's requests on one connection, the credential on each",
       r.stdout + json.dumps(ka))

    # ---- pass-through tunnels ----------------------------------------------------
    r = sh("curl", "-sS", "https://pipe.test/v1/p", env=dict(cenv, CURL_CA_BUNDLE=tca))
    ok(r.stdout == "upstream-ok GET /v1/p\n", "curl: a pass-through tunnel with the upstream's own certificate",
       r.stdout + r.stderr)
    last = [x for x in upstream_reqs() if x["path"] == "/v1/p"]
    ok(last and not [v for k, v in last[0]["headers"] if k.lower() == "authorization"],
       "... and nothing injected into it")
    s, status = connect_raw(port, "pipe.test")
    ctx = ssl.create_default_context(cafile=tca)
    ctx.check_hostname = False
    try:
        ctx.wrap_socket(s, server_hostname="evil.test").close()
        ok(False, "a pass-through tunnel whose SNI names another host is refused")
    except (ssl.SSLError, OSError):
        ok(status.startswith("HTTP/1.1 200"), "a pass-through tunnel whose SNI names another host is refused")
    s, status = connect_raw(port, "pipe.test")
    s.sendall(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00")
    ok(s.recv(100) == b"", "a malformed ClientHello ends the tunnel")
    s.close()
    s, status = connect_raw(port, "pipe.test")
    ctx = ssl.create_default_context(cafile=tca)
    ctx.check_hostname = False
    try:
        ctx.wrap_socket(s, server_hostname=None).close()
        ok(False, "a pass-through tunnel without SNI is refused (require_sni)")
    except (ssl.SSLError, OSError, ValueError):
        ok(True, "a pass-through tunnel without SNI is refused (require_sni)")
    time.sleep(0.2)
    reasons = [x.get("reason") for x in log_lines(d) if x["method"] == "CONNECT" and x["host"] == "pipe.test"]
    ok("the ClientHello names another host than the CONNECT" in reasons and
       "not a TLS ClientHello, or a malformed one" in reasons and "the ClientHello names no host (SNI)" in reasons,
       "the log says why each was refused", reasons)

    # ---- the guest's client speaks only h2, or names another host ----------------
    s, status = connect_raw(port, "api.test")
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    try:
        ctx.wrap_socket(s, server_hostname="api.test").close()
        ok(False, "an HTTP/2-only client is refused (no http/1.1 in ALPN)")
    except (ssl.SSLError, OSError):
        ok(True, "an HTTP/2-only client is refused (no http/1.1 in ALPN)")
    s, status = connect_raw(port, "api.test")
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    try:
        ctx.wrap_socket(s, server_hostname="evil.test").close()
        ok(False, "an intercepted tunnel whose SNI names another host is refused")
    except (ssl.SSLError, OSError):
        ok(True, "an intercepted tunnel whose SNI names another host is refused")

    # ---- the upstream's timeout applies inside an intercepted tunnel -------------
    t = time.monotonic()
    r = sh("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "https://slow.test/v1/x", env=cenv)
    took = time.monotonic() - t
    ok(r.stdout == "504" and took < 5, "an upstream that never answers: 504 inside the tunnel after timeout_ms",
       (r.stdout, r.stderr, took))
    slow = [x for x in wait_log(d, lambda ls: any(x["host"] == "slow.test" and x["method"] == "GET" for x in ls))
            if x["host"] == "slow.test" and x["method"] == "GET"]
    ok(slow and slow[0]["status"] == 504 and slow[0]["injected"] is False and "timed out" in slow[0].get("reason", ""),
       "... logged, nothing injected", slow)

    # ---- the policy changed on the running proxy (vmm egress set/show) ---------
    ctl = os.path.join(d, "egress.sock")
    r = sh(vmm, "egress", "show", "--socket", ctl)
    shown = json.loads(r.stdout) if r.returncode == 0 else {}
    ok(shown.get("version") == 1 and shown["allow"][0]["inject"] == {"header": "Authorization", "value": "(redacted)"}
       and secret not in r.stdout, "vmm egress show: the policy in force, the credential redacted", r.stdout + r.stderr)
    code = r"""
import requests, subprocess, sys
s = requests.Session()
def get(path):
    r = s.get("https://api.test" + path)
    return "%d %s" % (r.status_code, r.text.strip())
out = [get("/v1/before"), get("/v1/ka-before")]
print("\n".join(out), flush=True)
sys.stdin.readline()  # the test changes the policy meanwhile
out = [get("/v1/after"), get("/v2/after"), get("/v2/ka-after")]
print("\n".join(out), flush=True)
"""
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline().strip()
    ka_first = p.stdout.readline().strip()
    pol2 = os.path.join(tmp, "policy2.json")
    with open(pol2, "w") as f:
        json.dump({"allow": [{"host": "api.test", "path_prefix": "/v2", "connect": connect, "ca_file": tca,
                              "inject": {"header": "Authorization", "value_env": "E2E_KEY2", "prefix": "Key "}}]}, f)
    r = sh(vmm, "egress", "set", "--socket", ctl, pol2, env=dict(os.environ, E2E_KEY2=secret2))
    ok(r.returncode == 0, "vmm egress set: the new policy is taken", r.stderr)
    conns = [x for x in log_lines(d) if x["method"] == "CONNECT"]
    out, err = p.communicate("go\n", timeout=60)
    ok(first == "200 upstream-ok GET /v1/before" and out.split("\n")[:2] ==
       ["403 vmm egress: path not allowed", "200 upstream-ok GET /v2/after"],
       "a keep-alive tunnel opened before the change: its next requests see the new rules", first + out + err)
    up2 = [x for x in upstream_reqs() if x["path"] == "/v2/after"]
    ok(up2 and [v for k, v in up2[0]["headers"] if k.lower() == "authorization"] == ["Key " + secret2],
       "... with the new credential, read by `vmm egress set` from its own environment", up2)
    kc = {x["path"]: x["conn"] for x in upstream_reqs() if x["path"] in ("/v1/ka-before", "/v2/ka-after")}
    ok(ka_first == "200 upstream-ok GET /v1/ka-before" and out.split("\n")[2] == "200 upstream-ok GET /v2/ka-after"
       and len(kc) == 2 and kc["/v1/ka-before"] != kc["/v2/ka-after"],
       "an upstream connection kept under the old policy is not used under the new one", ka_first + out + str(kc))
    lines = wait_log(d, lambda ls: len([x for x in ls if x["method"] == "CONNECT"]) > len(conns))
    pv = {x["path"]: x.get("policy") for x in lines if x["path"] in ("/v1/before", "/v1/after", "/v2/after")}
    new_conns = [x for x in lines if x["method"] == "CONNECT"][len(conns):]
    ok(pv == {"/v1/before": 1, "/v1/after": 2, "/v2/after": 2} and len(new_conns) == 1
       and new_conns[0].get("policy") == 1,
       "one tunnel; the log names the policy version that decided each request (its CONNECT: the old one)",
       (pv, new_conns))
    bad = os.path.join(tmp, "bad.json")
    for text, why, what in [
            ('{"allow": [{"host": "api.test"}, {"host": "x", "port": 0}]}', "port", "a bad rule"),
            ('{"allow": [', "not JSON", "bad JSON"),
            (json.dumps({"allow": [{"host": "api.test", "inject": {"header": "X", "value_env": "E2E_NOPE"}}]}),
             "E2E_NOPE", "a credential that is not there"),
            (json.dumps({"allow": [{"host": "api.test", "ca_file": "/nonexistent.pem"}]}), "CA", "a CA file"),
            (json.dumps({"ca": "host", "allow": [{"host": "api.test"}]}), "ca", "another \"ca\"")]:
        with open(bad, "w") as f:
            f.write(text)
        r = sh(vmm, "egress", "set", "--socket", ctl, bad)
        ok(r.returncode != 0 and why in r.stderr, "vmm egress set refuses %s, saying why" % what, r.stderr)
    # the proxy itself checks what reaches its socket, whatever the CLI did
    s = socket.socket(socket.AF_UNIX)
    s.connect(ctl)
    s.sendall(json.dumps({"op": "egress_set", "policy": json.dumps(
        {"allow": [{"host": "api.test", "inject": {"header": "X", "value_env": "E2E_KEY"}}]})}).encode() + b"\n")
    reply = json.loads(s.makefile().readline())
    s.close()
    ok(reply.get("ok") is False and "E2E_KEY" in reply.get("error", ""),
       "the proxy refuses a policy whose credential the request does not carry (never its own environment)", reply)
    r = sh(vmm, "egress", "show", "--socket", ctl)
    shown = json.loads(r.stdout) if r.returncode == 0 else {}
    ok(shown.get("version") == 2 and shown["allow"][0].get("path_prefix") == "/v2" and secret2 not in r.stdout,
       "after the refusals the policy is still the one set before", r.stdout + r.stderr)
    r = sh("curl", "-sS", "https://api.test/v2/still", env=cenv)
    ok(r.stdout == "upstream-ok GET /v2/still\n", "... and serves", r.stdout + r.stderr)

    # ---- the credential never comes back ----------------------------------------
    time.sleep(0.3)
    leaks = []
    for root, _, files in os.walk(d):
        for n in files:
            p = os.path.join(root, n)
            data = open(p, "rb").read() if os.path.isfile(p) else b""
            if secret.encode() in data or secret2.encode() in data:
                leaks.append(p)
    ok(not leaks, "the credential is in neither the log nor the sandbox's files", leaks)
    ok(vp.poll() is None, "the proxy (under its seccomp filter) is still up")

    # ---- limits -----------------------------------------------------------------
    d2, vp2, port2 = proxy("lim", {"limits": {"requests_per_second": 1, "burst": 2, "max_connections": 2},
                                   "allow": [{"host": "api.test", "connect": connect, "ca_file": tca,
                                              "inject": {"header": "X-K", "value_env": "E2E_KEY"}}]})
    r = requests.get("http://vmm-egress.invalid/ca.pem", proxies={"http": "http://127.0.0.1:%d" % port2})
    ca2 = os.path.join(tmp, "ca2.pem")
    with open(ca2, "w") as f:
        f.write(r.text)
    urls = []
    for i in range(5):
        urls += ["-o", "/dev/null", "https://api.test/r%d" % i]
    codes = sh("curl", "-sS", "-w", "%{http_code} ", *urls,
               env=dict(os.environ, HTTPS_PROXY="http://127.0.0.1:%d" % port2, CURL_CA_BUNDLE=ca2)).stdout.split()
    ok(codes[:2] == ["200", "200"] and "429" in codes, "requests over the rate get 429", codes)
    held = [socket.create_connection(("127.0.0.1", port2)) for _ in range(2)]
    time.sleep(0.3)
    s = socket.create_connection(("127.0.0.1", port2), timeout=10)
    s.sendall(b"GET http://api.test/r HTTP/1.1\r\n\r\n")
    ok(s.recv(100).startswith(b"HTTP/1.1 503"), "connections over max_connections get 503")
    for x in held + [s]:
        x.close()
    time.sleep(0.2)
    ok([x for x in log_lines(d2) if x["status"] == 503 and x.get("reason") == "too many connections"
        and x.get("decision") == "deny"], "... and each is a log line", log_lines(d2)[-2:])

    print("egress host: %d passed, %d failed" % (passed, failed))
    return failed == 0


try:
    rc = main()
except Exception as e:  # a crash is a failure, with its story
    import traceback
    traceback.print_exc()
    rc = False
finally:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
    if os.environ.get("EGRESS_KEEP"):
        print("kept", tmp)
    else:
        subprocess.run(["rm", "-rf", tmp])
sys.exit(0 if rc else 1)
