#!/usr/bin/env python3
"""guest-init's spare API worker (guest-init/init.c, docs/perf.md) and what
it tells the host on the ready notice's connection (docs/vsock.md): a
process forked ahead of time waits in accept(), so the next connection (a
restored clone's sync) is served with no fork on its path, and a snapshot
waits for "settled" so that it holds such a spare.

  spare_test.py GUEST_INIT   (the host build: guest-init --serve-unix)

Checks, by the server's child processes and the notice's bytes (no
timing): before any connection there are two children (the process
manager and the spare) and the notice says "ready\\n" then settled; a
connection is served by the spare, which says pending before it serves,
and the next spare is forked at once (settled again) even while that
connection is still held; after a restore (the notice connection reset)
the clone's first connection is served with no spare forked beside it
until it is done, and the server itself takes a connection meanwhile,
also when the reset and that connection reach the server in one round
(it is stopped while both happen, as a clone's PID 1 sees them).
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

TOKEN = "spare-test-token"
F_REQUEST, F_RESULT = 1, 19


def children(pid):
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def wait_for(pred, what, tries=600):
    """Polls pred every 50 ms, at most `tries` times (a bound, not a timing check)."""
    for _ in range(tries):
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    sys.exit(f"FAIL: {what}")


def request(sock_path, op="health", send=True):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock_path)
    if not send:
        return s
    body = json.dumps({"v": 1, "op": op, "token": TOKEN}).encode()
    s.sendall(struct.pack("<IB3x", len(body), F_REQUEST) + body)
    hdr = b""
    while len(hdr) < 8:
        c = s.recv(8 - len(hdr))
        if not c:
            break
        hdr += c
    s.close()
    return len(hdr) == 8 and hdr[4] == F_RESULT


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def blocked_in(pid):
    """The system call a sleeping process is in (x86-64: 0 is read), or None."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_exact(conn, n, what):
    got = b""
    conn.settimeout(30)
    while len(got) < n:
        try:
            c = conn.recv(n - len(got))
        except socket.timeout:
            c = b""
        if not c:
            sys.exit(f"FAIL: {what}: the notice said {got!r} and no more")
        got += c
    return got


def nothing_more(conn):
    conn.setblocking(False)
    try:
        extra = conn.recv(64)
    except BlockingIOError:
        extra = b""
    conn.setblocking(True)
    return extra


class Checks:
    fails = 0

    def check(self, cond, msg):
        print(("ok: " if cond else "FAIL: ") + msg)
        if not cond:
            self.fails += 1


def main():
    gi = sys.argv[1]
    tmp = tempfile.mkdtemp()
    os.makedirs(f"{tmp}/reg")
    sock = f"{tmp}/api.sock"
    nsock = f"{tmp}/notice.sock"
    lis = socket.socket(socket.AF_UNIX)
    lis.bind(nsock)
    lis.listen(4)
    lis.settimeout(30)
    env = dict(os.environ, VMM_API_TOKEN=TOKEN, VMM_API_REGISTRY=f"{tmp}/reg",
               VMM_API_NOTICE_UNIX=nsock)
    p = subprocess.Popen([gi, "--serve-unix", sock], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    c = Checks()
    try:
        conn, _ = lis.accept()
        got = read_exact(conn, len("ready\nS"), "at start")
        c.check(got == b"ready\nS", f"the notice, then settled once the spare is forked ({got!r})")
        wait_for(lambda: os.path.exists(sock), "the socket never appeared")
        first = wait_for(lambda: (lambda k: k if len(k) == 2 else None)(children(p.pid)),
                         "no spare worker next to the process manager before any connection")

        c.check(request(sock), "the first health request is answered")
        got = read_exact(conn, 2, "after the first request")
        c.check(got == b"PS", f"pending when the spare took it, settled with the next forked ({got!r})")
        after = wait_for(lambda: (lambda k: k if len(k) == 2 and k != first else None)(children(p.pid)),
                         "the first connection was not served by the spare (no new spare)")
        kept = first & after
        c.check(len(kept) == 1, f"the process manager kept, the spare replaced: {first} -> {after}")
        procs = kept

        # A connection that holds the spare (no request yet): the next
        # spare is forked at once, so a snapshot now still holds one.
        held = request(sock, send=False)
        got = read_exact(conn, 2, "with a connection held")
        c.check(got == b"PS", f"a held connection: pending, then settled at once ({got!r})")
        busy = wait_for(lambda: (lambda k: k if len(k) == 3 else None)(children(p.pid)),
                        "no new spare beside the held connection's worker")
        c.check(request(sock), "the new spare answers the next connection")
        got = read_exact(conn, 2, "the next connection")
        c.check(got == b"PS", f"the new spare took it and was replaced ({got!r})")
        held.close()
        wait_for(lambda: len(children(p.pid)) == 2 and procs < children(p.pid) or None,
                 "the held connection's worker did not end")

        # A restore: the notice connection is reset, and the clone's sync
        # (held by the device until then) is taken by the spare, both
        # before PID 1 runs again: the server is stopped meanwhile, so it
        # sees both in one round. guest-init connects again, says the line
        # and, since its spare's copy of the connection is the old one,
        # "pending" itself.
        spare = children(p.pid) - procs
        wait_for(lambda: blocked_in(p.pid) == 7, "the server is not waiting in poll()")  # 7: poll
        os.kill(p.pid, signal.SIGSTOP)
        wait_for(lambda: proc_state(p.pid) == "T", "the server did not stop")
        conn.close()
        first_req = request(sock, send=False)  # the clone's first request, held
        # Taken, and told: the spare reads the request (it wrote its pipe first).
        (sp,) = spare
        wait_for(lambda: blocked_in(sp) == 0, "the spare did not take the clone's first connection")
        os.kill(p.pid, signal.SIGCONT)
        conn, _ = lis.accept()
        got = read_exact(conn, len("ready\nP"), "after the reset")
        c.check(got == b"ready\nP", f"a clone says the line again, then pending ({got!r})")
        # Meanwhile no spare: the server takes the next connection itself
        # (it forks a handler per connection, which ends with it).
        c.check(request(sock), "with the first request held, the server answers another itself")
        k = wait_for(lambda: (lambda k: k if len(k) == 2 else None)(children(p.pid)),
                     "a spare was forked beside the clone's first request")
        c.check(k == procs | spare, f"no spare beside the clone's first request's worker ({k}, "
                f"process manager {procs}, that worker {spare})")
        extra = nothing_more(conn)
        c.check(extra == b"", f"still pending while the first request is served ({extra!r})")
        first_req.close()
        got = read_exact(conn, 1, "after the clone's first request")
        c.check(got == b"S", f"settled once the first request is done ({got!r})")
        wait_for(lambda: len(children(p.pid)) == 2 and procs < children(p.pid) or None,
                 "no spare after the clone's first request")
        c.check(request(sock), "served again by the new spare")
    finally:
        os.killpg(p.pid, 9)
        p.wait()
        subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if c.fails else 0)


if __name__ == "__main__":
    main()
