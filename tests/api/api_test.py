#!/usr/bin/env python3
"""The sandbox API end to end, through the real `vmm exec` / `vmm cp` and
raw frames: against the host build of guest-init (fast, every `make test`)
or a real sandbox (e2e).

  api_test.py VMM SOCKET PORT TOKEN [--scale small|full] [--console FILE]

PORT 0 means SOCKET is the API itself (guest-init --serve-unix); otherwise
the vsock "CONNECT PORT" handshake is done. With --console (a real guest's
console file), a check fails when the console gained a crash line
(tests/e2e/guest-crash.re) while it ran, whatever its own verdict.
Prints ok/FAIL lines and "api: N passed, M failed"."""
import hashlib
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from console_scan import Console

vmm, sock, port, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
full = "--scale" in sys.argv and sys.argv[sys.argv.index("--scale") + 1] == "full"
console = Console(sys.argv[sys.argv.index("--console") + 1]) if "--console" in sys.argv else None
passed = failed = 0
env = dict(os.environ, VMM_API_PORT=str(port), VMM_TOKEN=token)


def crashed(final=False):
    """The guest's crash lines since the previous check (--console)."""
    lines = console.scan(final) if console else []
    return "".join(f"\n     | {line}" for line in lines[:8])


def ok(m):
    global passed
    crash = crashed()
    if crash:
        bad(f"{m} (its own test passed): the guest crashed during this check:{crash}", scanned=True)
        return
    passed += 1
    print(f"ok   {m}", flush=True)


def bad(m, scanned=False):
    global failed
    failed += 1
    crash = "" if scanned else crashed()
    print(f"FAIL {m}" + (f"; the guest crashed during this check:{crash}" if crash else ""), flush=True)


def vx(args, stdin=None, timeout=300):
    return subprocess.run([vmm, "exec", sock, "--"] + args, input=stdin, capture_output=True,
                          env=env, timeout=timeout)


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock)
    if port:
        s.sendall(f"CONNECT {port}\n".encode())
        line = b""
        while not line.endswith(b"\n"):
            line += s.recv(1)
        assert line.startswith(b"OK "), line
    return s


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


def check(name, cond, detail=""):
    (ok if cond else bad)(name + ("" if cond else f": {detail}"))


def vmm_cmd(args, timeout=60, **kw):
    return subprocess.run([vmm] + args, capture_output=True, env=env, timeout=timeout, **kw)


