#!/usr/bin/env python3
"""The Firecracker-compatible control API against real VMMs booting the
freestanding test guests (milliseconds each): Firecracker's getting-started
sequence with curl --unix-socket, snapshot create and load across two VMMs,
--config-file, every route in docs/openapi.yaml, and each bad-input case
(invalid JSON, unknown field, wrong type, wrong state, oversize body,
chunked body, slow, half-open and too many clients) while the guest runs on.

    fc_api.py VMM GUEST_DIR OPENAPI_YAML [UFFD_HANDLER]
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

vmm, guests, openapi = (os.path.abspath(a) for a in sys.argv[1:4])
uffd_handler = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
tmp = tempfile.mkdtemp(prefix="vmm-fcapi-")
os.environ["VMM_STATE_DIR"] = os.path.join(tmp, "state")
procs = []
passed = failed = 0


def ok(msg):
    global passed
    passed += 1
    print("ok   " + msg, flush=True)


def bad(msg):
    global failed
    failed += 1
    print("FAIL " + msg, flush=True)


def check(cond, msg, detail=""):
    if cond:
        ok(msg)
    else:
        bad(msg + (": " + str(detail) if detail else ""))
    return cond


def serve(name, *args):
    """Starts `vmm --api-sock` with the console in a file; returns (proc, sock, console)."""
    sock = os.path.join(tmp, name + ".sock")
    console = os.path.join(tmp, name + ".console")
    err = open(os.path.join(tmp, name + ".err"), "w")
    p = subprocess.Popen([vmm, "--api-sock", sock, "--id", name, "--console", "file:" + console, *args],
                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    procs.append(p)
    for _ in range(100):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.05)
    return p, sock, console


def curl(sock, method, path, body=None):
    """curl --unix-socket: returns (status, parsed JSON body or None)."""
    cmd = ["curl", "-s", "--max-time", "20", "--unix-socket", sock, "-X", method,
           "-o", "-", "-w", "\n%{http_code}", "http://localhost" + path,
           "-H", "Accept: application/json"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d",
                body if isinstance(body, str) else json.dumps(body)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    text, _, code = out.rpartition("\n")
    try:
        return int(code), json.loads(text) if text.strip() else None
    except ValueError:
        return int(code or 0), text


def raw(sock, data, read_timeout=10, shutdown=False):
    """Sends bytes on a fresh connection; returns everything read until close or timeout."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(read_timeout)
    s.connect(sock)
    s.sendall(data)
    if shutdown:
        s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    s.close()
    return got


term_bad = []


def exited(proc, secs=10):
    """A VMM that answered a failed PUT /snapshot/load ends, non-zero, as
    Firecracker does (its clients rely on it)."""
    try:
        return proc.wait(secs) != 0
    except subprocess.TimeoutExpired:
        return False


