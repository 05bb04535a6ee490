#!/usr/bin/env python3
"""`vmm mcp` end to end: an MCP client over stdio and over streamable HTTP
against a sandbox whose API is the host build of guest-init (no VM).

  mcp_test.py VMM STATE_DIR NAME

STATE_DIR/NAME is a sandbox folder whose vsock.sock is guest-init's API
socket (VMM_API_PORT=0) and whose token file holds its token: the tokens
`vmm token create` makes go into that folder too.
Prints ok/FAIL lines and "mcp: N passed, M failed"."""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from testlib import Tally, free_port

T = Tally()
check = T.check

vmm = vmm_path = sys.argv[1]
state, name = sys.argv[2], sys.argv[3]
env = dict(os.environ, VMM_STATE_DIR=state, VMM_API_PORT="0")
env.pop("VMM_TOKEN", None)


class Stdio:
    def __init__(self):
        self.p = subprocess.Popen([vmm, "mcp", name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self.next_id = 0

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) if not isinstance(msg, bytes) else msg.decode()).encode() + b"\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        return json.loads(line) if line else None

    def request(self, method, params=None):
        self.next_id += 1
        m = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            m["params"] = params
        self.send(m)
        r = self.recv()
        assert r is not None and r.get("id") == self.next_id, r
        return r

    def call(self, tool, args):
        return self.request("tools/call", {"name": tool, "arguments": args})

    def close(self):
        self.p.stdin.close()
        return self.p.wait(timeout=30)


def text(r):
    return "".join(c["text"] for c in r["result"]["content"] if c["type"] == "text")


INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp_test", "version": "1"}}


