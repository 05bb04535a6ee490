#!/usr/bin/env python3
"""guest-init's spare API worker (guest-init/init.c, docs/perf.md): a
process forked ahead of time waits in accept(), so the next connection (a
restored clone's sync) is served with no fork on its path.

  spare_test.py GUEST_INIT   (the host build: guest-init --serve-unix)

Checks, by the server's child processes (no timing): before any connection
there are two (the process manager and the spare); the first connection
is served by that spare (it is gone afterwards, a new spare in its place,
the process manager unchanged); while a connection holds the spare, the
server itself takes the next one.
"""
import json
import os
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


def main():
    gi = sys.argv[1]
    tmp = tempfile.mkdtemp()
    os.makedirs(f"{tmp}/reg")
    sock = f"{tmp}/api.sock"
    env = dict(os.environ, VMM_API_TOKEN=TOKEN, VMM_API_REGISTRY=f"{tmp}/reg")
    p = subprocess.Popen([gi, "--serve-unix", sock], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    fails = 0
    try:
        wait_for(lambda: os.path.exists(sock), "the socket never appeared")
        first = wait_for(lambda: (lambda c: c if len(c) == 2 else None)(children(p.pid)),
                         "no spare worker next to the process manager before any connection")
        if not request(sock):
            sys.exit("FAIL: the first health request got no result")
        # The spare served it and exits; a new spare replaces it.
        after = wait_for(lambda: (lambda c: c if len(c) == 2 and c != first else None)(children(p.pid)),
                         "the first connection was not served by the spare (no new spare)")
        kept = first & after
        if len(kept) != 1:
            print(f"FAIL: expected the process manager kept and the spare replaced: {first} -> {after}")
            fails += 1
        else:
            print("ok: the first connection went to the waiting spare; a new one replaced it")

        # A connection that holds the spare (no request yet; the backlog
        # is FIFO, so the spare takes it): the server itself must take the
        # next one.
        held = request(sock, send=False)
        if request(sock):
            print("ok: with the spare busy, the server answered the next connection itself")
        else:
            print("FAIL: no answer while the spare held a connection")
            fails += 1
        held.close()
        # The busy spare ends; a spare waits again.
        wait_for(lambda: len(children(p.pid)) == 2 and not (children(p.pid) & (after - kept)) or None,
                 "no new spare after the busy one ended")
        if request(sock):
            print("ok: served again after the spare came back")
        else:
            print("FAIL: no answer after the spare came back")
            fails += 1
    finally:
        os.killpg(p.pid, 9)
        p.wait()
        subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
