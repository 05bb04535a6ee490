#!/usr/bin/env python3
"""`vmm cp` out of a hostile sandbox: a 900-level tree and guest modes with
setuid bits from the host build of guest-init, and listings no honest
guest-init sends (names with '/', "..", "", the same name twice, an endless
tree, symlinks) from a fake API server speaking the frames of docs/api.md.
Then docker cp's habits against the host guest-init: into a directory
(DST a directory or ending with '/'), SRC/., symbolic links kept as links
both ways and followed with -L, sandbox to sandbox refused.

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
from testlib import Tally

T = Tally()
check = T.check

vmm, sock, token = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ, VMM_API_PORT="0", VMM_TOKEN=token)
os.umask(0o022)


def cp(src, dst, timeout=300, opts=()):
    return subprocess.run([vmm, "cp", *opts, src, dst], capture_output=True, env=env, timeout=timeout)


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

    def __init__(self, path, tree, tar=None):
        self.path, self.tree, self.tar = path, tree, tar
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
            path = req.get("path", "")
            if path.endswith("/."):  # "SRC/.": the directory itself, as a kernel resolves it
                path = path[:-2]
            node = self.tree(path)
            if node is None:
                c.sendall(frame(20, b'{"error":"ENOENT","errno":2,"message":"no such file"}'))
            elif req["op"] == "stat":
                c.sendall(frame(19, json.dumps({"type": node[0], "mode": node[1], "size": 0}).encode()))
            elif req["op"] == "list":
                c.sendall(frame(19, json.dumps({"entries": node[2], "more": False}).encode()))
            elif req["op"] == "readlink":
                c.sendall(frame(19, json.dumps({"target": node[2]}).encode()))
            elif req["op"] == "read":
                c.sendall(frame(19, json.dumps({"type": "file", "mode": node[1]}).encode()) +
                          frame(6, node[2]) + frame(7))
            elif req["op"] in ("tar_get", "tar_put") and self.tar:
                self.tar(c, req)
            else:
                # what a guest-init older than the op says: vmm cp then
                # copies file by file (the path these listings test)
                c.sendall(frame(20, b'{"error":"EINVAL","errno":22,"message":"unknown \\"op\\""}'))
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

        # a guest symlink is made on the host as a link and never followed;
        # a host symlink in the destination is not written through
        def tree(path):
            if path == "/r":
                return ("dir", 0o755, [ent("link", "symlink", 0o777), ent("sub", "dir", 0o755)])
            if path == "/r/link":
                return ("symlink", 0o777, outside)
            if path == "/r/sub":
                return ("dir", 0o755, [ent("f", "file")])
            if path == "/r/sub/f":
                return ("file", 0o644, b"pwned")
            return None
        fake = FakeGuest(fake_sock, tree)
        dst = os.path.join(d, "sym-out")
        os.makedirs(dst)
        os.symlink(outside, os.path.join(dst, "sub"))
        r = cp(f"{fake_sock}:/r/.", dst, timeout=120)  # /r's content merged into dst
        fake.close()
        os.unlink(fake_sock)
        check("cp: a symlink in the destination is not written through",
              not died(r) and r.returncode != 0 and not os.listdir(outside), (r.returncode, r.stderr[-300:]))
        check("cp: a guest symlink is created on the host as a link, not followed",
              os.path.islink(os.path.join(dst, "link")) and os.readlink(os.path.join(dst, "link")) == outside
              and not os.listdir(outside), os.listdir(dst))
        # a tree holding a guest symlink to a host directory, then a
        # directory: the link is made, never entered
        def tree2(path):
            if path == "/r":
                return ("dir", 0o755, [ent("a", "symlink", 0o777), ent("b", "dir", 0o755)])
            if path == "/r/a":
                return ("symlink", 0o777, outside)
            if path == "/r/b":
                return ("dir", 0o755, [ent("f", "file")])
            if path == "/r/b/f":
                return ("file", 0o644, b"ok")
            return None
        fake = FakeGuest(fake_sock, tree2)
        dst = os.path.join(d, "sym-out2")
        r = cp(f"{fake_sock}:/r", dst, timeout=120)
        fake.close()
        os.unlink(fake_sock)
        check("cp: a tree with a guest symlink: the link kept, the files copied, nothing outside",
              r.returncode == 0 and os.readlink(os.path.join(dst, "a")) == outside and
              open(os.path.join(dst, "b/f")).read() == "ok" and not os.listdir(outside), (r.returncode, r.stderr))

        # the link a guest made in an earlier copy is not followed by a
        # later copy into DST/NAME: sym-out2/a (-> outside) stays a link
        def tree3(path):
            if path == "/a":
                return ("dir", 0o755, [ent("f", "file")])
            if path == "/a/f":
                return ("file", 0o644, b"pwned")
            return None
        fake = FakeGuest(fake_sock, tree3)
        r = cp(f"{fake_sock}:/a", os.path.join(d, "sym-out2"), timeout=120)
        fake.close()
        os.unlink(fake_sock)
        check("cp: DST/NAME that an earlier copy made a guest's link is not written through",
              not died(r) and r.returncode != 0 and not os.listdir(outside), (r.returncode, r.stderr[-300:]))

        habits(d)
        tar_streams(d)
    T.finish("cp")


def tar_hdr(name, type_=b"0", size=0, link=b""):
    """A ustar header (GNU tar's own output is used for honest archives)."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"%011o\0" % 1000000000
    h[156:157] = type_
    h[157:157 + len(link)] = link
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def tar_streams(d):
    """vmm cp with tar streams: GNU tar drives vmm cp - both ways; a
    hostile archive from a fake guest's tar_get is refused."""
    s = sock
    src = os.path.join(d, "tsrc")
    longdir = os.path.join(src, "x" * 120, "y" * 120)
    os.makedirs(longdir)
    open(os.path.join(longdir, "deep.txt"), "w").write("deep\n")
    open(os.path.join(src, "exec.sh"), "w").write("#!/bin/sh\n")
    os.chmod(os.path.join(src, "exec.sh"), 0o750)
    os.utime(os.path.join(src, "exec.sh"), (1500000000, 1500000000))
    os.symlink("exec.sh", os.path.join(src, "link"))
    want = tree_of(src)
    # GNU tar (its default format: ././@LongLink names) into the sandbox
    dst = os.path.join(d, "tdst")
    os.makedirs(dst)
    p = subprocess.run(f"tar -C '{src}' -cf - . | '{vmm}' cp - '{s}:{dst}'", shell=True, capture_output=True,
                       env=env, timeout=120)
    st = os.stat(os.path.join(dst, "exec.sh")) if p.returncode == 0 else None
    check("cp -: GNU tar's archive extracted in the sandbox (long names, modes, times, links)",
          p.returncode == 0 and tree_of(dst) == want and stat.S_IMODE(st.st_mode) == 0o750 and
          st.st_mtime == 1500000000, (p.returncode, p.stderr[-300:], tree_of(dst) if p.returncode == 0 else None))
    # pax format too
    dst2 = os.path.join(d, "tdst-pax")
    os.makedirs(dst2)
    p = subprocess.run(f"tar --format=pax -C '{src}' -cf - . | '{vmm}' cp - '{s}:{dst2}'", shell=True,
                       capture_output=True, env=env, timeout=120)
    check("cp -: a pax archive", p.returncode == 0 and tree_of(dst2) == want, (p.returncode, p.stderr[-300:]))
    # out of the sandbox to GNU tar
    p = subprocess.run(f"'{vmm}' cp '{s}:{src}' - | tar -tf -", shell=True, capture_output=True, env=env,
                       timeout=120)
    names = sorted(n.rstrip("/") for n in p.stdout.decode().split())
    top = os.path.basename(src)
    check("cp SANDBOX:PATH -: GNU tar lists the archive, SRC's name on top",
          p.returncode == 0 and names == sorted([top] + [f"{top}/{k}" for k in want]), (p.returncode, names,
                                                                                       p.stderr[-300:]))
    out = os.path.join(d, "tout")
    os.makedirs(out)
    p = subprocess.run(f"'{vmm}' cp '{s}:{src}/.' - | tar -C '{out}' -xf -", shell=True, capture_output=True,
                       env=env, timeout=120)
    check("cp SANDBOX:PATH/. - | tar -x: the content round trips", p.returncode == 0 and tree_of(out) == want,
          (p.returncode, p.stderr[-300:]))
    p = subprocess.run(f"printf 'not a tar archive at all' | '{vmm}' cp - '{s}:{dst}'", shell=True,
                       capture_output=True, env=env, timeout=120)
    check("cp -: a malformed archive: a clear error", p.returncode == 1 and b"truncated" in p.stderr, p.stderr)
    r = cp(f"{s}:{os.path.join(d, 'no-such')}", "-")
    check("cp SANDBOX:PATH -: a missing PATH: a clear error", r.returncode == 1 and b"No such file" in r.stderr,
          r.stderr)

    # hostile archives from tar_get
    fake_sock = os.path.join(d, "fake-tar.sock")
    outside = os.path.join(d, "outside-tar")
    os.makedirs(outside)

    def serve_tar(archive):
        def tar(c, req):
            c.sendall(frame(19, b'{"name":"."}') + frame(6, archive) + frame(7))
        return tar

    z = b"\0" * 1024
    cases = [
        ("'..'", tar_hdr(b"../outside-tar/x", size=5) + b"pwned".ljust(512, b"\0") + z),
        ("an absolute name", tar_hdr(outside.encode() + b"/x", size=5) + b"pwned".ljust(512, b"\0") + z),
        ("a symlink then a file through it", tar_hdr(b"l", b"2", link=outside.encode()) +
         tar_hdr(b"l/x", size=5) + b"pwned".ljust(512, b"\0") + z),
        ("a truncated archive", tar_hdr(b"big", size=1 << 20) + b"some"),
    ]
    for what, archive in cases:
        fake = FakeGuest(fake_sock, lambda p: ("dir", 0o755, []) if p == "/r" else None, serve_tar(archive))
        dst = os.path.join(d, "tar-out")
        r = cp(f"{fake_sock}:/r", dst, timeout=120)
        fake.close()
        os.unlink(fake_sock)
        left = sorted(os.listdir(dst)) if os.path.isdir(dst) else []
        check(f"cp out (tar): {what} is refused, nothing outside, no half file",
              not died(r) and r.returncode != 0 and not os.listdir(outside) and
              all(not n.startswith(".vmm-tar") and n != "big" for n in left), (r.returncode, r.stderr[-300:], left))
        subprocess.run(["rm", "-rf", dst])


def tree_of(root):
    """{relative path: "d" | "f:content" | "l:target"} of a host tree."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "l:" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = "d"
            else:
                out[rel] = "f:" + open(p).read()
    return out


def habits(d):
    """docker cp's rules, through the host guest-init (its "sandbox" paths
    are host paths)."""
    src = os.path.join(d, "hsrc")
    os.makedirs(os.path.join(src, "sub"))
    open(os.path.join(src, "f"), "w").write("f\n")
    os.symlink("f", os.path.join(src, "rel-link"))
    os.symlink("/etc/hostname", os.path.join(src, "sub", "abs-link"))
    want = {"f": "f:f\n", "rel-link": "l:f", "sub": "d", "sub/abs-link": "l:/etc/hostname"}
    s = sock

    # into the sandbox
    dst = os.path.join(d, "hin")
    os.makedirs(dst)
    r = cp(src, f"{s}:{dst}")
    check("cp in: a directory onto an existing directory lands in DST/NAME, links kept as links",
          r.returncode == 0 and tree_of(os.path.join(dst, "hsrc")) == want, (r.stderr, tree_of(dst)))
    r = cp(src + "/.", f"{s}:{dst}/merged")
    check("cp in: SRC/. onto a new DST: DST gets the content",
          r.returncode == 0 and tree_of(os.path.join(dst, "merged")) == want, (r.stderr, tree_of(dst)))
    r = cp(os.path.join(src, "f"), f"{s}:{dst}/")
    check("cp in: a file into DST/ (a directory): DST/NAME",
          r.returncode == 0 and open(os.path.join(dst, "f")).read() == "f\n", r.stderr)
    r = cp(os.path.join(src, "f"), f"{s}:{dst}/nodir/")
    check("cp in: a file into DST/ that is not there: a clear error",
          r.returncode == 1 and b"no such directory" in r.stderr and not os.path.exists(os.path.join(dst, "nodir")),
          r.stderr)
    r = cp(src, f"{s}:{dst}/f")
    check("cp in: a directory onto a file: a clear error", r.returncode == 1 and b"not a directory" in r.stderr,
          r.stderr)
    r = cp(os.path.join(src, "rel-link"), f"{s}:{dst}/one-link")
    check("cp in: a symlink is copied as a symlink", os.path.islink(os.path.join(dst, "one-link")) and
          os.readlink(os.path.join(dst, "one-link")) == "f", r.stderr)
    r = cp(src, f"{s}:{dst}/followed", opts=("-L",))
    t = tree_of(os.path.join(dst, "followed"))
    check("cp -L in: symlinks copied as what they point to",
          r.returncode == 0 and t.get("rel-link") == "f:f\n" and t.get("sub/abs-link", "").startswith("f:"),
          (r.stderr, t))
    r = cp(src, f"{s}:{dst}/rec", opts=("-r",))
    check("cp -r is accepted", r.returncode == 0 and tree_of(os.path.join(dst, "rec")) == want, r.stderr)

    # out of the sandbox
    dst = os.path.join(d, "hout")
    r = cp(f"{s}:{src}", dst)
    check("cp out: a directory onto a new DST: DST is the copy, links kept as links",
          r.returncode == 0 and tree_of(dst) == want, (r.stderr, tree_of(dst)))
    r = cp(f"{s}:{src}", dst)
    check("cp out: a directory onto an existing directory lands in DST/NAME",
          r.returncode == 0 and tree_of(os.path.join(dst, "hsrc")) == want, (r.stderr, sorted(tree_of(dst))))
    r = cp(f"{s}:{src}/.", dst)
    check("cp out: SRC/. merges the content into DST", r.returncode == 0 and
          {k: v for k, v in tree_of(dst).items() if not k.startswith("hsrc")} == want, r.stderr)
    r = cp(f"{s}:{src}/f", dst + "/")
    check("cp out: a file into DST/: DST/NAME", r.returncode == 0 and open(os.path.join(dst, "f")).read() == "f\n",
          r.stderr)
    r = cp(f"{s}:{src}/f", os.path.join(d, "nodir") + "/")
    check("cp out: a file into DST/ that is not there: a clear error",
          r.returncode == 1 and b"no such directory" in r.stderr and not os.path.exists(os.path.join(d, "nodir")),
          r.stderr)
    r = cp(f"{s}:{src}/rel-link", os.path.join(d, "one-link-out"))
    check("cp out: a symlink is copied as a symlink", os.path.islink(os.path.join(d, "one-link-out")) and
          os.readlink(os.path.join(d, "one-link-out")) == "f", r.stderr)
    r = cp(f"{s}:{src}", os.path.join(d, "hout-L"), opts=("-L",))
    t = tree_of(os.path.join(d, "hout-L"))
    check("cp -L out: symlinks copied as what they point to",
          r.returncode == 0 and t.get("rel-link") == "f:f\n" and t.get("sub/abs-link", "").startswith("f:"),
          (r.stderr, t))

    # usage
    r = cp(f"{s}:/a", f"{s}:/b")
    check("cp: sandbox to sandbox is refused with how to do it (status 2)",
          r.returncode == 2 and b"through the host" in r.stderr, r.stderr)


main()
