"""Shared by the bench/ scripts that start sandboxes from snapshots
(bench/restore, bench/density): the sandbox API's health request over
the vsock socket, the control socket, stopping, PSS, and a Bench that
boots, snapshots and restores guest-init sandboxes in a state folder of
its own."""
import json
import os
import socket
import struct
import subprocess
import sys
import time

import benchlib as bl

TOKEN = "bench-token"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def api_health(sock_path, timeout=2.0):
    """One health request over the vsock socket; True on a RESULT frame."""
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(b"CONNECT 1024\n")
        line = b""
        while not line.endswith(b"\n"):
            c = s.recv(1)
            if not c:
                return False
            line += c
        if not line.startswith(b"OK"):
            return False
        body = json.dumps({"v": 1, "op": "health", "token": TOKEN}).encode()
        s.sendall(struct.pack("<IB3x", len(body), 1) + body)
        hdr = b""
        while len(hdr) < 8:
            c = s.recv(8 - len(hdr))
            if not c:
                return False
            hdr += c
        return hdr[4] == 19  # F_RESULT
    except OSError:
        return False
    finally:
        s.close()


def wait_api(sock_path, t0, deadline, proc):
    while time.monotonic() < deadline:
        if os.path.exists(sock_path) and api_health(sock_path):
            return time.monotonic() - t0
        if proc.poll() is not None:
            return None
        time.sleep(0.005)
    return None


def control(state, name, req):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(600)
    s.connect(os.path.join(state, name, "control.sock"))
    s.sendall(json.dumps(req).encode() + b"\n")
    out = b""
    while not out.endswith(b"\n"):
        c = s.recv(4096)
        if not c:
            break
        out += c
    s.close()
    return json.loads(out or b"{}")


def stop(procs, state):
    for name, p in procs:
        if p.poll() is None:
            try:
                control(state, name, {"op": "stop"})
            except OSError:
                p.terminate()
    for _, p in procs:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Bench:
    def __init__(self, a, tmp):
        self.a = a
        self.tmp = tmp
        self.p = bl.build_paths(a.build)
        self.state = os.path.join(tmp, "state")
        os.makedirs(self.state, mode=0o700)  # vmm refuses a state directory others may change
        self.env = dict(os.environ, VMM_STATE_DIR=self.state)
        self.n = 0

    def name(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"

    def boot(self, name, mem, extra=()):
        cmd = [self.p["vmm"], "run", "--name", name, "--kernel", self.p["kernel"],
               "--initrd", self.p["initrd"], "--mem", str(mem), "--token", TOKEN,
               "--console", "none", "--cmdline",
               bl.base_cmdline().split(" noxsave")[0] + " vmm.shell=0"] + list(extra)
        # Its stderr is kept (a sandbox that does not start says why there).
        err = open(os.path.join(self.tmp, f"{name}.err"), "wb")
        with err:
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=err, env=self.env)

    def why(self, name):
        try:
            with open(os.path.join(self.tmp, f"{name}.err"), "rb") as f:
                return f.read()[-400:].decode(errors="replace").strip()
        except OSError:
            return ""

    def sock(self, name):
        return os.path.join(self.state, name, "vsock.sock")

    def gold(self, mem):
        """Boots a sandbox, waits for its API, snapshots it, stops it."""
        name = self.name("gold")
        t0 = time.monotonic()
        p = self.boot(name, mem)
        if wait_api(self.sock(name), t0, t0 + self.a.timeout, p) is None:
            sys.exit(f"{sys.argv[0]}: the sandbox to snapshot never answered; its stderr ends: "
                     + repr(self.why(name)))
        snap = os.path.join(self.tmp, f"snap-{mem}")
        r = control(self.state, name, {"op": "snapshot", "dir": snap, "then": "stop"})
        if not r.get("ok"):
            sys.exit(f"{sys.argv[0]}: snapshot failed: {r}")
        p.wait(60)
        return snap, r

    def restore(self, snap, name, console="none", extra=()):
        return subprocess.Popen([self.p["vmm"], "restore", snap, "--name", name, "--console", console,
                                 "--token", TOKEN] +
                                list(extra), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=self.env)

    def restore_to_api(self, snap, extra=()):
        name = self.name("r")
        t0 = time.monotonic()
        p = self.restore(snap, name, extra=extra)
        t = wait_api(self.sock(name), t0, t0 + self.a.timeout, p)
        stop([(name, p)], self.state)
        return t

    def cold_to_api(self, mem):
        name = self.name("c")
        t0 = time.monotonic()
        p = self.boot(name, mem)
        t = wait_api(self.sock(name), t0, t0 + self.a.timeout, p)
        stop([(name, p)], self.state)
        return t

    def many(self, snap, k):
        names = [self.name("m") for _ in range(k)]
        t0 = time.monotonic()
        procs = [(n, self.restore(snap, n)) for n in names]
        pending = set(names)
        deadline = t0 + self.a.timeout
        while pending and time.monotonic() < deadline:
            for n, p in procs:
                if n in pending and os.path.exists(self.sock(n)) and api_health(self.sock(n), 1.0):
                    pending.discard(n)
            time.sleep(0.01)
        t = time.monotonic() - t0
        stop(procs, self.state)
        return t, k - len(pending)

    def memory(self, snap, k, mem):
        """PSS of 1..k clones, then of 1..k cold boots: one more sandbox
        at a time, each answering its API, then the PSS summed over all
        running ones (KiB). Returns {kind: total at k or None} and
        {kind: [total with 1, with 2, ...]}."""
        out, curve = {}, {}
        for kind in ("clones", "cold"):
            procs = []
            curve[kind] = []
            for _ in range(k):
                n = self.name("p")
                t0 = time.monotonic()
                p = self.restore(snap, n) if kind == "clones" else self.boot(n, mem)
                procs.append((n, p))
                if wait_api(self.sock(n), t0, t0 + self.a.timeout, p) is None:
                    break
                time.sleep(1)
                curve[kind].append(sum(pss_kib(q.pid) for _, q in procs))
            out[kind] = curve[kind][-1] if len(curve[kind]) == k else None
            stop(procs, self.state)
        return out, curve
