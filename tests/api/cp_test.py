#!/usr/bin/env python3
"""`vmm cp` out of a hostile sandbox: a 900-level tree and guest modes with
setuid bits from the host build of guest-init, and listings no honest
guest-init sends (names with '/', "..", "", the same name twice, an endless
tree, symlinks) from a fake API server speaking the frames of docs/api.md.

  cp_test.py VMM SOCKET TOKEN

SOCKET is guest-init --serve-unix's socket. Prints ok/FAIL lines and
"cp: N passed, M failed"."""
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading

vmm, sock, token = sys.argv[1], sys.argv[2], sys.argv[3]
passed = failed = 0
env = dict(os.environ, VMM_API_PORT="0", VMM_TOKEN=token)
os.umask(0o022)


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name}: {detail}", flush=True)


def cp(src, dst, timeout=300):
    return subprocess.run([vmm, "cp", src, dst], capture_output=True, env=env, timeout=timeout)


def frame(t, payload=b""):
    return struct.pack("<IB3x", len(payload), t) + payload


def read_frame(s):
    h = b""
    while len(h) < 8:
        c = s.recv(8 - len(h))
        if not c:
            return None, None
        h += c
    n, t = struct.unpack("<IB3x", h)
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c:
            return None, None
        body += c
    return t, body


class FakeGuest:
    """The sandbox API's stat/list/read over a Unix socket, answering from
    tree(path) -> ("dir", mode, [entry dicts]) | ("file", mode, bytes) | None."""

    def __init__(self, path, tree):
        self.path, self.tree = path, tree
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(64)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            t, body = read_frame(c)
            req = json.loads(body)
            node = self.tree(req.get("path", ""))
            if node is None:
                c.sendall(frame(20, b'{"error":"ENOENT","errno":2,"message":"no such file"}'))
            elif req["op"] == "stat":
                c.sendall(frame(19, json.dumps({"type": node[0], "mode": node[1], "size": 0}).encode()))
            elif req["op"] == "list":
                c.sendall(frame(19, json.dumps({"entries": node[2], "more": False}).encode()))
            elif req["op"] == "read":
                c.sendall(frame(19, json.dumps({"type": "file", "mode": node[1]}).encode()) +
                          frame(6, node[2]) + frame(7))
            else:
                c.sendall(frame(20, b'{"error":"EINVAL","errno":22,"message":"fake"}'))
        except (OSError, ValueError, KeyError):
            pass
        finally:
            c.close()

    def close(self):
        self.srv.close()


def ent(name, type_, mode=0o644):
    return {"name": name, "type": type_, "mode": mode, "size": 0, "mtime": 0, "uid": 0, "gid": 0}


def listing_of(d, entries, files=None):
    """A fake tree: /r lists entries; /r/NAME for names in files is a file."""
    files = files or {}

    def tree(path):
        if path.rstrip("/") == "/r":  # "/r/": what an empty name joins to
            return ("dir", 0o755, entries)
        name = path[len("/r/"):]
        if path.startswith("/r/") and name in files:
            return ("file", 0o644, files[name])
        return None
    return tree


def died(r):
    return r.returncode < 0  # a signal (SIGSEGV on the old recursive walk)