def v2_checks():
    """API version 2 through the real CLI: detached processes and watch."""
    r = vmm_cmd(["exec", "-d", "--tag", "clock", sock, "--", "sh", "-c", "while :; do date; sleep 1; done"])
    pid_id = r.stdout.strip().decode()
    check("v2: vmm exec -d prints the process id and returns at once", r.returncode == 0 and pid_id.isdigit(), r)
    time.sleep(2.5)  # the client is long gone: the process must still run
    r = vmm_cmd(["top", sock])
    line = [l for l in r.stdout.decode().splitlines() if l.split()[:1] == [pid_id]]
    check("v2: vmm top lists it, running, after the client exited",
          r.returncode == 0 and line and "clock" in line[0] and "running" in line[0] and "while" in line[0], r)
    r = vmm_cmd(["top", "--json", sock])
    check("v2: vmm top --json", r.returncode == 0 and b'"processes":[' in r.stdout and b'"tag":"clock"' in r.stdout, r)
    # Counted in lines, not seconds (a loaded host runs the loop slower):
    # what was kept before attaching, then two more that come live.
    kept = []
    for _ in range(600):
        kept = vmm_cmd(["logs", "--process", pid_id, sock]).stdout.splitlines()
        if len(kept) >= 2:
            break
        time.sleep(0.1)
    p = subprocess.Popen([vmm, "attach", sock, pid_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    got, deadline = b"", time.time() + 120
    while got.count(b"\n") < len(kept) + 2 and time.time() < deadline:
        r_, _, _ = select.select([p.stdout], [], [], 1)
        if r_:
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            got += chunk
    p.send_signal(2)  # Ctrl-C leaves the process running
    out, err = p.communicate(timeout=30)
    lines = (got + out).decode().splitlines()
    check("v2: vmm attach replays the kept output and follows live lines",
          len(kept) >= 2 and lines[:len(kept)] == [k.decode() for k in kept] and len(lines) >= len(kept) + 2
          and len(set(lines)) == len(lines), (kept, lines, err))
    r = vmm_cmd(["top", "--json", sock])
    check("v2: leaving attach (Ctrl-C) leaves the process running", b'"state":"running"' in r.stdout, r.stdout)
    r = vmm_cmd(["logs", "--process", "clock", sock])
    check("v2: vmm logs --process prints the kept output",
          r.returncode == 0 and len(r.stdout.splitlines()) >= len(kept) + 2, r)
    f = subprocess.Popen([vmm, "logs", "-f", "--process", pid_id, sock], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    time.sleep(1)
    r = vmm_cmd(["kill", sock, pid_id])
    check("v2: vmm kill", r.returncode == 0, r)
    try:
        out, err = f.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        f.kill()
        out, err = f.communicate()
    check("v2: vmm logs -f ends with the process, with its status (SIGTERM: 143)", f.returncode == 143, (f.returncode, err))
    r = vmm_cmd(["top", "--json", sock])
    check("v2: its exit status is kept", b'"state":"exited"' in r.stdout and b'"signal":15' in r.stdout, r.stdout)
    r = vmm_cmd(["attach", sock, pid_id])
    check("v2: attach to a finished process: a clear error", r.returncode != 0 and b"has exited" in r.stderr, r)
    r = vmm_cmd(["attach", sock, "999999"])
    check("v2: attach to an unknown process: a clear error", r.returncode != 0 and b"ESRCH" in r.stderr, r)
    r = vmm_cmd(["kill", sock, "no-such-tag"])
    check("v2: kill of an unknown tag: a clear error", r.returncode != 0 and b"ESRCH" in r.stderr, r)
    # stdin through attach -i, and the exit status through attach
    r = vmm_cmd(["exec", "-d", "-i", sock, "--", "sh", "-c", "read x; echo got-$x; exit 7"])
    cat_id = r.stdout.strip().decode()
    r = vmm_cmd(["attach", "-i", sock, cat_id], input=b"hello\n")
    check("v2: vmm attach -i passes stdin and exits with the process's status",
          r.stdout == b"got-hello\n" and r.returncode == 7, r)
    # watch: a file created by a second exec
    with tempfile.TemporaryDirectory() as d:
        wdir = "/tmp/vmm-watch-test"
        vx(["sh", "-c", f"rm -rf {wdir}; mkdir -p {wdir}"])
        w = subprocess.Popen([vmm, "watch", "--recursive", "--json", sock, wdir], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        time.sleep(1)
        # The new directory gets its watch when its create event is read:
        # what happens in it before that is reported by the scan as a
        # create, not as the rename itself, so the rename waits a moment.
        vx(["sh", "-c", f"mkdir -p {wdir}/sub"])
        time.sleep(1)
        vx(["sh", "-c", f"echo hi > {wdir}/sub/new.txt && mv {wdir}/sub/new.txt {wdir}/moved.txt"])
        time.sleep(1.5)
        w.terminate()
        out, err = w.communicate(timeout=30)
        evs = [l for l in out.decode().splitlines() if l]
        check("v2: vmm watch sees a file created by another exec (recursive, rename paired)",
              f'"type":"create","path":"{wdir}/sub/new.txt"' in out.decode() and
              f'"type":"rename","path":"{wdir}/sub/new.txt","to":"{wdir}/moved.txt"' in out.decode(), (evs, err))
        r = vmm_cmd(["watch", sock, "/no/such/dir"])
        check("v2: watch on a missing path: a clear error", r.returncode != 0 and b"ENOENT" in r.stderr, r)
    # files: ranges, owners, many stats (raw frames)
    vx(["sh", "-c", "printf 0123456789 > /tmp/v2-range"])
    s = connect()
    s.sendall(frame(1, b'{"v":2,"op":"read","path":"/tmp/v2-range","offset":3,"length":4,"token":' + f'"{token}"'.encode() + b"}"))
    t, meta = read_frame(s)
    data = b""
    while True:
        t, body = read_frame(s)
        if t != 6:
            break
        data += body
    check("v2: read with offset/length", data == b"3456" and t == 7, (data, t))
    s.close()
    s = connect()
    s.sendall(frame(1, b'{"v":2,"op":"stat","paths":["/tmp/v2-range","/no/such"],"token":' + f'"{token}"'.encode() + b"}"))
    t, body = read_frame(s)
    check("v2: stat of many paths", t == 19 and b'"size":10' in body and b'"error":"ENOENT"' in body, body)
    s.close()
    uid = os.getuid()
    s = connect()
    s.sendall(frame(1, b'{"v":2,"op":"write","path":"/tmp/v2-owned","mode":384,"uid":' + str(uid).encode() +
                    b',"gid":' + str(os.getgid()).encode() + b',"token":' + f'"{token}"'.encode() + b"}"))
    s.sendall(frame(6, b"x") + frame(7))
    t, body = read_frame(s)
    r = vx(["stat", "-c", "%a %u", "/tmp/v2-owned"])
    check("v2: write with mode and uid/gid", t == 19 and r.stdout == f"600 {uid}\n".encode(), (body, r.stdout))
    s.close()
    s = connect()
    s.sendall(frame(1, b'{"v":2,"op":"write","path":"/tmp/v2-x","user":"no-such-user-xyz","token":' + f'"{token}"'.encode() + b"}"))
    t, body = read_frame(s)
    check("v2: write for an unknown user: a clear error", t == 20 and b"ENOENT" in body and b"user" in body, body)
    s.close()
    s = connect()
    s.sendall(frame(1, b'{"v":1,"op":"attach","id":1,"token":' + f'"{token}"'.encode() + b"}"))
    t, body = read_frame(s)
    check("v2: a version 2 op in a version 1 request: EINVAL", t == 20 and b"EINVAL" in body, body)
    s.close()


def main():
    # exec basics
    r = vx(["echo", "hello"])
    check("exec: echo hello", r.returncode == 0 and r.stdout == b"hello\n", r)
    codes = range(0, 256) if full else (0, 1, 2, 42, 127, 128, 200, 255)
    wrong = [c for c in codes if vx(["sh", "-c", f"exit {c}"]).returncode != c]
    check(f"exec: exit codes propagate ({len(codes)} values)", not wrong, f"wrong: {wrong[:5]}")
    r = vx(["sh", "-c", "kill -TERM $$"])
    check("exec: death by SIGTERM -> 143", r.returncode == 143, r.returncode)
    r = vx(["sh", "-c", "kill -KILL $$"])
    check("exec: death by SIGKILL -> 137", r.returncode == 137, r.returncode)
    r = vx(["sh", "-c", "kill -SEGV $$"])
    check("exec: death by SIGSEGV -> 139, and vmm exec says so on stderr",
          r.returncode == 139 and b"crashed in the guest: SIGSEGV (signal 11" in r.stderr, r)
    r = vx(["sh", "-c", "echo out; echo err >&2"])
    check("exec: stdout and stderr kept apart", r.stdout == b"out\n" and r.stderr.endswith(b"err\n"), r)
    r = vx(["no-such-command-xyz"])
    check("exec: a missing command -> 127 with a message", r.returncode == 127 and b"not found" in r.stderr, r)
    # stdin passthrough
    data = os.urandom(1 << 20)
    r = vx(["sha256sum"], stdin=data)
    check("exec: 1 MiB of stdin passed through", r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest(), r.stdout[:80])
    # timeout
    t0 = time.monotonic()
    r = subprocess.run([vmm, "exec", "--timeout", "1", sock, "--", "sleep", "60"], capture_output=True, env=env)
    check("exec: a command past its timeout is killed", r.returncode == 137 and time.monotonic() - t0 < 30,
          f"{r.returncode} after {time.monotonic() - t0:.1f}s")
    # env and cwd
    r = subprocess.run([vmm, "exec", "-e", "FOO=bar baz", "-w", "/tmp", sock, "--", "sh", "-c", "echo $FOO; pwd"],
                       capture_output=True, env=env)
    check("exec: --env and --cwd", r.stdout == b"bar baz\n/tmp\n", r.stdout)
    # pty
    r = subprocess.run([vmm, "exec", "-t", sock, "--", "sh", "-c", "tty; stty size"], capture_output=True,
                       env=env, stdin=subprocess.DEVNULL)
    check("exec: -t gives a pty", b"/dev/pts/" in r.stdout and r.returncode == 0, r.stdout)
    # signals forwarded
    p = subprocess.Popen([vmm, "exec", "-n", sock, "--", "sh", "-c", "trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.1; done"],
                         stdout=subprocess.PIPE, env=env)
    line = p.stdout.readline()
    p.send_signal(2)
    out = p.stdout.read()
    p.wait(60)
    check("exec: Ctrl-C (SIGINT) reaches the command", line == b"ready\n" and b"got-int" in out and p.returncode == 3,
          (line, out, p.returncode))
    # concurrency
    res = [None] * 20

    def one(i):
        res[i] = vx(["sh", "-c", f"echo job-{i}"])
    ts = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("exec: 20 concurrent commands", all(r and r.stdout == f"job-{i}\n".encode() for i, r in enumerate(res)),
          [r.stdout for r in res if r][:3])
    # files: a 32 MiB binary file both ways, and a tree
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "big.bin")
        size = 32 << 20
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        h = hashlib.sha256(open(src, "rb").read()).hexdigest()
        r = subprocess.run([vmm, "cp", src, f"{sock}:/tmp/cp/in/big.bin"], capture_output=True, env=env)
        r2 = vx(["sha256sum", "/tmp/cp/in/big.bin"])
        check(f"cp: {size >> 20} MiB file into the sandbox, same checksum",
              r.returncode == 0 and r2.stdout.split()[:1] == [h.encode()], (r.stderr, r2.stdout))
        # 10 MiB of binary output, byte-exact (the file just copied in:
        # generating random bytes in an emulated guest kernel is slow)
        n = 10 << 20
        r = vx(["head", "-c", str(n), "/tmp/cp/in/big.bin"])
        want = open(src, "rb").read(n)
        check("exec: 10 MiB of binary output byte-exact", r.stdout == want, f"{len(r.stdout)} bytes")
        back = os.path.join(d, "back.bin")
        r = subprocess.run([vmm, "cp", f"{sock}:/tmp/cp/in/big.bin", back], capture_output=True, env=env)
        check(f"cp: {size >> 20} MiB file out of the sandbox, same checksum",
              r.returncode == 0 and hashlib.sha256(open(back, "rb").read()).hexdigest() == h, r.stderr)
        tree = os.path.join(d, "tree")
        os.makedirs(os.path.join(tree, "a/b"))
        open(os.path.join(tree, "a/b/c.txt"), "w").write("deep\n")
        open(os.path.join(tree, "top.txt"), "w").write("top\n")
        vx(["rm", "-rf", "/tmp/cp/tree"])  # a new DST is the copy (an existing one would get DST/tree)
        r = subprocess.run([vmm, "cp", tree, f"{sock}:/tmp/cp/tree"], capture_output=True, env=env)
        r2 = vx(["cat", "/tmp/cp/tree/a/b/c.txt", "/tmp/cp/tree/top.txt"])
        check("cp: a directory tree into the sandbox", r.returncode == 0 and r2.stdout == b"deep\ntop\n", (r.stderr, r2.stdout))
        r = subprocess.run([vmm, "cp", f"{sock}:/tmp/cp/tree", os.path.join(d, "tree2")], capture_output=True, env=env)
        check("cp: a directory tree out of the sandbox",
              r.returncode == 0 and open(os.path.join(d, "tree2/a/b/c.txt")).read() == "deep\n", r.stderr)
        r = subprocess.run([vmm, "cp", f"{sock}:/no/such/file", os.path.join(d, "x")], capture_output=True, env=env)
        check("cp: a missing file is a clear error", r.returncode != 0 and b"ENOENT" in r.stderr, r.stderr)
    # raw protocol: health, bad token, garbage, oversized
    s = connect()
    s.sendall(frame(1, b'{"v":1,"op":"health","token":' + f'"{token}"'.encode() + b"}"))
    t, body = read_frame(s)
    check("api: health", t == 19 and b'"api":1' in body, (t, body))
    s.close()
    if token:
        s = connect()
        s.sendall(frame(1, b'{"v":1,"op":"health","token":"wrong"}'))
        t, body = read_frame(s)
        check("api: a wrong token is refused", t == 20 and b"EACCES" in body, (t, body))
        s.close()
        r = subprocess.run([vmm, "exec", "--token", "nope", sock, "--", "true"], capture_output=True, env=env)
        check("api: vmm exec with a bad token fails", r.returncode != 0 and b"token" in r.stderr, r.stderr)
    s = connect()
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(64))
    t, body = read_frame(s)
    check("api: garbage gets an error reply", t == 20, (t, body))
    s.close()
    s = connect()
    s.sendall(frame(1, b'{"v":1,"op":"exec","argv":"not-a-list","token":' + f'"{token}"'.encode() + b"}"))
    t, body = read_frame(s)
    check("api: a malformed request gets EINVAL", t == 20 and b"EINVAL" in body, body)
    s.close()
    s = connect()
    s.sendall(struct.pack("<IB3x", 5 << 20, 1))
    t, body = read_frame(s)
    check("api: an oversized request gets EMSGSIZE", t == 20 and b"EMSGSIZE" in body, body)
    s.close()
    if "--no-v2" not in sys.argv:
        v2_checks()
    r = vx(["echo", "still-serving"])
    check("api: the server keeps serving after bad requests", r.stdout == b"still-serving\n", r)
    if "--shutdown" in sys.argv:
        s = connect()
        s.sendall(frame(1, b'{"v":1,"op":"shutdown","token":' + f'"{token}"'.encode() + b"}"))
        t, body = read_frame(s)
        check("api: shutdown acknowledged", t == 19, (t, body))
        s.close()
    crash = crashed(final=True)
    if crash:
        bad(f"console after the last check: the guest crashed:{crash}", scanned=True)
    print(f"api: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
