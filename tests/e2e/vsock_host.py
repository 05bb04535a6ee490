#!/usr/bin/env python3
"""Host side of the vsock end-to-end test, against tests/e2e/vsock_test.c
serving in the guest.   vsock_host.py UDS GUEST_PORT MIB
Prints "ok"/"FAIL" lines and "vsock: N passed, M failed"; exit 1 on any
failure."""
import os
import socket
import sys
import threading
import time
import zlib

uds, gport, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
passed = failed = 0


def ok(msg):
    global passed
    passed += 1
    print(f"ok   {msg}", flush=True)


def bad(msg):
    global failed
    failed += 1
    print(f"FAIL {msg}", flush=True)


def connect(port, timeout=120):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(uds)
    s.sendall(f"CONNECT {port}\n".encode())
    line = readline(s)
    if not line.startswith("OK "):
        raise RuntimeError(f"CONNECT {port}: got {line!r}")
    return s


def readline(s):
    b = b""
    while not b.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            break
        b += c
    return b.decode(errors="replace").strip()


def recv_exact(s, n):
    parts, got = [], 0
    while got < n:
        c = s.recv(min(1 << 20, n - got))
        if not c:
            break
        parts.append(c)
        got += len(c)
    return b"".join(parts)


def test_sink(n):
    data = os.urandom(n)
    t0 = time.monotonic()
    s = connect(gport)
    s.sendall(f"SINK {n}\n".encode())
    s.sendall(data)
    line = readline(s)
    dt = time.monotonic() - t0
    s.close()
    want = f"SUM {zlib.crc32(data):08x}"
    if line == want:
        ok(f"host -> guest {n >> 20} MiB byte-exact ({n / dt / 1e6:.1f} MB/s)")
    else:
        bad(f"host -> guest: guest says {line!r}, want {want!r}")


def test_source(n):
    t0 = time.monotonic()
    s = connect(gport)
    s.sendall(f"SOURCE {n} 12345\n".encode())
    data = recv_exact(s, n)
    line = readline(s)
    dt = time.monotonic() - t0
    s.close()
    got = f"SUM {zlib.crc32(data):08x}"
    if len(data) == n and line == got:
        ok(f"guest -> host {n >> 20} MiB byte-exact ({n / dt / 1e6:.1f} MB/s)")
    else:
        bad(f"guest -> host: {len(data)} of {n} bytes, guest sent {line!r}, host computed {got!r}")


def test_concurrent(k, size):
    errors = []

    def one(i):
        try:
            data = os.urandom(size)
            s = connect(gport)
            s.sendall(b"ECHO\n")
            back = bytearray()

            def writer():
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            w = threading.Thread(target=writer)
            w.start()
            while True:
                c = s.recv(65536)
                if not c:
                    break
                back += c
            w.join()
            s.close()
            if bytes(back) != data:
                errors.append(f"conn {i}: {len(back)} bytes back, content differs")
        except Exception as e:  # noqa: BLE001 - report every failure
            errors.append(f"conn {i}: {e}")

    ts = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        bad(f"{k} concurrent echo connections: {len(errors)} failed, e.g. {errors[0]}")
    else:
        ok(f"{k} concurrent echo connections of {size >> 10} KiB each, byte-exact "
           f"({time.monotonic() - t0:.1f} s)")


def test_guest_dials(k):
    path = f"{uds}_6000"
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(512)
    stop = threading.Event()

    def serve():
        ls.settimeout(0.5)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            threading.Thread(target=lambda c=c: (c.sendall((readline(c) + "\n").encode()),
                                                  c.close())).start()
    t = threading.Thread(target=serve)
    t.start()
    s = connect(gport)
    s.sendall(f"DIAL 6000 {k}\n".encode())
    line = readline(s)
    s.close()
    stop.set()
    t.join()
    ls.close()
    os.unlink(path)
    if line == f"DIALED {k} none":
        ok(f"{k} guest-initiated connections to a host listener (<uds>_6000)")
    else:
        bad(f"guest-initiated connections: {line!r}")


def test_guest_dials_nobody():
    t0 = time.monotonic()
    s = connect(gport)
    s.sendall(b"DIAL 6001 1\n")
    line = readline(s)
    s.close()
    dt = time.monotonic() - t0
    if line.startswith("DIALED 0 ") and "none" not in line and dt < 30:
        ok(f"guest connecting to a host port nobody serves is refused ({line[9:]}, {dt:.2f} s)")
    else:
        bad(f"guest dial to nobody: {line!r} after {dt:.1f} s")


def test_refused_port():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(uds)
    t0 = time.monotonic()
    s.sendall(b"CONNECT 5999\n")
    try:
        data = s.recv(100)
    except socket.timeout:
        data = None
    dt = time.monotonic() - t0
    s.close()
    if data == b"":
        ok(f"CONNECT to a guest port nobody listens on: closed after {dt:.2f} s")
    else:
        bad(f"CONNECT to a closed guest port: got {data!r} after {dt:.1f} s")


def test_bad_handshake():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(uds)
    s.sendall(b"HELLO THERE\n")
    try:
        data = s.recv(100)
    except socket.timeout:
        data = None
    s.close()
    if data == b"":
        ok("a malformed CONNECT line gets a closed socket")
    else:
        bad(f"malformed CONNECT: got {data!r}")


def main():
    n = mib << 20
    for name, fn in (("sink", lambda: test_sink(n)), ("source", lambda: test_source(n)),
                     ("concurrent", lambda: test_concurrent(100, 64 << 10)),
                     ("dials", lambda: test_guest_dials(20)),
                     ("dial-nobody", test_guest_dials_nobody),
                     ("refused", test_refused_port), ("handshake", test_bad_handshake)):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            bad(f"{name}: {e}")
    try:
        s = connect(gport)
        s.sendall(b"QUIT\n")
        if readline(s) != "BYE":
            bad("QUIT not acknowledged")
        s.close()
    except Exception as e:  # noqa: BLE001
        bad(f"quit: {e}")
    print(f"vsock: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