def term(proc, name):
    """SIGTERM to a VMM whose guest runs: 143, or its guest had stopped it
    (a triple fault, a KVM error) before; term_bad collects those."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)
    if proc.returncode != 143:
        term_bad.append((name, proc.returncode))


def wait_for(path, text, secs=10):
    end = time.time() + secs
    while time.time() < end:
        try:
            if text in open(path, errors="replace").read():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def state(sock):
    code, body = curl(sock, "GET", "/")
    return body.get("state") if code == 200 and isinstance(body, dict) else (code, body)


def fault(code, body, want_code, words):
    return code == want_code and isinstance(body, dict) and words in body.get("fault_message", "")


spin = os.path.join(guests, "spin.elf")
disk = os.path.join(tmp, "rootfs.img")
with open(disk, "wb") as f:
    f.truncate(1 << 20)

try:
    # ---- Firecracker's getting-started sequence ----------------------------
    p, sock, console = serve("fca")
    check(state(sock) == "Not started", "GET / before boot: Not started")
    got = raw(sock, b'{"op":"info"}\n')
    check(b'"ok":false' in got and b"not started" in got, "JSON lines before boot: a clear error", got)
    seq = [
        ("PUT", "/boot-source", {"kernel_image_path": spin, "boot_args": "console=ttyS0 reboot=k panic=1"}),
        ("PUT", "/drives/rootfs", {"drive_id": "rootfs", "path_on_host": disk, "is_root_device": True,
                                   "is_read_only": False}),
        ("PUT", "/machine-config", {"vcpu_count": 2, "mem_size_mib": 64}),
        ("PUT", "/vsock", {"guest_cid": 3, "uds_path": os.path.join(tmp, "fca.vsock")}),
        ("PUT", "/fs/share", {"tag": "share", "path_on_host": tmp, "read_only": True}),
        ("PUT", "/actions", {"action_type": "InstanceStart"}),
    ]
    results = [curl(sock, m, path, b) for m, path, b in seq]
    check(all(r == (204, None) for r in results), "getting started: boot-source, drives, machine-config, "
          "vsock, fs, InstanceStart all 204", results)
    check(wait_for(console, "spinning"), "the guest booted through the API runs")
    check(state(sock) == "Running", "GET /: Running")
    link = os.path.join(os.environ["VMM_STATE_DIR"], "fca", "vsock.sock")
    check(os.path.islink(link) and os.readlink(link) == os.path.join(tmp, "fca.vsock"),
          "the folder's vsock.sock leads to PUT /vsock's uds_path (for vmm exec)")
    code, mc = curl(sock, "GET", "/machine-config")
    check(code == 200 and mc.get("vcpu_count") == 2 and mc.get("mem_size_mib") == 64,
          "GET /machine-config after boot: the running VM's", mc)

    # ---- bad input while it runs -------------------------------------------
    code, body = curl(sock, "PUT", "/machine-config", "{\"vcpu_count\": 2,")
    check(fault(code, body, 400, "invalid JSON"), "invalid JSON: 400", (code, body))
    code, body = curl(sock, "PATCH", "/vm", {"state": "Paused", "extra": 1})
    check(fault(code, body, 400, "unknown field `extra`, expected `state`"), "unknown field: 400", (code, body))
    code, body = curl(sock, "PATCH", "/vm", {"state": 1})
    check(fault(code, body, 400, "invalid type: integer `1`"), "wrong type: 400", (code, body))
    code, body = curl(sock, "PATCH", "/vm", {})
    check(fault(code, body, 400, "missing field `state` at line 1 column 2."), "missing field: 400", (code, body))
    code, body = curl(sock, "PUT", "/boot-source", {"kernel_image_path": spin})
    check(fault(code, body, 400, "not supported after starting"), "config after InstanceStart: 400", (code, body))
    code, body = curl(sock, "PUT", "/actions", {"action_type": "InstanceStart"})
    check(fault(code, body, 400, "not supported after starting"), "a second InstanceStart: 400", (code, body))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": os.path.join(tmp, "s0"),
                                                        "mem_file_path": os.path.join(tmp, "s0", "memory")})
    check(fault(code, body, 400, "paused"), "snapshot of a running VM: 400 (pause first)", (code, body))
    code, body = curl(sock, "GET", "/nope")
    check(fault(code, body, 400, "Invalid request method and/or path"), "unknown path: 400", (code, body))
    code, body = curl(sock, "PUT", "/machine-config", "x" * 60000)
    check(fault(code, body, 400, "larger than the limit"), "a 60 KB body: 400 (Firecracker's)", (code, body))
    # PATCH /drives and /network-interfaces on the running VM.
    bigdisk = os.path.join(tmp, "big.img")
    with open(bigdisk, "wb") as f:
        f.truncate(4 << 20)
    code, body = curl(sock, "PATCH", "/drives/rootfs", {"drive_id": "rootfs", "path_on_host": bigdisk,
                                                        "rate_limiter": {"ops": {"size": 1000, "refill_time": 1000}}})
    check(code == 204, "PATCH /drives/rootfs on the running VM: 204", (code, body))
    code, cfg = curl(sock, "GET", "/vm/config")
    check(code == 200 and cfg["drives"][0]["path_on_host"] == bigdisk and
          cfg["drives"][0]["rate_limiter"]["ops"]["size"] == 1000, "GET /vm/config shows the patched drive", cfg)
    code, body = curl(sock, "PATCH", "/drives/nope", {"drive_id": "nope", "path_on_host": bigdisk})
    check(fault(code, body, 400, "Invalid block device ID"), "PATCH of an unknown drive: 400", (code, body))
    code, body = curl(sock, "PATCH", "/drives/rootfs", {"drive_id": "rootfs", "path_on_host": disk})
    check(code == 204, "PATCH /drives/rootfs back to its first file", (code, body))
    # Firecracker's test_api.py: an empty PATCH of a running VM's drive is
    # its vhost-user update, refused for a virtio drive with this text.
    code, body = curl(sock, "PATCH", "/drives/rootfs", {"drive_id": "rootfs"})
    check(fault(code, body, 400, "Running method expected different backend."),
          "an empty PATCH /drives/rootfs on the running VM: 400, Firecracker's words", (code, body))
    got = raw(sock, b"PUT /vm HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 411") and b"Content-Length" in got, "chunked body: 411", got[:60])
    got = raw(sock, b"GET / HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 9000 + b"\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 431"), "9 KB of headers: 431", got[:60])

    # A slow client, a half-open one and 20 idle ones do not hold the VMM.
    slow = socket.socket(socket.AF_UNIX)
    slow.connect(sock)
    slow.sendall(b"PATCH /vm HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
    idle = []
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        idle.append(s)
    t0 = time.time()
    check(state(sock) == "Running", "20 idle connections and a slow one: GET / still answered",
          "%.1f s" % (time.time() - t0))
    half = raw(sock, b"PUT /vm HTTP/1.1\r\nContent-Length: 50\r\n\r\n{", shutdown=True, read_timeout=8)
    check(half == b"", "half-open client with half a request: closed, no reply", half[:80])
    got = raw(sock, b"GET / HTTP/1.1\r\n\r\nGET /version HTTP/1.1\r\n\r\n", shutdown=True, read_timeout=8)
    check(got.count(b"HTTP/1.1 200 OK") == 2, "half-open client with two whole requests: both answered, closed",
          got[:80])
    slow.settimeout(10)
    try:
        got = slow.recv(4096)
    except socket.timeout:
        got = b"(nothing in 10 s)"
    check(got.startswith(b"HTTP/1.1 408"), "slow client: 408 after 5 s", got[:60])
    slow.close()
    for s in idle:
        s.close()

    # Keep-alive, pipelining and Expect: 100-continue on one connection.
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sock)
    replies = b""
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    replies += s.recv(4096)
    s.sendall(b"GET /machine-config HTTP/1.1\r\n\r\nGET /version HTTP/1.1\r\n\r\n")
    time.sleep(0.3)
    replies += s.recv(8192)
    s.sendall(b"PATCH /vm HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 20\r\n\r\n")
    cont = s.recv(4096)
    s.sendall(b'{"state": "Resumed"}')
    last = s.recv(4096)
    s.close()
    check(replies.count(b"HTTP/1.1 200 OK") == 3, "keep-alive and pipelining: 3 replies on one connection",
          replies.count(b"HTTP/1.1 200"))
    check(cont.startswith(b"HTTP/1.1 100 Continue") and last.startswith(b"HTTP/1.1 204"),
          "Expect: 100-continue: 100, then 204", (cont[:30], last[:30]))

    # The JSON lines of the vmm CLI on the same socket.
    got = raw(sock, b'{"op":"info"}\n')
    check(b'"ok":true' in got and b'"state":"running"' in got, "JSON lines still served on the same socket", got)

    check(p.poll() is None and state(sock) == "Running", "after every bad input the VMM serves, the guest runs")

    # ---- pause, snapshot, resume ------------------------------------------
    snap = os.path.join(tmp, "snap")
    check(curl(sock, "PATCH", "/vm", {"state": "Paused"}) == (204, None) and state(sock) == "Paused",
          "PATCH /vm Paused: GET / says Paused")
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_type": "Full", "snapshot_path": snap,
                                                        "mem_file_path": os.path.join(tmp, "snap.mem")})
    check(code == 204 and os.path.isfile(os.path.join(snap, "state")) and
          os.path.realpath(os.path.join(tmp, "snap.mem")) == os.path.realpath(os.path.join(snap, "memory")),
          "PUT /snapshot/create: the directory, mem_file_path a link to its memory", (code, body))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": snap, "mem_file_path": snap + "/memory"})
    check(code == 204 and os.path.isfile(os.path.join(snap, "state")), "snapshot over an existing one: "
          "overwritten, as Firecracker does", (code, body))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": snap, "mem_file_path": os.path.join(tmp, "snap.mem")})
    check(code == 204 and os.path.realpath(os.path.join(tmp, "snap.mem")) == os.path.realpath(os.path.join(snap, "memory")),
          "and again, the memory link replaced", (code, body))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": tmp, "mem_file_path": snap + "/memory"})
    check(fault(code, body, 400, "not a snapshot") and not glob.glob(tmp + ".new-*"),
          "a directory that is not a snapshot is not overwritten, nothing left beside it",
          (code, body, glob.glob(tmp + ".new-*")))
    # A 'state' file is not enough: every entry must be a snapshot's, checked before anything is written.
    notsnap = os.path.join(tmp, "notsnap")
    os.mkdir(notsnap)
    for name in ("state", "memory", "notes.txt"):
        with open(os.path.join(notsnap, name), "w") as f:
            f.write("keep " + name)
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": notsnap, "mem_file_path": snap + "/memory"})
    kept = sorted((n, open(os.path.join(notsnap, n)).read()) for n in os.listdir(notsnap))
    check(fault(code, body, 400, "not a snapshot") and kept == [(n, "keep " + n) for n in ("memory", "notes.txt", "state")]
          and not glob.glob(notsnap + ".new-*"),
          "a directory with a state file and other files: refused, its files untouched, nothing beside it",
          (code, body, kept, glob.glob(notsnap + ".new-*")))
    os.mkdir(os.path.join(tmp, "memdir"))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": os.path.join(tmp, "snap2"),
                                                        "mem_file_path": os.path.join(tmp, "memdir")})
    check(fault(code, body, 400, "is a directory") and not glob.glob(os.path.join(tmp, "snap2*")),
          "mem_file_path a directory: refused before the snapshot is written", (code, body, glob.glob(tmp + "/snap2*")))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_path": snap + "/", "mem_file_path": snap + "/memory"})
    check(code == 204 and "state" in os.listdir(snap) and not glob.glob(snap + ".new-*") and
          all(re.fullmatch(r"state|memory|vm-config\.json|disk[0-9]+", n) for n in os.listdir(snap)),
          "snapshot_path with a trailing slash: overwritten in place", (code, body, os.listdir(snap)))
    code, body = curl(sock, "PUT", "/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": snap + "-d",
                                                        "mem_file_path": snap + "-d.mem"})
    check(fault(code, body, 400, "track_dirty_pages") and not os.path.exists(snap + "-d"),
          "a Diff snapshot without track_dirty_pages: 400, nothing written", (code, body))
    check(curl(sock, "PATCH", "/vm", {"state": "Resumed"}) == (204, None) and state(sock) == "Running",
          "PATCH /vm Resumed: Running")

    # ---- a second VMM loads it -----------------------------------------------
    p2, sock2, _ = serve("fcb")
    code, body = curl(sock2, "PUT", "/snapshot/load", {"snapshot_path": snap,
                                                       "mem_file_path": os.path.join(tmp, "other.mem")})
    check(fault(code, body, 400, "memory file must be the snapshot's own") and exited(p2),
          "load with another memory file: 400, then the VMM exits", (code, body))
    p2, sock2, _ = serve("fcb2")
    badsnap = os.path.join(tmp, "badsnap")
    shutil.copytree(snap, badsnap, symlinks=True)
    with open(os.path.join(badsnap, "state"), "r+b") as f:
        f.truncate(100)
    code, body = curl(sock2, "PUT", "/snapshot/load", {"snapshot_path": badsnap,
                                                       "mem_file_path": badsnap + "/memory"})
    check(fault(code, body, 400, "cannot be loaded") and exited(p2),
          "load of a truncated snapshot: 400, then the VMM exits", (code, body))
    p2, sock2, _ = serve("fcb3")
    t0 = time.time()
    code, body = curl(sock2, "PUT", "/snapshot/load", {"snapshot_path": snap, "resume_vm": True,
                                                       "mem_backend": {"backend_type": "File",
                                                                       "backend_path": os.path.join(tmp, "snap.mem")}})
    check(code == 204 and state(sock2) == "Running", "PUT /snapshot/load resume_vm: Running (%.2f s)"
          % (time.time() - t0), (code, body))
    code, body = curl(sock2, "PUT", "/snapshot/load", {"snapshot_path": snap, "mem_file_path": snap + "/memory"})
    check(fault(code, body, 400, "not allowed"), "a second load: 400", (code, body))
    code, mc = curl(sock2, "GET", "/machine-config")
    check(code == 200 and mc.get("vcpu_count") == 2, "the clone has the snapshot's 2 vCPUs", mc)
    p3, sock3, _ = serve("fcc")
    code, body = curl(sock3, "PUT", "/snapshot/load", {"snapshot_path": snap, "mem_file_path": snap + "/memory",
                                                       "track_dirty_pages": True, "clock_realtime": True,
                                                       "vsock_override": {"uds_path": os.path.join(tmp, "fcc.vsock")}})
    check(code == 204 and state(sock3) == "Paused", "load without resume_vm (vsock_override, track_dirty_pages, "
          "clock_realtime): Paused", (code, body, state(sock3)))
    check(os.path.exists(os.path.join(tmp, "fcc.vsock")), "vsock_override: the clone listens on the new socket")
    check(curl(sock3, "PATCH", "/vm", {"state": "Resumed"}) == (204, None) and state(sock3) == "Running",
          "then PATCH /vm Resumed: Running")
    # track_dirty_pages on load: a Diff snapshot holds the pages written since, layered on `snap`.
    dsnap = os.path.join(tmp, "dsnap")
    check(curl(sock3, "PATCH", "/vm", {"state": "Paused"}) == (204, None), "the clone paused for a Diff")
    code, body = curl(sock3, "PUT", "/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": snap,
                                                         "mem_file_path": snap + "/memory"})
    check(fault(code, body, 400, "layered on"), "a Diff over its own base: 400", (code, body))
    code, body = curl(sock3, "PUT", "/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": dsnap,
                                                         "mem_file_path": os.path.join(tmp, "dsnap.mem")})
    dmem = os.path.join(dsnap, "memory")
    check(code == 204 and os.path.getsize(dmem) == os.path.getsize(os.path.join(snap, "memory")) and
          os.stat(dmem).st_blocks * 512 < os.stat(os.path.join(snap, "memory")).st_blocks * 512,
          "PUT /snapshot/create Diff: a memory file of the full size holding only the dirtied pages "
          "(%d of %d bytes allocated)" % (os.stat(dmem).st_blocks * 512, os.stat(os.path.join(snap, "memory")).st_blocks * 512),
          (code, body))
    p4, sock4, _ = serve("fcd")
    code, body = curl(sock4, "PUT", "/snapshot/load", {"snapshot_path": dsnap, "resume_vm": True,
                                                       "mem_file_path": os.path.join(tmp, "dsnap.mem")})
    check(code == 204 and state(sock4) == "Running", "PUT /snapshot/load of the Diff (merged with its base): Running",
          (code, body))
    for proc in (p2, p3, p4):
        term(proc, "fcb/fcc/fcd (loaded snapshots)")

    # ---- PUT /snapshot/load with a Uffd memory backend (a page-fault handler) ----------
    # A guest that counts in memory and prints each count is snapshotted while it runs;
    # another VMM loads it with mem_backend Uffd: tests/uffd's handler gets the regions
    # and the userfaultfd over its socket and serves every page from the memory file.
    ticks = lambda path: [int(x, 16) for x in re.findall(r"tick ([0-9a-f]{8})\n", open(path, errors="replace").read())]
    pt, sockt, consolet = serve("fcu0")
    res = [curl(sockt, m, path, b) for m, path, b in (
        ("PUT", "/boot-source", {"kernel_image_path": os.path.join(guests, "tick.elf"), "boot_args": "console=ttyS0"}),
        ("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64}),
        ("PUT", "/actions", {"action_type": "InstanceStart"}))]
    usnap = os.path.join(tmp, "usnap")
    wait_for(consolet, "tick 00000003", 30)
    res += [curl(sockt, "PATCH", "/vm", {"state": "Paused"}),
            curl(sockt, "PUT", "/snapshot/create", {"snapshot_path": usnap, "mem_file_path": usnap + "/memory"})]
    before = ticks(consolet)
    check(all(r == (204, None) for r in res) and len(before) >= 3, "a ticking guest paused and snapshotted "
          "(last tick %s)" % (before[-1:] or None), (res, before[-3:]))
    term(pt, "fcu0 (ticking guest)")
    pu, socku, consoleu = serve("fcu")
    nosock = os.path.join(tmp, "nohandler.sock")
    code, body = curl(socku, "PUT", "/snapshot/load", {"snapshot_path": usnap, "resume_vm": True,
                                                       "mem_backend": {"backend_type": "Uffd", "backend_path": nosock}})
    if "Failed to UFFD object" in str(body) or uffd_handler is None:
        print("skip fc-api Uffd: %s" % ("no handler given" if uffd_handler is None else body))
    elif check(fault(code, body, 400, "Error creating guest memory from uffd: Failed to connect to UDS Unix "
                     "stream: No such file or directory") and exited(pu),
               "Uffd with no handler at backend_path: 400 with Firecracker's words, then the VMM exits", (code, body)):
        pu, socku, consoleu = serve("fcu2")
        hsock, hout = os.path.join(tmp, "uffd.sock"), os.path.join(tmp, "uffd_handler.err")
        code, body = curl(socku, "PUT", "/snapshot/load", {"snapshot_path": dsnap, "mem_backend": {
            "backend_type": "Uffd", "backend_path": hsock}})
        check(fault(code, body, 400, "is a Diff snapshot") and exited(pu),
              "Uffd with a Diff snapshot (its memory file holds only its own pages): 400, flatten it first; "
              "the VMM exits", (code, body))
        pu, socku, consoleu = serve("fcu3")
        ph = subprocess.Popen([uffd_handler, hsock, usnap + "/memory"], stdin=subprocess.DEVNULL,
                              stdout=open(hout, "w"), stderr=subprocess.STDOUT)
        procs.append(ph)
        wait_for(hout, "listening")
        t0 = time.time()
        code, body = curl(socku, "PUT", "/snapshot/load", {"snapshot_path": usnap, "resume_vm": True,
                                                           "mem_backend": {"backend_type": "Uffd",
                                                                           "backend_path": hsock}})
        check(code == 204 and state(socku) == "Running" and "mappings: 1 regions, 67108864 bytes" in
              open(hout).read(), "PUT /snapshot/load with mem_backend Uffd: Running, the handler has the "
              "64 MiB region (%.2f s)" % (time.time() - t0), (code, body, open(hout).read()))
        wait_for(consoleu, "tick ", 30)
        time.sleep(0.5)
        after = ticks(consoleu)
        check(before and len(after) >= 2 and after[0] in (before[-1] + 1, before[-1] + 2) and
              after == list(range(after[0], after[0] + len(after))),
              "the loaded guest ticks on from its snapshot's count (%s, then %s)" % (before[-1:], after[:3]),
              (before[-3:], after[:5]))
        term(pu, "fcu (Uffd)")
        try:
            ph.wait(10)
        except subprocess.TimeoutExpired:
            pass
        out = open(hout).read()
        m = re.search(r"served (\d+) pages", out)
        check(ph.returncode == 0 and m and int(m.group(1)) > 0, "the handler served the guest's pages and left "
              "when the VMM did (%s)" % (m.group(0) if m else None), (ph.returncode, out[-300:]))

    # ---- every documented route answers -----------------------------------------
    routes, path = [], None
    for line in open(openapi):
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    (get|put|patch|post|delete):\s*$", line)
        if m and path:
            routes.append((m.group(1).upper(), path))
        if re.match(r"^\S", line) and not line.startswith("paths:"):
            path = None
    check(len(routes) >= 14, "docs/openapi.yaml: %d routes found" % len(routes), routes)
    p4, sock4, _ = serve("fcd")
    for phase, s in (("before boot", sock4), ("running", sock)):
        missing = []
        for method, route in routes:
            target = re.sub(r"\{[^}]*\}", "x", route)
            code, body = curl(s, method, target, None if method == "GET" else {})
            if code not in (200, 204, 400) or (isinstance(body, dict) and
                                               "Invalid request method" in body.get("fault_message", "")):
                missing.append((method, route, code, body))
        check(not missing, "every documented route answers (%s)" % phase, missing)
    code, body = curl(sock4, "PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": "vmmtap0",
                                                                  "guest_mac": "06:00:ac:10:00:02"})
    check(code == 204, "PUT /network-interfaces before boot: 204", (code, body))
    code, body = curl(sock4, "PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": "a/b"})
    check(fault(code, body, 400, "host_dev_name"), "a bad TAP name: 400", (code, body))
    code, body = curl(sock4, "PUT", "/undocumented", {})
    check(fault(code, body, 400, "Invalid request method"), "an undocumented route does not")
    p4.send_signal(signal.SIGTERM)
    p4.wait(10)
    check(p4.returncode == 0 and not os.path.exists(sock4), "SIGTERM before boot: exit 0, socket removed",
          (p4.returncode, os.path.exists(sock4)))

    # ---- InstanceStart with a request pipelined behind it --------------------------------
    p6, sock6, console6 = serve("fcf")
    curl(sock6, "PUT", "/boot-source", {"kernel_image_path": spin})
    curl(sock6, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    start = b'{"action_type": "InstanceStart"}'
    got = raw(sock6, b"PUT /actions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%sGET / HTTP/1.1\r\n"
              b"Connection: close\r\n\r\n" % (len(start), start))
    check(got.startswith(b"HTTP/1.1 204") and b"HTTP/1.1 200" in got and b'"state":"Running"' in got,
          "InstanceStart with GET / pipelined behind it: 204, then 200 Running", got[:200])
    term(p6, "fcf (InstanceStart)")

    # ---- SIGTERM while InstanceStart builds the VM -------------------------------------
    # InstanceStart taken, the VM being built (here stalled opening a console FIFO that has no
    # reader yet), vm_run not running: a SIGTERM must wait for vm_run and stop the VM in order
    # (143, the sandbox's folder removed), not kill the VMM by its default action.
    fifo = os.path.join(tmp, "fcg.fifo")
    os.mkfifo(fifo)
    sock7 = os.path.join(tmp, "fcg.sock")
    err7 = open(os.path.join(tmp, "fcg.err"), "w")
    p7 = subprocess.Popen([vmm, "--api-sock", sock7, "--id", "fcg", "--console", "file:" + fifo],
                          stdin=subprocess.DEVNULL, stdout=err7, stderr=err7)
    procs.append(p7)
    for _ in range(200):
        if os.path.exists(sock7) or p7.poll() is not None:
            break
        time.sleep(0.05)
    curl(sock7, "PUT", "/boot-source", {"kernel_image_path": spin})
    curl(sock7, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    s7 = socket.socket(socket.AF_UNIX)
    s7.connect(sock7)
    s7.sendall(b"PUT /actions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(start), start))

    def in_fifo_open(pid):
        try:
            return (open("/proc/%d/wchan" % pid).read() in ("wait_for_partner", "fifo_open") or
                    open("/proc/%d/syscall" % pid).read().startswith("257 "))  # openat
        except OSError:
            return False
    stalled = 0
    for _ in range(400):
        stalled = stalled + 1 if in_fifo_open(p7.pid) else 0
        if stalled == 3 or p7.poll() is not None:
            break
        time.sleep(0.05)
    p7.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the console open goes on
    try:
        p7.wait(30)
    except subprocess.TimeoutExpired:
        pass
    os.close(rd)
    s7.close()
    folder7 = os.path.join(os.environ["VMM_STATE_DIR"], "fcg")
    check(stalled == 3 and p7.returncode == 143 and not os.path.exists(folder7),
          "SIGTERM while InstanceStart builds the VM: the VM stops in order (143, folder removed)",
          (stalled, p7.returncode, os.path.exists(folder7)))

    # ---- PUT /serial and PUT /cpu-config ------------------------------------------------
    serial_out = os.path.join(tmp, "serial.out")
    p7, sock7, _ = serve("fcg")
    tmpl = {"cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                                 "modifiers": [{"register": "ecx", "bitmap": "0bxx0" + "x" * 29}]}],
            "msr_modifiers": [{"addr": "0x1a0", "bitmap": "0bx"}]}
    res = [curl(sock7, m, path, b) for m, path, b in (
        ("PUT", "/boot-source", {"kernel_image_path": spin, "boot_args": "console=ttyS0"}),
        ("PUT", "/serial", {"serial_out_path": serial_out}),
        ("PUT", "/cpu-config", tmpl),
        ("PUT", "/actions", {"action_type": "InstanceStart"}))]
    check(all(r == (204, None) for r in res), "PUT /serial, PUT /cpu-config (a CPUID leaf, an MSR), InstanceStart: "
          "204", res)
    check(wait_for(serial_out, "spinning"), "the guest's serial output goes to serial_out_path")
    code, body = curl(sock7, "PUT", "/serial", {"serial_out_path": serial_out})
    check(fault(code, body, 400, "not supported after starting"), "PUT /serial after the start: 400", (code, body))
    term(p7, "fcg (serial, cpu-config)")
    p8, sock8, _ = serve("fch")
    res = [curl(sock8, m, path, b) for m, path, b in (
        ("PUT", "/boot-source", {"kernel_image_path": spin, "boot_args": "console=ttyS0"}),
        ("PUT", "/cpu-config", {"cpuid_modifiers": [{"leaf": "0x4fffff00", "subleaf": "0x0", "flags": 0,
                                                     "modifiers": []}]}))]
    code, body = curl(sock8, "PUT", "/actions", {"action_type": "InstanceStart"})
    check(res == [(204, None)] * 2 and fault(code, body, 400, "Template changes a CPUID entry not supported by KVM: "
                                              "Leaf: 4fffff00, Subleaf: 0"),
          "a CPUID leaf KVM does not offer: InstanceStart 400 with Firecracker's words", (res, code, body))
    try:
        p8.wait(15)
    except subprocess.TimeoutExpired:
        term(p8, "fch (refused template)")

    # ---- --config-file ---------------------------------------------------------------
    cfgf = os.path.join(tmp, "vm.json")
    with open(cfgf, "w") as f:
        json.dump({"boot-source": {"kernel_image_path": spin, "boot_args": "console=ttyS0"},
                   "drives": [{"drive_id": "rootfs", "path_on_host": disk, "is_root_device": True,
                               "is_read_only": True}],
                   "machine-config": {"vcpu_count": 1, "mem_size_mib": 64},
                   "network-interfaces": []}, f)
    p5, sock5, console5 = serve("fce", "--config-file", cfgf)
    check(wait_for(console5, "spinning") and state(sock5) == "Running", "--config-file boots without API calls")
    term(p5, "fce (--config-file)")
    with open(cfgf, "w") as f:
        # "logger", once refused, is supported now (the VM would spin on): MMDS is not yet.
        json.dump({"boot-source": {"kernel_image_path": spin}, "mmds-config": {"network_interfaces": ["eth0"]}}, f)
    try:
        r = subprocess.run([vmm, "--config-file", cfgf, "--console", "none"], capture_output=True, text=True,
                           timeout=30)
        got = (r.returncode, r.stderr[-200:])
    except subprocess.TimeoutExpired as e:
        r, got = None, ("still running after 30 s: the section was accepted", e.stderr)
    check(r is not None and r.returncode == 1 and "mmds-config" in r.stderr,
          "--config-file with an unsupported section: exit 1, named", got)

    # ---- a vmm run sandbox answers curl on its control.sock ----------------------------
    err = open(os.path.join(tmp, "run.err"), "w")
    prun = subprocess.Popen([vmm, "run", "--name", "fcrun", "--kernel", spin, "--mem", "64", "--console",
                             "file:" + os.path.join(tmp, "run.console")], stdin=subprocess.DEVNULL,
                            stdout=err, stderr=err)
    procs.append(prun)
    ctl = os.path.join(os.environ["VMM_STATE_DIR"], "fcrun", "control.sock")
    wait_for(os.path.join(tmp, "run.console"), "spinning")
    code, body = curl(ctl, "GET", "/")
    check(code == 200 and body.get("id") == "fcrun" and body.get("state") == "Running",
          "vmm run: curl --unix-socket control.sock http://localhost/", (code, body))
    term(prun, "fcrun (vmm run)")
    check(not term_bad, "every running VMM stopped on SIGTERM with 143: no guest died before (4: triple fault, "
          "5: KVM error, 3: reset)", term_bad)

    p.send_signal(signal.SIGTERM)
    p.wait(10)
    check(p.returncode == 143, "the API-booted VMM stops on SIGTERM (status 143)", p.returncode)
finally:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if failed:
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".err"):
                print("     --- %s:" % name)
                print("     | " + open(os.path.join(tmp, name)).read()[-600:].replace("\n", "\n     | "))
    shutil.rmtree(tmp, ignore_errors=True)

print("fc-api: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
