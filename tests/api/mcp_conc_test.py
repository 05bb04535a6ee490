#!/usr/bin/env python3
"""`vmm mcp --listen` under many clients: connections served at once, the
connection limit (503), room kept for token holders, a slowloris and an idle client cut off, the body
limit (413), and a shutdown that ends every connection.

  mcp_conc_test.py VMM STATE_DIR NAME

The same sandbox folder as mcp_test.py (tests/api/host.sh makes it).
Nothing here asserts on how long anything takes: the bounds below are
only there so a broken server fails the test instead of hanging it.
Prints ok/FAIL lines and "mcp-conc: N passed, M failed"."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from testlib import Tally, free_port

T = Tally()
check = T.check

vmm, state, name = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ, VMM_STATE_DIR=state, VMM_API_PORT="0")
env.pop("VMM_TOKEN", None)
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "conc", "version": "1"}}


def serve(*opts):
    port = free_port()
    p = subprocess.Popen([vmm, "mcp", name, "--listen", f"127.0.0.1:{port}", *opts], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    line = p.stderr.readline().decode()
    return p, port, line


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


class Client:
    """One keep-alive connection, one MCP session."""

    def __init__(self, port, token, timeout=60):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.token, self.session, self.next_id = token, None, 0

    def request(self, method, params=None):
        self.next_id += 1
        m = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            m["params"] = params
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": f"Bearer {self.token}"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        self.c.request("POST", "/mcp", body=json.dumps(m), headers=h)
        r = self.c.getresponse()
        data = r.read()
        if method == "initialize" and r.status == 200:
            self.session = r.getheader("Mcp-Session-Id")
        return r.status, (json.loads(data) if data else None)

    def call(self, tool, args):
        return self.request("tools/call", {"name": tool, "arguments": args})

    def close(self):
        self.c.close()


def result_text(b):
    try:
        return "".join(c["text"] for c in b["result"]["content"] if c["type"] == "text")
    except (KeyError, TypeError):
        return ""


def wait_for(cond, limit=60):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def concurrency(tok, work):
    srv, port, line = serve()
    check("serves", f"127.0.0.1:{port}/mcp" in line, line)
    try:
        # an idle client that connected first and sends nothing
        idle = socket.create_connection(("127.0.0.1", port))
        # a keep-alive client with a session, open and quiet
        held = Client(port, tok)
        s, b = held.request("initialize", INIT)
        check("a held keep-alive client initializes", s == 200 and held.session, (s, b))
        # a long tools/call in flight on a third connection
        started, release = f"{work}/started", f"{work}/release"
        long_res = {}

        def long_call():
            c = Client(port, tok, timeout=300)
            try:
                c.request("initialize", INIT)
                long_res["r"] = c.call("exec", {"command": f"touch {started}; while [ ! -e {release} ]; do sleep 0.05;"
                                                          " done; echo released", "timeout_s": 300})
            except Exception as e:  # noqa: BLE001 (reported below)
                long_res["r"] = (0, repr(e))
            c.close()

        t = threading.Thread(target=long_call)
        t.start()
        check("the long call starts", wait_for(lambda: os.path.exists(started), 90), "never started")
        # a second client, while both of those hold their connections:
        # bounded so that a server serving one at a time fails here
        c = Client(port, tok, timeout=15)
        try:
            s1, b1 = c.request("initialize", INIT)
            s2, b2 = c.request("tools/list")
            s3, b3 = c.call("exec", {"command": "echo concurrent"})
            names = sorted(x["name"] for x in b2["result"]["tools"])
            ok = (s1 == 200 and s2 == 200 and "exec" in names and s3 == 200 and
                  "concurrent" in result_text(b3))
            detail = (s1, s2, s3, b3)
        except (OSError, http.client.HTTPException) as e:
            ok, detail = False, repr(e)
        check("a second client's initialize, tools/list and tools/call run while an idle connection, "
              "a held session and a long call are open", ok and t.is_alive() and not os.path.exists(release),
              detail)
        c.close()
        # the held session still works on its own connection
        try:
            s, b = held.call("exec", {"command": "echo still-held"})
            check("the held keep-alive connection is still served", s == 200 and "still-held" in result_text(b),
                  (s, b))
        except (OSError, http.client.HTTPException) as e:
            check("the held keep-alive connection is still served", False, repr(e))
        open(release, "w").close()
        t.join(timeout=120)
        s, b = long_res.get("r", (0, None))
        check("the long call ends with its output", s == 200 and "released" in result_text(b), long_res)
        held.close()
        idle.close()
    finally:
        check("exits 0 on SIGTERM", stop(srv) == 0)


def ping(port, tok):
    """A connection that has been served (a ping answered on it), kept open;
    or (None, status) when the server refused it."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
                  headers={"Content-Type": "application/json", "Authorization": f"Bearer {tok}"})
        r = c.getresponse()
        body = r.read()
    except (OSError, http.client.HTTPException) as e:
        c.close()
        return None, -1, repr(e).encode()
    if r.status == 200:
        return c, 200, body
    c.close()
    return None, r.status, body


