"""What the Python tiers in tests/api share: the ok/FAIL tally each prints
("NAME: N passed, M failed", exit status 1 on any failure) and a free
local TCP port."""
import socket
import sys
import threading


class Tally:
    """check() prints one ok/FAIL line and counts it; safe from threads."""

    def __init__(self):
        self.passed = self.failed = 0
        self._lock = threading.Lock()

    def check(self, what, cond, detail=""):
        with self._lock:
            if cond:
                self.passed += 1
                print(f"ok   {what}", flush=True)
            else:
                self.failed += 1
                print(f"FAIL {what}: {detail}", flush=True)

    def finish(self, name):
        print(f"{name}: {self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
