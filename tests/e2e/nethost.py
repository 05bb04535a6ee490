#!/usr/bin/env python3
"""Host side of the net e2e transfers (tests/e2e/net.sh).
  nethost.py send ADDR PORT FILE   connect (retrying while the guest's
                                   listener comes up), send FILE, wait for
                                   the peer to close; prints the rate
  nethost.py recv ADDR PORT        listen (prints "listening" on stderr),
                                   take one connection until EOF; prints
                                   "BYTES SHA256 SECONDS s RATE MB/s"
"""
import hashlib
import socket
import sys
import time


def send(addr, port, path):
    deadline = time.monotonic() + 120
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    s.settimeout(None)
    t = time.monotonic()
    with open(path, "rb") as f:
        n = s.sendfile(f)
    s.shutdown(socket.SHUT_WR)
    while s.recv(65536):
        pass
    dt = time.monotonic() - t
    print(f"{n} bytes in {dt:.1f} s, {n / dt / 1e6:.2f} MB/s")


def recv(addr, port):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((addr, port))
    l.listen(1)
    print("listening", file=sys.stderr, flush=True)
    c, _ = l.accept()
    h = hashlib.sha256()
    n = 0
    t = time.monotonic()
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        h.update(b)
        n += len(b)
    dt = time.monotonic() - t
    print(f"{n} {h.hexdigest()} {dt:.1f} s, {n / dt / 1e6:.2f} MB/s")


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        recv(sys.argv[2], int(sys.argv[3]))