def limit(tok):
    srv, port, _ = serve()
    conns = []
    try:
        # 32 connections, each served and kept open (a slot whose
        # thread has not noticed its client left yet may refuse one:
        # retry, bounded)
        s = 0
        for _ in range(32):
            for _ in range(100):
                c, s, _b = ping(port, tok)
                if c or s == -1:
                    break
                time.sleep(0.05)
            if not c:
                break
            conns.append(c)
        check("32 connections served at once", len(conns) == 32, (len(conns), s))
        if len(conns) < 32:
            return
        # Each refused client must read its 503: the server lingers over a
        # refused socket (a close with the request unread would be a reset,
        # which could destroy the answer in flight; 2 runs in 12 lost it).
        got = []
        for _ in range(8):
            c, s, b = ping(port, tok)
            try:
                j = json.loads(b) if b else {}
            except ValueError:
                j = {}
            got.append((s, "too many connections" in j.get("error", {}).get("message", "")))
        check("every connection past the limit gets 503 with a JSON-RPC error (8 tries)",
              got == [(503, True)] * 8, got)
        # the 32 are still served
        conns[0].request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
                         headers={"Content-Type": "application/json", "Authorization": f"Bearer {tok}"})
        r = conns[0].getresponse()
        r.read()
        check("a connection within the limit goes on", r.status == 200, r.status)
        conns.pop().close()
        got = None
        for _ in range(200):
            got, s, _b = ping(port, tok)
            if got:
                break
            time.sleep(0.05)
        check("a slot freed by a client that left is served again", got is not None, s)
        if got:
            conns.append(got)
    finally:
        for c in conns:
            c.close()
        stop(srv)


def crowd(tok):
    """Every slot held by a slow client without a token (a head that never
    ends): a client with a token is still served, in the slot of the one
    idle the longest (it got 503 while they renewed every 30 s)."""
    srv, port, _ = serve("--max-connections", "4")
    slow = []
    try:
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        # every slow one has a thread (its bytes were read): each sends
        # more and is still open
        time.sleep(0.5)
        c, s, b = None, -1, b""
        for _ in range(3):
            c, s, b = ping(port, tok)
            if c:
                break
            time.sleep(0.2)
        check("a token holder is served while 4 slow clients without one fill the 4 slots", c is not None,
              (s, b[:200]))
        closed = 0
        for x in slow:
            x.settimeout(10)
            try:
                x.sendall(b"X-Slow: 1\r\n")
                closed += x.recv(100) == b""
            except OSError:
                closed += 1
        check("the slow client idle the longest made room (its connection closed)", closed >= 1, closed)
        if c:
            # the authenticated one is never evicted: 4 more slow clients
            # take the others' slots, the served one goes on
            more = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
            for x in more:
                x.sendall(b"POST /mcp HTTP/1.1\r\n")
            slow += more
            time.sleep(0.5)
            c.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {tok}"})
            r = c.getresponse()
            r.read()
            check("an authenticated connection is not evicted by newcomers", r.status == 200, r.status)
            c.close()
    finally:
        for x in slow:
            x.close()
        stop(srv)


def timeouts(tok):
    srv, port, line = serve("--request-timeout", "2", "--idle-timeout", "2", "--max-connections", "4")
    check("--max-connections is said", "at most 4 connections" in line, line)
    try:
        # a slowloris: a header line every 0.2 s, never the end of them
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        got, end = b"", time.monotonic() + 60
        s.settimeout(0.2)
        while time.monotonic() < end:
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
            try:
                d = s.recv(4096)
                if not d:
                    break
                got += d
            except socket.timeout:
                continue
            except OSError:
                break
        check("a slowloris gets 408 and is cut off", got.startswith(b"HTTP/1.1 408"), got[:80])
        s.close()
        # an idle client: closed without a word
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(60)
        try:
            d = s.recv(100)
        except OSError as e:
            d = repr(e).encode()
        check("an idle connection is closed", d == b"", d)
        s.close()
        # a body over the limit: 413 from the headers alone
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(60)
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (9 << 20))
        d = b""
        try:
            while True:
                x = s.recv(4096)
                if not x:
                    break
                d += x
        except OSError:
            pass
        check("a body over 8 MiB gets 413", d.startswith(b"HTTP/1.1 413"), d[:200])
        s.close()
    finally:
        stop(srv)
    r = subprocess.run([vmm, "mcp", name, "--listen", "127.0.0.1:1", "--max-connections", "0"],
                       capture_output=True, env=env, timeout=30)
    check("--max-connections 0 is refused", r.returncode == 2 and b"max-connections" in r.stderr, r)


def shutdown(tok, work):
    srv, port, _ = serve()
    idle = socket.create_connection(("127.0.0.1", port))
    idle.settimeout(60)
    started = f"{work}/started2"
    res = {}

    def long_call():
        c = Client(port, tok, timeout=120)
        try:
            c.request("initialize", INIT)
            res["r"] = c.call("exec", {"command": f"touch {started}; sleep 600", "timeout_s": 600})
        except (OSError, http.client.HTTPException) as e:
            res["r"] = repr(e)
        c.close()

    t = threading.Thread(target=long_call)
    t.start()
    check("shutdown: the long call starts", wait_for(lambda: os.path.exists(started), 90))
    rc = stop(srv)
    check("shutdown: SIGTERM with an idle connection and a call in flight exits 0", rc == 0, rc)
    try:
        d = idle.recv(100)
    except OSError as e:
        d = repr(e).encode()
    check("shutdown: the idle connection is closed", d == b"", d)
    t.join(timeout=60)
    r = res.get("r")
    check("shutdown: the call in flight is answered or its connection closed", not t.is_alive() and r is not None, r)
    idle.close()


tok = subprocess.run([vmm, "token", "create", name], capture_output=True, env=env, timeout=60).stdout.decode().strip()
check("a token", tok.startswith("vmt_"), tok)
with tempfile.TemporaryDirectory(prefix="vmm-mcpc-") as work:
    concurrency(tok, work)
    limit(tok)
    crowd(tok)
    timeouts(tok)
    shutdown(tok, work)
T.finish("mcp-conc")
