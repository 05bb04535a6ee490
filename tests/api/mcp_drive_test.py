#!/usr/bin/env python3
"""Drive scopes at `vmm mcp --listen` (docs/mcp.md, "Access tokens"), over
real HTTP against a sandbox whose API is the host build of guest-init (no
VM; tests/api/host.sh makes it).

  mcp_drive_test.py VMM STATE_DIR NAME

The sandbox's record is given drives mounted at /drives/... and /mnt/...,
folders the host (which is this "guest") does not have: a drive-scoped
call that reached the guest would fail, so a right answer shows it was
served on the host, beneath the drive's folder. A token with drive:shared
and no files:* scope: reads, lists, writes and edits inside that mount;
every path outside it, a ".." and a link planted in the drive to / or ..
refused; writes past the drive's size limit get ENOSPC with the shared
count exact; drive:shared:ro and a :ro mount refuse writes.
Prints ok/FAIL lines and "mcp-drive: N passed, M failed"."""
import http.client
import json
import os
import subprocess
import sys
import tempfile
from testlib import Tally, free_port

T = Tally()
check = T.check

vmm, state, name = sys.argv[1], sys.argv[2], sys.argv[3]
work = tempfile.mkdtemp(prefix="mcp-drive.")
env = dict(os.environ, VMM_STATE_DIR=state, VMM_API_PORT="0", VMM_DRIVE_DIR=f"{work}/drives")
env.pop("VMM_TOKEN", None)
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def vmm_run(args):
    return subprocess.run([vmm] + args, capture_output=True, env=env, timeout=60)


class Http:
    def __init__(self, port, token):
        self.port, self.token, self.session, self.next_id = port, token, None, 0

    def request(self, method, params=None):
        self.next_id += 1
        m = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            m["params"] = params
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": f"Bearer {self.token}"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("POST", "/mcp", body=json.dumps(m), headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), (json.loads(data) if data else None)

    def open(self):
        s, h, b = self.request("initialize", INIT)
        self.session = h.get("mcp-session-id")
        return s == 200 and self.session

    def call(self, tool, args):
        return self.request("tools/call", {"name": tool, "arguments": args})


def token(scopes):
    r = vmm_run(["token", "create", "--ttl", "1h", "--scope", scopes, name])
    return r.stdout.decode().strip(), r


def tool_text(b):
    return b["result"]["content"][0]["text"] if b and "result" in b else None


def usage_exact(drive_dir, data):
    used = int.from_bytes(open(f"{drive_dir}/usage", "rb").read(8), "little")
    du = sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, fs in os.walk(data) for f in fs
             if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f)))
    return used == du, (used, du)


