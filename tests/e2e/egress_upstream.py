#!/usr/bin/env python3
"""The egress e2e test's upstream: an HTTPS server on loopback (its
certificate from the test's CA) that records each request it gets, one
JSON line (method, path, headers, body length) in LOG, and answers
"upstream-ok METHOD PATH" with Connection: close, or, for a path with
"/ka" in it, kept alive (the log line's "conn" tells connections apart:
the client's port). A second port accepts TCP and never answers
(the proxy's timeout). Prints "ready" once both listen.
    egress_upstream.py CERT KEY PORT SILENT_PORT LOG
"""
import http.server
import json
import socket
import ssl
import sys
import threading

cert, key, port, silent_port, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        with lock, open(log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "headers": [[k, v] for k, v in self.headers.items()],
                                "body_len": len(body), "body": body[:64].decode("latin-1"),
                                "conn": self.client_address[1]}) + "\n")
        out = ("upstream-ok %s %s\n" % (self.command, self.path)).encode()
        if self.path.startswith("/v1/big"):
            out = b"x" * (256 << 10)
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        if "/ka" not in self.path:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", port), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
# Handshakes in the handler threads, not in accept(): a client that never
# speaks TLS (a CONNECT tunnel left idle) must not stall the others.
srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
silent = socket.socket()
silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
silent.bind(("127.0.0.1", silent_port))
silent.listen(16)  # never accepted: connects succeed, nothing answers
print("ready", flush=True)
srv.serve_forever()
