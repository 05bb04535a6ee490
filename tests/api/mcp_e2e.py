#!/usr/bin/env python3
"""`vmm mcp` against a real sandbox (tests/e2e/snapshot.sh runs it on a
clone restored from the gold snapshot): an MCP session over stdio
(initialize, tools/list, tools/call exec, write_file, read_file,
edit_file), then over streamable HTTP with scoped tokens (an
out-of-scope call refused, an expired token refused). Every file it
touches is in the guest, reached through the tools themselves, so it runs
against the host build of guest-init as well (tests/api/host.sh).

  mcp_e2e.py VMM STATE_DIR NAME

Uses mcp_test.py's clients. The API port is the CLI's (VMM_API_PORT as
the caller set it, 1024 by default), not mcp_test.py's host-only 0.
Prints ok/FAIL lines and "mcp-e2e: N passed, M failed"."""
import os
import subprocess
import time

import mcp_test as m

if "VMM_API_PORT" in os.environ:
    m.env["VMM_API_PORT"] = os.environ["VMM_API_PORT"]
else:
    m.env.pop("VMM_API_PORT", None)
check, text, INIT = m.check, m.text, m.INIT
path = "/tmp/mcp-e2e.txt"


def stdio_session():
    c = m.Stdio()
    r = c.request("initialize", INIT)
    check("e2e stdio: initialize", r.get("result", {}).get("protocolVersion") == "2025-06-18", r)
    c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    r = c.request("tools/list")
    check("e2e stdio: tools/list has the nine tools", len(r.get("result", {}).get("tools", [])) == 9, r)
    r = c.call("exec", {"command": "echo from $(hostname); uname -s; exit 4"})
    res = r.get("result", {})
    check(f"e2e stdio: exec runs (said {text(r).splitlines()[:1]}, Linux, exit code 4)",
          "from " in text(r) and "Linux" in text(r) and
          res.get("structuredContent", {}).get("exit_code") == 4, r)
    r = c.call("write_file", {"path": path, "content": "alpha beta\nalpha gamma\n"})
    check("e2e stdio: write_file", r.get("result", {}).get("isError") is False, r)
    r = c.call("read_file", {"path": path})
    check("e2e stdio: read_file gives back what was written", text(r) == "alpha beta\nalpha gamma\n", r)
    r = c.call("edit_file", {"path": path, "old_string": "alpha", "new_string": "omega"})
    check("e2e stdio: edit_file refuses an ambiguous match", r.get("result", {}).get("isError") is True, r)
    r = c.call("edit_file", {"path": path, "old_string": "alpha gamma", "new_string": "omega gamma"})
    r2 = c.call("exec", {"command": f"cat {path}"})
    check("e2e stdio: edit_file replaces one exact match (seen by a shell in the guest)",
          r.get("result", {}).get("isError") is False and "alpha beta\nomega gamma\n" in text(r2), (r, r2))
    check("e2e stdio: exits 0 when its stdin closes", c.close() == 0)


def http_session():
    tok_read = m.vmm_run(["token", "create", "--ttl", "1h", "--scope", "mcp,files:read", m.name]).stdout.decode().strip()
    tok_short = m.vmm_run(["token", "create", "--ttl", "1s", m.name]).stdout.decode().strip()
    check("e2e http: tokens made", tok_read.startswith("vmt_") and tok_short.startswith("vmt_"), (tok_read, tok_short))
    port = m.free_port()
    srv = subprocess.Popen([m.vmm_path, "mcp", m.name, "--listen", f"127.0.0.1:{port}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=m.env)
    try:
        srv.stderr.readline()
        c = m.Http(port, tok_read)
        s, h, b = c.request("initialize", INIT)
        c.session = h.get("mcp-session-id")
        check("e2e http: initialize with a scoped token", s == 200 and c.session, (s, b))
        s, h, b = c.call("read_file", {"path": path})
        check("e2e http: read_file within scope", s == 200 and "omega gamma" in b["result"]["content"][0]["text"], (s, b))
        s, h, b = c.call("write_file", {"path": path, "content": "x"})
        s2, h2, b2 = c.call("read_file", {"path": path})
        check("e2e http: write_file out of scope refused (403), the file unchanged",
              s == 403 and "omega gamma" in b2["result"]["content"][0]["text"], (s, b))
        time.sleep(2.5)
        c2 = m.Http(port, tok_short)
        s, h, b = c2.request("initialize", INIT)
        check("e2e http: an expired token is refused (401)", s == 401, (s, b))
    finally:
        srv.terminate()
        srv.wait(timeout=30)


stdio_session()
http_session()
m.T.finish("mcp-e2e")
