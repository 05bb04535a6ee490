#!/usr/bin/env python3
"""A hostile OCI registry for vmm image pull (tests/api/hostile_registry.sh).

Two plain-HTTP servers on loopback, A (the registry named in the reference)
and B (another host: another port counts as another host), serve small
images built here, each repository a way a registry can lie:

  ok/x        a good image (one gzip layer with hello.txt)
  huge/x      a layer claiming 1 TiB; its blob streams 4 MiB of zeros and then stops
  over/x      a layer claiming 100000 bytes that is served as 2 MiB
  overeof/x   the same, with no Content-Length (the body ends when the connection does)
  bomb/x      a gzip layer of 2 KiB that decompresses to 2 MiB of zeros
  many/x      a layer of 50 entries
  redir/x     its manifest redirects to B, which answers 401 with a realm on B
  realm/x     A wants a Bearer token from a realm on B (which gives one to anyone)
  ownrealm/x  A wants a Bearer token from a realm on A (which wants u:p)
  named/x     as realm/x (B's token for those who name B in their credentials)

Every request is logged as one JSON line (server, method, path,
Authorization, bytes of body sent) to LOG.
   hostile_registry.py PORTFILE LOG
writes "PORT_A PORT_B" to PORTFILE once both listen."""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTFILE, LOG = sys.argv[1], sys.argv[2]
log_lock = threading.Lock()
BASIC_UP = "Basic dTpw"  # u:p
BASIC_B = "Basic YjpxcQ=="  # b:qq, the credentials file's entry for B


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def tar_of(files):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in files:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 1700000000
            tf.addfile(ti, io.BytesIO(data))
    return bio.getvalue()


BLOBS = {}     # digest -> bytes
MANIFESTS = {}  # repo -> manifest bytes
SPECIAL = {}   # digest -> how to serve it ("huge", "over")


def image(repo, layer_tar, gz=True, claim=None, special=None):
    layer = gzip.compress(layer_tar, mtime=0) if gz else layer_tar
    ld = sha(layer) if special is None else sha(repo.encode() + b"-layer")
    if special is None:
        BLOBS[ld] = layer
    else:
        SPECIAL[ld] = special
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/sh"]},
                      "rootfs": {"type": "layers", "diff_ids": [sha(layer_tar)]}}).encode()
    BLOBS[sha(cfg)] = cfg
    mt = "application/vnd.oci.image.layer.v1.tar+gzip" if gz else "application/vnd.oci.image.layer.v1.tar"
    MANIFESTS[repo] = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(cfg), "size": len(cfg)},
        "layers": [{"mediaType": mt, "digest": ld, "size": claim if claim is not None else len(layer)}]}).encode()


ok_tar = tar_of([("hello.txt", b"hello from a small registry\n")])
for r in ("ok/x", "realm/x", "ownrealm/x", "named/x", "redir/x"):
    image(r, ok_tar)
image("huge/x", ok_tar, claim=1 << 40, special="huge")
image("over/x", ok_tar, claim=100000, special="over")
image("overeof/x", ok_tar, claim=100000, special="overeof")
image("bomb/x", tar_of([("zeros", bytes(2 << 20))]))
image("many/x", tar_of([("f%02d" % i, b"x") for i in range(50)]))

# Which repositories want a token, from which server's /token.
TOKEN_REALM = {"realm/x": "B", "ownrealm/x": "A", "named/x": "B"}
ports = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_name_ = "?"

    def log_message(self, *a):
        pass

    def record(self, sent):
        with log_lock, open(LOG, "a") as f:
            f.write(json.dumps({"server": self.server_name_, "method": self.command, "path": self.path,
                                "auth": self.headers.get("Authorization", ""), "sent": sent}) + "\n")

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.record(len(body))

    def do_GET(self):
        me = self.server_name_
        path = self.path.split("?")[0]
        if path == "/token":
            auth = self.headers.get("Authorization", "")
            if me == "A" and auth != BASIC_UP:
                return self.reply(401, b"{}")
            tok = "tok-b-named" if auth == BASIC_B else "tok-" + me.lower()
            return self.reply(200, json.dumps({"token": tok}).encode(), [("Content-Type", "application/json")])
        if path == "/v2/" or not path.startswith("/v2/"):
            return self.reply(200, b"{}")
        rest = path[4:]
        repo = rest.split("/manifests/")[0] if "/manifests/" in rest else rest.split("/blobs/")[0]
        if repo == "redir/x" and me == "A":
            return self.reply(307, b"", [("Location", "http://127.0.0.1:%d%s" % (ports["B"], self.path))])
        if repo == "redir/x" and me == "B":
            return self.reply(401, b"{}", [("WWW-Authenticate",
                                            'Bearer realm="http://127.0.0.1:%d/token",service="b"' % ports["B"])])
        if repo in TOKEN_REALM and me == "A":
            want = {"realm/x": "Bearer tok-b", "ownrealm/x": "Bearer tok-a", "named/x": "Bearer tok-b-named"}[repo]
            if self.headers.get("Authorization", "") != want:
                realm = "http://127.0.0.1:%d/token" % ports[TOKEN_REALM[repo]]
                return self.reply(401, b"{}", [("WWW-Authenticate", 'Bearer realm="%s",service="a"' % realm)])
        if "/manifests/" in rest:
            if repo not in MANIFESTS:
                return self.reply(404, b"{}")
            return self.reply(200, MANIFESTS[repo], [("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
        digest = rest.split("/blobs/")[1]
        if SPECIAL.get(digest) in ("huge", "overeof"):
            # No length: zeros until 4 MiB, then the connection drops.
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            sent = 0
            try:
                while sent < (4 << 20 if SPECIAL[digest] == "huge" else 2 << 20):
                    self.wfile.write(bytes(65536))
                    sent += 65536
            except OSError:
                pass
            self.close_connection = True
            return self.record(sent)
        if SPECIAL.get(digest) == "over":
            return self.reply(200, bytes(2 << 20))
        if digest not in BLOBS:
            return self.reply(404, b"{}")
        return self.reply(200, BLOBS[digest])

    do_HEAD = do_GET


def serve(name):
    cls = type("H" + name, (Handler,), {"server_name_": name})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), cls)
    srv.handle_error = lambda *a: None  # a client that hangs up mid-blob is what some tests do
    ports[name] = srv.server_address[1]
    return srv


a, b = serve("A"), serve("B")
for s in (a, b):
    threading.Thread(target=s.serve_forever, daemon=True).start()
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d %d\n" % (ports["A"], ports["B"]))
os.rename(PORTFILE + ".tmp", PORTFILE)
threading.Event().wait()