def main():
    cfg = f"{state}/{name}/config.json"
    for args in (["drive", "create", "shared", "--size", "1", "--allow", name],
                 ["drive", "create", "other", "--allow", name], ["drive", "create", "rodrive", "--allow", name]):
        r = vmm_run(args)
        check(f"setup: vmm {' '.join(args[:3])}", r.returncode == 0, r)
    data = f"{work}/drives/shared/data"
    open(f"{data}/hello.txt", "w").write("from the host\n")
    open(f"{work}/drives/other/data/secret", "w").write("not yours\n")
    os.symlink("/", f"{data}/root")
    os.symlink("..", f"{data}/up")
    os.symlink("hello.txt", f"{data}/alias")
    # the count as vmm run sets it at a mount (a walk of the folder)
    du = usage_exact(f"{work}/drives/shared", data)[1][1]
    open(f"{work}/drives/shared/usage", "r+b").write(du.to_bytes(8, "little"))
    # the record vmm run writes: which drive is mounted where
    json.dump({"name": name, "kind": "run", "drives": "shared:/drives/shared,other:/drives/other,rodrive:/mnt/ro:ro"},
              open(cfg, "w"))
    r = vmm_run(["token", "create", "--scope", "drive:shared", name])
    check("token: a drive scope without mcp is refused", r.returncode == 2 and b"add mcp" in r.stderr, r)
    r = vmm_run(["token", "create", "--scope", "mcp,drive:../x", name])
    check("token: a bad drive name is refused", r.returncode == 2 and b"drive" in r.stderr, r)
    tok, r = token("mcp,drive:shared,drive:rodrive")
    ls = json.loads(vmm_run(["token", "ls", "--json", name]).stdout)
    check("token: ls shows drive scopes", any(t["scopes"] == "mcp,drive:shared,drive:rodrive" for t in ls), ls)
    tok_ro, _ = token("mcp,drive:shared:ro")

    port = free_port()
    srv = subprocess.Popen([vmm, "mcp", name, "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env)
    try:
        srv.stderr.readline()
        c = Http(port, tok)
        check("http: a drive-scoped token opens a session", c.open())
        s, h, b = c.request("tools/list")
        names = sorted(t["name"] for t in b["result"]["tools"])
        check("http: tools/list offers the file tools a drive scope allows",
              names == ["edit_file", "list_dir", "read_file", "write_file"], names)
        s, h, b = c.call("read_file", {"path": "/drives/shared/hello.txt"})
        check("http: read_file on the drive, served on the host", s == 200 and tool_text(b) == "from the host\n", (s, b))
        s, h, b = c.call("read_file", {"path": "/drives/shared/alias"})
        check("http: a link that stays in the drive is followed", tool_text(b) == "from the host\n", b)
        for path in ("/etc/hostname", "/drives/other/secret", "/drives/shared/../other/secret", "/drives/sharedx",
                     "drives/shared/hello.txt", f"{data}/hello.txt"):
            s, h, b = c.call("read_file", {"path": path})
            check(f"http: {path} refused (403, -32001)", s == 403 and b["error"]["code"] == -32001, (s, b))
        for path in ("/drives/shared/root/etc/hostname", "/drives/shared/up/other/data/secret"):
            s, h, b = c.call("read_file", {"path": path})
            check(f"http: a planted link does not lead out: {path}", s == 200 and b["result"]["isError"] and
                  "out of the drive" in tool_text(b), (s, b))
        s, h, b = c.call("list_dir", {"path": "/drives/shared/up"})
        check("http: list_dir through a link to .. refused", b["result"]["isError"], b)
        s, h, b = c.call("search_files", {"path": "/drives/shared"})
        check("http: search_files is not a drive tool (403)", s == 403, (s, b))
        s, h, b = c.call("exec", {"command": "true"})
        check("http: exec refused (403)", s == 403, (s, b))
        s, h, b = c.call("write_file", {"path": "/drives/shared/out/new.txt", "content": "written over MCP\n"})
        check("http: write_file on the drive (parents made)", s == 200 and not b["result"]["isError"] and
              open(f"{data}/out/new.txt").read() == "written over MCP\n", (s, b))
        s, h, b = c.call("edit_file", {"path": "/drives/shared/out/new.txt", "old_string": "over", "new_string": "via"})
        check("http: edit_file on the drive", not b["result"]["isError"] and
              open(f"{data}/out/new.txt").read() == "written via MCP\n", b)
        s, h, b = c.call("edit_file", {"path": "/drives/shared/alias", "old_string": "host", "new_string": "x"})
        check("http: edit_file refuses a link", b["result"]["isError"] and os.path.islink(f"{data}/alias"), b)
        s, h, b = c.call("write_file", {"path": "/drives/shared/root/tmp/mcp-drive-escape", "content": "x"})
        check("http: a write through a link to / refused", b["result"]["isError"] and
              not os.path.exists("/tmp/mcp-drive-escape"), b)
        s, h, b = c.call("list_dir", {"path": "/drives/shared"})
        t = tool_text(b) or ""
        check("http: list_dir on the drive", "hello.txt\t14" in t and "out/" in t and "root@" in t, b)
        ok, d = usage_exact(f"{work}/drives/shared", data)
        check("http: the drive's count is exact after writes", ok, d)
        big = "x" * (700 << 10)
        s, h, b = c.call("write_file", {"path": "/drives/shared/big1", "content": big})
        check("http: a write within the limit", not b["result"]["isError"], b)
        s, h, b = c.call("write_file", {"path": "/drives/shared/big2", "content": big})
        check("http: a write past the limit gets ENOSPC, nothing left", b["result"]["isError"] and
              "No space" in tool_text(b) and not os.path.exists(f"{data}/big2") and
              not [f for f in os.listdir(data) if f.startswith(".vmm-write")], b)
        ok, d = usage_exact(f"{work}/drives/shared", data)
        check("http: the count is exact after the refusal", ok, d)
        s, h, b = c.call("read_file", {"path": "/mnt/ro/x"})
        check("http: a :ro mount is readable (no such file: a tool error)", s == 200 and b["result"]["isError"], b)
        s, h, b = c.call("write_file", {"path": "/mnt/ro/x", "content": "x"})
        check("http: a write to a :ro mount refused (403)", s == 403 and "mounted :ro" in b["error"]["message"] and
              not os.path.exists(f"{work}/drives/rodrive/data/x"), (s, b))
        c = Http(port, tok_ro)
        c.open()
        s, h, b = c.request("tools/list")
        names = sorted(t["name"] for t in b["result"]["tools"])
        check("http: drive:NAME:ro offers the reading tools only", names == ["list_dir", "read_file"], names)
        s, h, b = c.call("write_file", {"path": "/drives/shared/ro.txt", "content": "x"})
        check("http: drive:NAME:ro refuses writes (403)", s == 403 and not os.path.exists(f"{data}/ro.txt"), (s, b))
        s, h, b = c.call("read_file", {"path": "/drives/shared/hello.txt"})
        check("http: drive:NAME:ro reads", tool_text(b) == "from the host\n", b)
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        os.unlink(cfg)
        subprocess.run(["rm", "-rf", work])
    T.finish("mcp-drive")


main()