def stdio_checks(work):
    c = Stdio()
    r = c.request("tools/list")
    check("stdio: a request before initialize is refused", r.get("error", {}).get("code") == -32600, r)
    r = c.request("initialize", INIT)
    res = r.get("result", {})
    check("stdio: initialize agrees on 2025-06-18 and offers tools",
          res.get("protocolVersion") == "2025-06-18" and "tools" in res.get("capabilities", {}) and
          res.get("serverInfo", {}).get("name") == "vmm", r)
    c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    r = c.request("ping")
    check("stdio: ping (and no answer to the notification before it)", r.get("result") == {}, r)
    r = c.request("tools/list")
    names = sorted(t["name"] for t in r["result"]["tools"])
    want = sorted(["exec", "start_process", "process_output", "kill_process", "read_file", "write_file",
                   "edit_file", "list_dir", "search_files"])
    check("stdio: tools/list lists the nine tools with schemas", names == want and all(
        t["inputSchema"]["type"] == "object" and t["inputSchema"].get("additionalProperties") is False
        for t in r["result"]["tools"]), names)

    r = c.call("exec", {"command": "echo out; echo err >&2; exit 3"})
    res = r.get("result", {})
    check("stdio: exec returns stdout, stderr and the exit code",
          "out\n" in text(r) and "err\n" in text(r) and res.get("structuredContent", {}).get("exit_code") == 3
          and res.get("isError") is False, r)
    r = c.call("exec", {"command": "head -c 300000 /dev/zero | tr '\\0' x; echo; echo THE-END",
                        "max_output_bytes": 4096})
    t = text(r)
    check("stdio: large exec output is truncated with a note (head and tail kept)",
          "THE-END" in t and "omitted" in t and "output truncated" in t and len(t) < 8000 and
          r["result"]["structuredContent"]["truncated"] is True, t[-400:])
    r = c.call("exec", {"command": "sleep 5", "timeout_s": 1})
    check("stdio: exec timeout kills the command", r["result"]["structuredContent"]["timed_out"] is True
          and r["result"]["isError"] is True, r)
    r = c.call("exec", {"command": "cat", "stdin": "fed through stdin"})
    check("stdio: exec with stdin", "fed through stdin" in text(r), r)

    f = f"{work}/dir/hello.txt"
    r = c.call("write_file", {"path": f, "content": "line one\nline two\nline one\n"})
    check("stdio: write_file (creating the parent)", r["result"]["isError"] is False and
          open(f).read() == "line one\nline two\nline one\n", r)
    r = c.call("read_file", {"path": f})
    check("stdio: read_file", text(r) == "line one\nline two\nline one\n", r)
    r = c.call("read_file", {"path": f, "offset": 5, "length": 3})
    check("stdio: read_file with offset/length, and a note on the rest",
          r["result"]["content"][0]["text"] == "one" and "offset\":8" in text(r), r)
    r = c.call("edit_file", {"path": f, "old_string": "line one", "new_string": "LINE 1"})
    check("stdio: edit_file refuses an ambiguous match and changes nothing",
          r["result"]["isError"] is True and "2 times" in text(r) and open(f).read().count("line one") == 2, r)
    r = c.call("edit_file", {"path": f, "old_string": "no such text", "new_string": "x"})
    check("stdio: edit_file refuses a missing match", r["result"]["isError"] is True and "not found" in text(r), r)
    r = c.call("edit_file", {"path": f, "old_string": "line two", "new_string": "line 2"})
    check("stdio: edit_file replaces a unique match", r["result"]["isError"] is False and
          open(f).read() == "line one\nline 2\nline one\n", r)
    r = c.call("edit_file", {"path": f, "old_string": "line one", "new_string": "L1", "replace_all": True})
    check("stdio: edit_file replace_all", open(f).read() == "L1\nline 2\nL1\n" and "2 occurrences" in text(r), r)
    os.symlink(f, f"{work}/link.txt")
    r = c.call("edit_file", {"path": f"{work}/link.txt", "old_string": "L1", "new_string": "x", "replace_all": True})
    check("stdio: edit_file refuses a symbolic link (it would replace it), nothing changes",
          r["result"]["isError"] is True and "symlink" in text(r) and os.path.islink(f"{work}/link.txt") and
          open(f).read() == "L1\nline 2\nL1\n", r)
    r = c.call("write_file", {"path": f"{work}/bin.dat", "content": "AAEC/w==", "encoding": "base64"})
    r2 = c.call("read_file", {"path": f"{work}/bin.dat"})
    r3 = c.call("read_file", {"path": f"{work}/bin.dat", "encoding": "base64"})
    check("stdio: binary content goes through base64 (and utf-8 refuses it)",
          open(f"{work}/bin.dat", "rb").read() == b"\x00\x01\x02\xff" and r2["result"]["isError"] is True and
          text(r3) == "AAEC/w==", (r, r2, r3))
    r = c.call("read_file", {"path": f"{work}/missing"})
    check("stdio: read_file of a missing file is a tool error", r["result"]["isError"] is True and
          "ENOENT" in text(r), r)

    os.makedirs(f"{work}/tree/sub", exist_ok=True)
    for n in ("a.py", "b.txt", "sub/c.py"):
        with open(f"{work}/tree/{n}", "w") as fh:
            fh.write("def main():\n    return 42\n" if n.endswith(".py") else "nothing here\n")
    r = c.call("list_dir", {"path": f"{work}/tree"})
    check("stdio: list_dir", text(r).splitlines() == ["a.py\t26", "b.txt\t13", "sub/"], text(r))
    r = c.call("search_files", {"path": f"{work}/tree", "name_glob": "*.py"})
    check("stdio: search_files by name", sorted(text(r).split()) == sorted(
        [f"{work}/tree/a.py", f"{work}/tree/sub/c.py"]), r)
    r = c.call("search_files", {"path": f"{work}/tree", "content_regex": "return [0-9]+", "name_glob": "*.py"})
    check("stdio: search_files by content", sorted(text(r).splitlines()) == sorted(
        [f"{work}/tree/a.py:2:    return 42", f"{work}/tree/sub/c.py:2:    return 42"]), r)
    for i in range(30):
        open(f"{work}/tree/n{i:02}.log", "w").close()
    r = c.call("search_files", {"path": f"{work}/tree", "name_glob": "*.log", "max_results": 10})
    check("stdio: search_files is bounded, with a note", len(r["result"]["content"][0]["text"].splitlines()) == 10
          and "more than 10" in text(r), r)
    r = c.call("search_files", {"path": f"{work}/tree", "content_regex": "$(touch /tmp/pwned-mcp)"})
    check("stdio: search_files arguments are not shell syntax", not os.path.exists("/tmp/pwned-mcp")
          and r["result"]["isError"] is False, r)

    r = c.call("start_process", {"command": "i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.2; done",
                                 "tag": "ticker"})
    sc = r["result"].get("structuredContent", {})
    pid = sc.get("id")
    check("stdio: start_process returns an id", isinstance(pid, int) and r["result"]["isError"] is False, r)
    time.sleep(1.2)
    r = c.call("process_output", {"process": pid})
    sc = r["result"]["structuredContent"]
    check("stdio: process_output of a running process", "tick 0" in text(r) and sc["exited"] is False and
          sc["stdout_offset"] > 0, r)
    off = sc["stdout_offset"]
    time.sleep(0.6)
    r = c.call("process_output", {"process": "ticker", "stdout_offset": off})
    first = r["result"]["content"][0]["text"]
    check("stdio: process_output from an offset gives only the new output (by tag)",
          "tick 0\n" not in first and "tick" in first, first)
    r = c.call("kill_process", {"process": pid})
    check("stdio: kill_process", r["result"]["isError"] is False, r)
    time.sleep(0.5)
    r = c.call("process_output", {"process": pid, "stdout_offset": 10 ** 9})
    check("stdio: its exit is kept (killed by SIGTERM)", r["result"]["structuredContent"]["exited"] is True and
          r["result"]["structuredContent"]["signal"] == 15, r)
    r = c.call("kill_process", {"process": 99999})
    check("stdio: kill_process of an unknown process is a tool error", r["result"]["isError"] is True and
          "ESRCH" in text(r), r)

    # bad arguments: -32602 with the reason, nothing run
    bad = [
        ("exec", {}, "command: is required"),
        ("exec", {"command": "true", "timeout_s": 601}, "timeout_s: must be at most 600"),
        ("exec", {"command": "true", "bogus": 1}, "bogus: is not a known argument"),
        ("exec", {"command": 5}, "command: must be a string"),
        ("read_file", {"path": "/x", "encoding": "latin1"}, "encoding: must be one of"),
        ("kill_process", {"process": True}, "process: must be integer or string"),
        ("edit_file", {"path": "/x", "old_string": "", "new_string": "y"}, "old_string: must not be empty"),
        ("exec", {"command": "true", "env": ["A=1", 2]}, "env[1]: must be a string"),
    ]
    for tool, args, why in bad:
        r = c.call(tool, args)
        e = r.get("error", {})
        check(f"stdio: bad arguments to {tool} -> -32602 ({why})", e.get("code") == -32602 and why in e.get("message", ""), r)
    r = c.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    check("stdio: an unknown tool -> -32602", r.get("error", {}).get("code") == -32602, r)
    r = c.request("tools/call", {"arguments": {}})
    check("stdio: tools/call without a name -> -32602", r.get("error", {}).get("code") == -32602, r)
    r = c.request("resources/list")
    check("stdio: an unknown method -> -32601", r.get("error", {}).get("code") == -32601, r)
    c.send(b'{"jsonrpc":"2.0","id":77,"method":')
    r = c.recv()
    check("stdio: malformed JSON -> -32700, id null", r.get("error", {}).get("code") == -32700 and r["id"] is None, r)
    c.send({"jsonrpc": "1.0", "id": 78, "method": "ping"})
    r = c.recv()
    check("stdio: not JSON-RPC 2.0 -> -32600", r.get("error", {}).get("code") == -32600 and r["id"] == 78, r)
    c.send([{"jsonrpc": "2.0", "id": 79, "method": "ping"}])
    r = c.recv()
    check("stdio: a batch -> -32600", r.get("error", {}).get("code") == -32600, r)
    r = c.request("ping")
    check("stdio: the session goes on after errors", r.get("result") == {}, r)
    check("stdio: exits 0 when its stdin closes", c.close() == 0)