def main():
    with tempfile.TemporaryDirectory() as d:
        # 900 levels, a file at the bottom, through the real guest-init
        src = os.path.join(d, "deep")
        p = src
        for _ in range(900):
            p = os.path.join(p, "d")
        os.makedirs(p)
        open(os.path.join(p, "bottom.txt"), "w").write("bottom\n")
        dst = os.path.join(d, "deep-out")
        r = cp(f"{sock}:{src}", dst)
        got = os.path.join(dst, *(["d"] * 900), "bottom.txt")
        check("cp: a 900-level tree out of the sandbox", r.returncode == 0 and os.path.exists(got)
              and open(got).read() == "bottom\n", (r.returncode, r.stderr[-300:]))

        # guest modes: permission bits only, through the umask
        src = os.path.join(d, "modes")
        os.makedirs(os.path.join(src, "sub"))
        open(os.path.join(src, "suid"), "w").write("x")
        os.chmod(os.path.join(src, "suid"), 0o6777)
        os.chmod(os.path.join(src, "sub"), 0o3777)
        dst = os.path.join(d, "modes-out")
        r = cp(f"{sock}:{src}", dst)
        fm = stat.S_IMODE(os.stat(os.path.join(dst, "suid")).st_mode) if r.returncode == 0 else None
        dm = stat.S_IMODE(os.stat(os.path.join(dst, "sub")).st_mode) if r.returncode == 0 else None
        check("cp: no setuid/setgid/sticky bits from the guest, umask applied", fm == 0o755 and dm == 0o755,
              (r.returncode, oct(fm or 0), oct(dm or 0), r.stderr))
        r = cp(f"{sock}:{os.path.join(src, 'suid')}", os.path.join(d, "one-suid"))
        fm = stat.S_IMODE(os.stat(os.path.join(d, "one-suid")).st_mode) if r.returncode == 0 else None
        check("cp: a single setuid file loses the bit", fm == 0o755, (r.returncode, oct(fm or 0), r.stderr))

        # hostile listings from a fake guest
        fake_sock = os.path.join(d, "fake.sock")
        outside = os.path.join(d, "outside")
        os.makedirs(outside)
        cases = [
            ("a name with '/'", [ent("../outside/x", "file")], {"../outside/x": b"pwned"}),
            ("the name '..'", [ent("..", "dir")], {}),
            ("the name '.'", [ent(".", "dir")], {}),
            ("an empty name", [ent("", "dir")], {}),
            ("a name twice", [ent("a", "file"), ent("a", "file")], {"a": b"x"}),
        ]
        for what, entries, files in cases:
            fake = FakeGuest(fake_sock, listing_of(d, entries, files))
            dst = os.path.join(d, "hostile-out")
            r = cp(f"{fake_sock}:/r", dst, timeout=120)
            fake.close()
            os.unlink(fake_sock)
            check(f"cp: a listing with {what} is refused", not died(r) and r.returncode != 0 and
                  not os.listdir(outside) and b"listed" in r.stderr, (r.returncode, r.stderr[-300:]))
            subprocess.run(["rm", "-rf", dst])

        # an endless tree: every directory holds a directory
        fake = FakeGuest(fake_sock, lambda path: ("dir", 0o755, [ent("d", "dir")]) if path.startswith("/r") else None)
        r = cp(f"{fake_sock}:/r", os.path.join(d, "endless"), timeout=600)
        fake.close()
        os.unlink(fake_sock)
        check("cp: an endless tree ends in a clear error", not died(r) and r.returncode != 0 and
              b"too long" in r.stderr, (r.returncode, r.stderr[-300:]))
        subprocess.run(["rm", "-rf", os.path.join(d, "endless")])

        # a guest symlink is not made on the host; a host symlink in the
        # destination is not written through
        def tree(path):
            if path == "/r":
                return ("dir", 0o755, [ent("link", "symlink", 0o777), ent("sub", "dir", 0o755)])
            if path == "/r/link":
                return ("symlink", 0o777, None)
            if path == "/r/sub":
                return ("dir", 0o755, [ent("f", "file")])
            if path == "/r/sub/f":
                return ("file", 0o644, b"pwned")
            return None
        fake = FakeGuest(fake_sock, tree)
        dst = os.path.join(d, "sym-out")
        os.makedirs(dst)
        os.symlink(outside, os.path.join(dst, "sub"))
        r = cp(f"{fake_sock}:/r", dst, timeout=120)
        fake.close()
        check("cp: a symlink in the destination is not written through",
              not died(r) and r.returncode != 0 and not os.listdir(outside), (r.returncode, r.stderr[-300:]))
        check("cp: a guest symlink is not created on the host", not os.path.lexists(os.path.join(dst, "link")),
              os.listdir(dst))
    print(f"cp: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