def vmm_run(args, **kw):
    return subprocess.run([vmm_path] + args, capture_output=True, env=env, timeout=60, **kw)


class Http:
    def __init__(self, port, token):
        self.port, self.token, self.session, self.next_id = port, token, None, 0

    def post(self, body, headers=None, token=True, session=True):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": "2025-06-18"}
        if token and self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if session and self.session:
            h["Mcp-Session-Id"] = self.session
        h.update(headers or {})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("POST", "/mcp", body=json.dumps(body) if not isinstance(body, bytes) else body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), (json.loads(data) if data else None)

    def request(self, method, params=None, **kw):
        self.next_id += 1
        m = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            m["params"] = params
        return self.post(m, **kw)

    def call(self, tool, args):
        return self.request("tools/call", {"name": tool, "arguments": args})


def http_checks(work):
    r = vmm_run(["token", "create", "--ttl", "1h", "--scope", "mcp,files:read", name])
    tok_read = r.stdout.decode().strip()
    check("token: create prints a token", r.returncode == 0 and tok_read.startswith("vmt_"), r)
    tok_all = vmm_run(["token", "create", name]).stdout.decode().strip()
    tok_nomcp = vmm_run(["token", "create", "--scope", "exec", name]).stdout.decode().strip()
    tok_short = vmm_run(["token", "create", "--ttl", "1s", name]).stdout.decode().strip()
    r = vmm_run(["token", "create", "--scope", "exec,root", name])
    check("token: an unknown scope is refused", r.returncode == 2 and b"unknown scope" in r.stderr, r)
    st = os.stat(f"{state}/{name}/tokens")
    content = open(f"{state}/{name}/tokens").read()
    check("token: stored 0600, hashed (no token text in the file)", st.st_mode & 0o777 == 0o600 and
          tok_read[4 + 13:] not in content and tok_read.split("_")[1] in content, oct(st.st_mode))
    r = vmm_run(["token", "ls", "--json", name])
    ls = json.loads(r.stdout)
    check("token: ls lists them with scopes", len(ls) >= 4 and any(t["scopes"] == "files:read,mcp" for t in ls), ls)

    port = free_port()
    srv = subprocess.Popen([vmm_path, "mcp", name, "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env)
    try:
        line = srv.stderr.readline().decode()
        check("http: vmm mcp --listen says where it serves", f"127.0.0.1:{port}/mcp" in line, line)
        c = Http(port, None)
        s, h, b = c.request("initialize", INIT)
        check("http: no token -> 401 with WWW-Authenticate", s == 401 and "bearer" in h.get("www-authenticate", "").lower(), (s, h, b))
        c.token = "vmt_000000000000_" + "0" * 64
        s, h, b = c.request("initialize", INIT)
        check("http: an unknown token -> 401", s == 401, (s, b))
        c.token = tok_nomcp
        s, h, b = c.request("initialize", INIT)
        check("http: a token without the scope mcp -> 403", s == 403 and "insufficient_scope" in h.get("www-authenticate", ""), (s, h))
        c.token = tok_read
        s, h, b = c.request("initialize", INIT, headers={"Origin": "http://evil.example"})
        check("http: a foreign Origin -> 403", s == 403, (s, b))
        s, h, b = c.request("tools/list")
        check("http: a request without a session -> 400", s == 400, (s, b))
        s, h, b = c.request("initialize", INIT, headers={"Origin": "http://localhost:3000"})
        c.session = h.get("mcp-session-id")
        check("http: initialize opens a session (loopback Origin allowed)", s == 200 and c.session and
              b["result"]["protocolVersion"] == "2025-06-18", (s, h, b))
        s, h, b = c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        check("http: a notification -> 202 Accepted, no body", s == 202 and b is None, (s, b))
        s, h, b = c.request("tools/list")
        names = sorted(t["name"] for t in b["result"]["tools"])
        check("http: tools/list offers only what the token's scopes allow", names == ["list_dir", "read_file", "search_files"], names)
        open(f"{work}/h.txt", "w").write("over http\n")
        s, h, b = c.call("read_file", {"path": f"{work}/h.txt"})
        check("http: read_file within scope", s == 200 and b["result"]["content"][0]["text"] == "over http\n", (s, b))
        s, h, b = c.call("exec", {"command": "touch /tmp/mcp-http-should-not-exist"})
        check("http: an out-of-scope call is refused (403, -32001), nothing runs",
              s == 403 and b["error"]["code"] == -32001 and "exec" in b["error"]["message"] and
              not os.path.exists("/tmp/mcp-http-should-not-exist"), (s, b))
        s, h, b = c.call("write_file", {"path": f"{work}/h.txt", "content": "x"})
        check("http: write_file out of scope refused", s == 403 and open(f"{work}/h.txt").read() == "over http\n", (s, b))
        s, h, b = c.call("read_file", {"path": f"{work}/h.txt", "length": 0})
        check("http: bad arguments -> -32602", s == 200 and b["error"]["code"] == -32602, (s, b))
        s, h, b = c.request("tools/list", headers={"MCP-Protocol-Version": "1999-01-01"})
        check("http: an unknown MCP-Protocol-Version -> 400", s == 400, (s, b))
        s, h, b = c.request("tools/list", headers={"Accept": "text/html"})
        check("http: an Accept without application/json -> 406", s == 406, (s, b))
        s, h, b = c.post(b'{"jsonrpc":"2.0","id":1,')
        check("http: malformed JSON -> -32700", b and b["error"]["code"] == -32700, (s, b))
        # another token cannot use this session
        other = Http(port, tok_all)
        other.session = c.session
        s, h, b = other.request("tools/list")
        check("http: a session is bound to the token that opened it", s == 404, (s, b))
        # the full token: exec and edit over HTTP
        a = Http(port, tok_all)
        s, h, b = a.request("initialize", INIT)
        a.session = h.get("mcp-session-id")
        s, h, b = a.call("exec", {"command": "echo via-http"})
        check("http: exec with an all-scope token", s == 200 and "via-http" in b["result"]["content"][0]["text"], (s, b))
        s, h, b = a.call("edit_file", {"path": f"{work}/h.txt", "old_string": "over", "new_string": "under"})
        check("http: edit_file", s == 200 and open(f"{work}/h.txt").read() == "under http\n", (s, b))
        # expiry: the 1 s token
        e = Http(port, tok_short)
        time.sleep(1.2)
        s, h, b = e.request("initialize", INIT)
        check("http: an expired token -> 401", s == 401 and "expired" in h.get("www-authenticate", ""), (s, h))
        # revocation takes effect at once, for an open session too
        tid = tok_read.split("_")[1]
        r = vmm_run(["token", "rm", name, tid])
        s, h, b = c.request("tools/list")
        check("http: a revoked token is refused at once (its session too)", r.returncode == 0 and s == 401, (r, s, b))
        r = vmm_run(["token", "rm", name, tid])
        check("token: rm of an unknown id fails", r.returncode != 0 and b"no such token" in r.stderr, r)
        c2 = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c2.request("GET", "/mcp", headers={"Authorization": f"Bearer {tok_all}"})
        r2 = c2.getresponse()
        r2.read()
        check("http: GET (no server stream) -> 405", r2.status == 405, r2.status)
        c2.request("DELETE", "/mcp", headers={"Authorization": f"Bearer {tok_all}", "Mcp-Session-Id": a.session})
        r2 = c2.getresponse()
        r2.read()
        s, h, b = a.request("tools/list")
        check("http: DELETE ends the session", r2.status == 204 and s == 404, (r2.status, s))
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
    port = free_port()
    srv = subprocess.Popen([vmm_path, "mcp", name, "--listen", str(port)], stderr=subprocess.PIPE, env=env)
    line = srv.stderr.readline().decode()
    srv.terminate()
    srv.wait(timeout=10)
    check("http: --listen PORT alone serves on 127.0.0.1", f"http://127.0.0.1:{port}/mcp" in line, line)
    r = vmm_run(["mcp", name, "--listen", "0.0.0.0:1"])
    check("http: a non-loopback address needs --allow-remote", r.returncode != 0 and b"allow-remote" in r.stderr, r)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="vmm-mcp-") as work:
        stdio_checks(work)
        http_checks(work)
    T.finish("mcp")
