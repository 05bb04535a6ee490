#!/usr/bin/python3
"""A small CRI client, as kubelet speaks to containerd (tests/e2e/cri.sh).

Its gRPC stubs are generated at test time from the CRI's own api.proto
(kubernetes/cri-api, pkg/apis/runtime/v1/api.proto; a copy in
../shared/specs/cri-api, or $VMM_SPECS/cri-api) with Debian's
python3-grpc-tools into a temporary folder: nothing generated is kept.
Debian 12's protoc is older than the file: the field options it does not
know ([debug_redact = true]) are stripped from a copy first.

  cri_client.py gen DIR                      generate the stubs into DIR
  cri_client.py flow --stubs DIR --socket SOCK --handler NAME --image REF
                [--logs DIR] [--vmm BINARY] [--root DIR] [--report FILE]

flow drives one pod through the CRI (runtime.v1): RunPodSandbox (a pod on
the host's network), CreateContainer/StartContainer, ContainerStatus,
ExecSync (output, stderr, exit codes, the container's env, the kernel),
logs in the CRI format, a container that exits on its own (exit code,
reason), StopContainer/RemoveContainer, StopPodSandbox/RemovePodSandbox,
then checks that nothing of the pod is left: no VMM process (--vmm), no
mount naming its IDs, no TAP, no state folder under --root. With --cni,
a second pod on the CNI network containerd is configured with: its
container serves HTTP on port 8080 and the pod's IP answers from the
host (outside the pod), PortForward reaches it on the pod's localhost and
Exec runs through containerd's streaming server (WebSocket); then the
same checks that nothing is left. It prints
"ok ..." / "FAIL ..." lines and writes its figures (RunPodSandbox to a
running container, ExecSync latency, the pod's memory) as JSON to --report.
"""
import argparse
import base64
import json
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid


# ---- the stubs ---------------------------------------------------------------

def generate(proto, out):
    """protoc the CRI proto into out/ (api_pb2.py, api_pb2_grpc.py)."""
    text = open(proto).read()
    os.makedirs(out, exist_ok=True)
    for _ in range(10):
        tmp = tempfile.mkdtemp(prefix="cri-proto.")
        try:
            with open(os.path.join(tmp, "api.proto"), "w") as f:
                f.write(text)
            r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", tmp,
                                "--python_out=" + out, "--grpc_python_out=" + out,
                                os.path.join(tmp, "api.proto")],
                               capture_output=True, text=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if r.returncode == 0:
            return 0
        # 'Option "debug_redact" unknown.': strip that field option, again
        m = re.search(r'Option "([A-Za-z_][A-Za-z0-9_.]*)" unknown', r.stderr)
        if not m:
            sys.stderr.write(r.stderr)
            return 1
        opt = re.escape(m.group(1))
        text = re.sub(r"\s*\[\s*" + opt + r"\s*=\s*[^\],]+\]", "", text)
        text = re.sub(r"(\[[^\]]*?),?\s*" + opt + r"\s*=\s*[^\],]+", r"\1", text)
    return 1


# ---- the streaming server's WebSocket side ------------------------------------
# containerd's streaming server (pkg/cri/streaming, from kubelet's) serves
# Exec, Attach and PortForward as SPDY or WebSocket; Debian 12 packages no
# client for either, so this speaks RFC 6455 itself: the client's frames
# masked, one message per frame, its first byte the channel
# ("v4.channel.k8s.io": 0 stdin, 1 stdout, 2 stderr, 3 the exec's status;
# PortForward: 2*i data and 2*i+1 errors for the i-th port).

class WebSocket:
    def __init__(self, url, protocol, timeout=60):
        u = urllib.parse.urlsplit(url)
        self.s = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                        "Sec-WebSocket-Protocol: %s\r\n\r\n" % (path, u.netloc, key, protocol)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            got = self.s.recv(1)
            if not got:
                raise OSError("the streaming server closed the upgrade: %r" % head)
            head += got
        if not head.startswith(b"HTTP/1.1 101"):
            raise OSError("the streaming server refused the upgrade: %r" % head.split(b"\r\n")[0])

    def _read(self, n):
        out = b""
        while len(out) < n:
            got = self.s.recv(n - len(out))
            if not got:
                raise EOFError
            out += got
        return out

    def send(self, channel, data):
        payload = bytes([channel]) + data
        head = bytes([0x82])  # FIN, binary
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self):
        """(channel, data) of the next message; None once the server closes."""
        while True:
            try:
                b0, b1 = self._read(2)
            except EOFError:
                return None
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", self._read(8))
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 8:
                return None
            if op in (1, 2) and data:
                return data[0], data[1:]

    def close(self):
        self.s.close()


# ---- the flow ------------------------------------------------------------------

class Flow:
    def __init__(self, a):
        sys.path.insert(0, a.stubs)
        import grpc
        import api_pb2
        import api_pb2_grpc
        self.pb = api_pb2
        self.grpc = grpc
        ch = grpc.insecure_channel("unix://" + a.socket)
        self.rt = api_pb2_grpc.RuntimeServiceStub(ch)
        self.img = api_pb2_grpc.ImageServiceStub(ch)
        self.a = a
        self.passed = 0
        self.failed = 0
        self.fig = {"handler": a.handler}

    def ok(self, what):
        self.passed += 1
        print("ok   %s: %s" % (self.a.handler, what), flush=True)

    def bad(self, what):
        self.failed += 1
        print("FAIL %s: %s" % (self.a.handler, what), flush=True)

    def check(self, cond, what, why=""):
        if cond:
            self.ok(what)
        else:
            self.bad(what + (" (%s)" % why if why else ""))
        return cond

    # -- host-side views of what a pod leaves ----------------------------
    def vm_count(self):
        return len(self.vm_pids())

    def vm_pids(self):
        """VMs: vmm processes started as "vmm run" whose parent is not one
        (a VMM's helper child shares its command line)."""
        pids = set(self.vmm_pids())
        runs = set()
        for p in pids:
            try:
                cmd = open("/proc/%d/cmdline" % p, "rb").read().split(b"\0")
                if len(cmd) > 1 and cmd[1] == b"run":
                    runs.add(p)
            except OSError:
                pass
        top = set()
        for p in runs:
            try:
                with open("/proc/%d/stat" % p) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid not in runs:
                top.add(p)
        return top

    def vmm_pids(self):
        """Processes running the vmm binary (vmm-oci is a link to it)."""
        if not self.a.vmm:
            return []
        want = os.path.realpath(self.a.vmm)
        pids = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                if os.path.realpath("/proc/%s/exe" % p) == want:
                    pids.append(int(p))
            except OSError:
                pass
        return pids

    @staticmethod
    def taps():
        return sorted(n for n in os.listdir("/sys/class/net")
                      if os.path.exists("/sys/class/net/%s/tun_flags" % n))

    @staticmethod
    def mounts_naming(ids):
        with open("/proc/self/mountinfo") as f:
            return [l.split()[4] for l in f if any(i in l for i in ids)]

    @staticmethod
    def tree_pss_kib(root_pids):
        """PSS (KiB) of root_pids and all their descendants."""
        kids = {}
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % p) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
        seen, todo, total = set(), list(root_pids), 0
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            todo.extend(kids.get(p, []))
            try:
                with open("/proc/%d/smaps_rollup" % p) as f:
                    for l in f:
                        if l.startswith("Pss:"):
                            total += int(l.split()[1])
            except OSError:
                pass
        return total, len(seen)

    @staticmethod
    def shims_of(sandbox_id):
        out = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                cmd = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
            except OSError:
                continue
            # containerd's runc shim, and vmm's thin one in front of it
            if cmd and cmd[0].endswith((b"containerd-shim-runc-v2", b"containerd-shim-vmm-v2")) and \
                    sandbox_id.encode() in cmd:
                out.append(int(p))
        return out

    # -- CRI calls ---------------------------------------------------------
    def status(self, cid):
        return self.rt.ContainerStatus(self.pb.ContainerStatusRequest(container_id=cid)).status

    def wait_state(self, cid, state, timeout):
        end = time.time() + timeout
        st = self.status(cid)
        while st.state != state and time.time() < end:
            time.sleep(0.2)
            st = self.status(cid)
        return st

    def exec_sync(self, cid, cmd, timeout=60):
        return self.rt.ExecSync(self.pb.ExecSyncRequest(container_id=cid, cmd=cmd, timeout=timeout),
                                timeout=timeout + 30)

    def exec_stream(self, cid, cmd):
        """Exec through the streaming server (as kubectl exec): stdout,
        stderr and the exit code from its status channel."""
        url = self.rt.Exec(self.pb.ExecRequest(container_id=cid, cmd=cmd, stdout=True, stderr=True)).url
        ws = WebSocket(url, "v4.channel.k8s.io")
        out = {1: b"", 2: b"", 3: b""}
        try:
            while True:
                m = ws.recv()
                if m is None:
                    break
                if m[0] in out:
                    out[m[0]] += m[1]
        finally:
            ws.close()
        st = json.loads(out[3] or b"{}")
        code = 0
        if st.get("status") == "Failure":
            causes = st.get("details", {}).get("causes", [])
            code = next((int(c["message"]) for c in causes if c.get("reason") == "ExitCode"), -1)
        return out[1], out[2], code

    def port_forward(self, pod, port, request):
        """PortForward (as kubectl port-forward): request sent to the pod's
        localhost:port, what comes back until the pod's side closes."""
        url = self.rt.PortForward(self.pb.PortForwardRequest(pod_sandbox_id=pod, port=[port])).url
        ws = WebSocket(url + "?port=%d" % port, "v4.channel.k8s.io")
        data, errs, sent = b"", b"", False
        try:
            first = {0: True, 1: True}
            while True:
                m = ws.recv()
                if m is None:
                    break
                ch, body = m
                if ch in first and first[ch]:
                    first[ch] = False  # each channel opens with its port (2 bytes, little-endian)
                    body = body[2:]
                    if not first[0] and not first[1] and not sent:
                        ws.send(0, request)
                        sent = True
                if ch == 0:
                    data += body
                elif ch == 1:
                    errs += body
        finally:
            ws.close()
        return data, errs

    def kv_value(self, text):
        """KeyValue.value: a string in most versions of the proto, bytes in some."""
        f = self.pb.KeyValue.DESCRIPTOR.fields_by_name["value"]
        return text.encode() if f.type == f.TYPE_BYTES else text

    def spec_namespaces(self, cid):
        """The linux.namespaces containerd gave a container (its bundle's
        config.json under containerd's --state), for a failing check's message."""
        try:
            with open(os.path.join(self.a.state, "io.containerd.runtime.v2.task/k8s.io", cid, "config.json")) as f:
                return json.load(f).get("linux", {}).get("namespaces")
        except (OSError, ValueError) as e:
            return str(e)

    def container_config(self, name, cmd, log, mounts=(), mem=0, attempt=0, pod_cfg=None):
        """A container's config; with pod_cfg, its namespace options as
        kubelet derives them from the pod's (pid: the pod's POD when it
        shares its processes, else CONTAINER)."""
        pb = self.pb
        sc = None
        if pod_cfg is not None:
            ns = pod_cfg.linux.security_context.namespace_options
            sc = pb.LinuxContainerSecurityContext(namespace_options=pb.NamespaceOption(
                network=ns.network, pid=pb.POD if ns.pid == pb.POD else ns.pid, ipc=ns.ipc))
        return pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=attempt),
            image=pb.ImageSpec(image=self.a.image),
            command=cmd,
            envs=[pb.KeyValue(key="CRI_TEST", value=self.kv_value("from-the-cri"))],
            mounts=[pb.Mount(container_path=m[0], host_path=m[1], readonly=len(m) > 2 and m[2]) for m in mounts],
            log_path=log,
            linux=pb.LinuxContainerConfig(
                resources=pb.LinuxContainerResources(memory_limit_in_bytes=mem) if mem else None,
                security_context=sc))

    def start(self, pod, pod_cfg, cfg, ids):
        c = self.rt.CreateContainer(self.pb.CreateContainerRequest(pod_sandbox_id=pod, config=cfg,
                                                                   sandbox_config=pod_cfg), timeout=600).container_id
        ids.append(c)
        self.rt.StartContainer(self.pb.StartContainerRequest(container_id=c), timeout=600)
        return c

    def check_pod(self, cond, what, why=""):
        """A check of what a pod shares: counted for vmm; with runc, the
        reference, only said (runc's own pods are not what is tested)."""
        if self.a.handler == "vmm":
            return self.check(cond, what, why)
        print("     %s (reference, not counted): %s: %s%s" % (self.a.handler, what, "yes" if cond else "no",
                                                            "" if cond else " (%s)" % why), flush=True)
        return cond

    def pod_vm_size(self, pod, c):
        """The pod's VM is sized from what containerd gives the sandbox
        (io.kubernetes.cri.sandbox-memory, or its memory limit) plus 64 MiB."""
        p = os.path.join(os.path.dirname(self.a.logs), "state", "io.containerd.runtime.v2.task", "k8s.io", pod,
                         "config.json")
        try:
            spec = json.load(open(p))
        except (OSError, ValueError):
            spec = {}
        ann = spec.get("annotations", {}).get("io.kubernetes.cri.sandbox-memory")
        lim = spec.get("linux", {}).get("resources", {}).get("memory", {}).get("limit")
        if not (ann and int(ann) > 0) and not lim:
            print("     skip: the pod VM's size: containerd gives the sandbox no memory (%s)" % p)
            return
        r = self.exec_sync(c, ["sed", "-n", "s/^MemTotal: *\\([0-9]*\\) kB/\\1/p", "/proc/meminfo"])
        kib = int(r.stdout.strip() or 0)
        self.check(380 * 1024 < kib <= 448 * 1024, "the pod's VM is sized from the sandbox's 384 MiB (%s) + 64: "
                   "MemTotal %d MiB" % ("annotation" if ann else "limit", kib // 1024), r.stdout)

    def one_vm(self, vms, what):
        """vmm: the pod is exactly the one VM it booted at RunPodSandbox
        (runc: none)."""
        now = self.vm_pids()
        if self.a.handler == "vmm":
            return self.check(now == vms and len(now) == 1, "one VM for the pod: %s" % what,
                              "VMs %s, at RunPodSandbox %s" % (sorted(now), sorted(vms)))
        return self.check(not now, "no VM (runc): %s" % what, str(sorted(now)))

    def pod_sharing(self, pod, pod_cfg, ids, vms):
        """Two more containers in the pod: localhost between them, a shared
        emptyDir, their own roots and cgroups, ExecSync into each; then a
        container that exits and is restarted in the pod; one VM throughout."""
        pb, vmm = self.pb, self.a.handler == "vmm"
        empty = tempfile.mkdtemp(prefix="emptydir.", dir=self.a.logs)
        mnt = [("/data", empty)]
        # a configMap's file and a secret's folder, read-only, as kubelet binds them
        cfgdir = tempfile.mkdtemp(prefix="configmap.", dir=self.a.logs)
        secret = tempfile.mkdtemp(prefix="secret.", dir=self.a.logs)
        with open(os.path.join(cfgdir, "app.conf"), "w") as f:
            f.write("key=value\n")
        with open(os.path.join(secret, "token"), "w") as f:
            f.write("s3cret\n")
        web = self.start(pod, pod_cfg, self.container_config(
            "web", ["httpd", "-f", "-p", "8080", "-h", "/www"], "web.log",
            mnt + [("/etc/app.conf", os.path.join(cfgdir, "app.conf"), True), ("/run/secret", secret, True)],
            mem=128 << 20, pod_cfg=pod_cfg), ids)
        cli = self.start(pod, pod_cfg, self.container_config(
            "client", ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 600 & wait; done"], "client.log", mnt,
            pod_cfg=pod_cfg), ids)
        st = [self.wait_state(x, pb.CONTAINER_RUNNING, 60).state for x in (web, cli)]
        self.check(st == [pb.CONTAINER_RUNNING] * 2, "two more containers in the pod running",
                   str([pb.ContainerState.Name(x) for x in st]))
        self.one_vm(vms, "three containers running")
        # busybox's nc: its static wget crashes in getaddrinfo (Debian 12)
        got, end = "", time.time() + 60
        while time.time() < end:
            r = self.exec_sync(cli, ["sh", "-c", "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 8080"])
            got = r.stdout.decode()
            if "hello-from-the-pod" in got:
                break
            time.sleep(0.5)
        self.check_pod(got.startswith("HTTP/1.") and got.rstrip().endswith("hello-from-the-pod"),
                   "localhost: the client reaches the web container's port 8080", repr((got[-60:], r.stderr[-80:])))
        r1 = self.exec_sync(web, ["sh", "-c", "echo shared-$CRI_TEST > /data/f && echo web-only > /tmp/mine"])
        r2 = self.exec_sync(cli, ["cat", "/data/f"])
        host = open(os.path.join(empty, "f")).read() if os.path.exists(os.path.join(empty, "f")) else ""
        if not self.check_pod(r1.exit_code == 0 and r2.stdout == b"shared-from-the-cri\n" and host == "shared-from-the-cri\n",
                          "emptyDir: a file the web container writes, the client and the host read",
                          repr((r1.exit_code, r1.stderr, r2.stdout, host))):
            r = self.exec_sync(web, ["sh", "-c", "ls -la / /data; grep -e data -e ' / ' /proc/self/mountinfo"])
            print("     web's view: %r %r" % (r.stdout[-600:], r.stderr[-200:]))
        r = self.exec_sync(cli, ["sh", "-c", "test -e /tmp/mine"])
        r2 = self.exec_sync(web, ["cat", "/tmp/mine"])
        self.check_pod(r.exit_code == 1 and r2.stdout == b"web-only\n", "roots of their own: the web container's "
                   "/tmp/mine is not the client's", repr((r.exit_code, r2.stdout)))
        r = self.exec_sync(web, ["sh", "-c", "cat /etc/app.conf /run/secret/token; echo x >> /etc/app.conf && echo wrote; "
                                             "touch /run/secret/new && echo wrote; true"])
        self.check_pod(r.stdout == b"key=value\ns3cret\n" and not os.path.exists(os.path.join(secret, "new")) and
                       open(os.path.join(cfgdir, "app.conf")).read() == "key=value\n",
                       "read-only volumes: a configMap's file and a secret's folder read, not written",
                       repr((r.stdout, r.stderr[-120:])))
        cg = [self.exec_sync(x, ["cat", "/proc/self/cgroup"]).stdout.decode().strip() for x in (web, cli)]
        if vmm:
            self.check(cg[0].endswith("/vmm-pod/" + web) and cg[1].endswith("/vmm-pod/" + cli),
                       "cgroups of their own in the guest (%s...)" % cg[0][:24], repr(cg))
            r = self.exec_sync(web, ["sh", "-c", "cat /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/memory.max"])
            self.check(r.stdout == b"134217728\n", "the web container's memory limit (128 MiB) is its cgroup's in the "
                       "guest", repr((r.stdout, r.stderr)))
            # UpdateContainerResources: the shim's runc update, into the guest cgroup
            try:
                self.rt.UpdateContainerResources(pb.UpdateContainerResourcesRequest(
                    container_id=web, linux=pb.LinuxContainerResources(memory_limit_in_bytes=192 << 20,
                                                                       cpu_quota=50000, cpu_period=100000)))
                r = self.exec_sync(web, ["sh", "-c", "G=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); "
                                                     "cat $G/memory.max $G/cpu.max"])
                self.check(r.stdout == b"201326592\n50000 100000\n", "UpdateContainerResources: 192 MiB and half "
                           "a CPU in the web container's guest cgroup", repr((r.stdout, r.stderr)))
            except self.grpc.RpcError as e:
                self.bad("UpdateContainerResources: %s" % e.details())
        # PID namespaces of their own (the pod asks pid=CONTAINER): each
        # command is its container's PID 1, and neither sees the other's
        # processes (a proc of their own: runc's, and the guest's here)
        ps = [self.exec_sync(x, ["sh", "-c", "cat /proc/1/comm; cat /proc/[0-9]*/comm | sort -u | tr '\\n' ' '"])
              .stdout.decode().split("\n", 1) for x in (web, cli)]
        self.check_pod(len(ps[0]) == 2 and len(ps[1]) == 2 and ps[0][0] == "httpd" and ps[1][0] == "sh" and
                       "httpd" not in ps[1][1] and "init" not in ps[1][1] + ps[0][1],
                       "PID namespaces: each container's command is its PID 1; the client sees no httpd",
                       repr((ps, self.spec_namespaces(cli))))
        # the pod's memory with three containers running
        kib, n = self.tree_pss_kib(self.shims_of(pod))
        self.fig["pod3_pss_mib"] = round(kib / 1024, 1)
        print("     %s: the pod's memory with 3 containers (PSS, %d processes): %.1f MiB"
              % (self.a.handler, n, kib / 1024))
        # a container that exits, restarted as kubelet does (the same
        # config, attempt 1): the first run exits 3, the second stays
        cmd = ["sh", "-c", "test -e /data/ran && exec sleep 600; touch /data/ran; exit 3"]
        r0 = self.start(pod, pod_cfg, self.container_config("restarts", cmd, "restarts-0.log", mnt), ids)
        st = self.wait_state(r0, pb.CONTAINER_EXITED, 120)
        self.check(st.state == pb.CONTAINER_EXITED and st.exit_code == 3, "a container exits (3)",
                   "%s %d" % (pb.ContainerState.Name(st.state), st.exit_code))
        r1 = self.start(pod, pod_cfg, self.container_config("restarts", cmd, "restarts-1.log", mnt, attempt=1), ids)
        st = self.wait_state(r1, pb.CONTAINER_RUNNING, 60)
        r = self.exec_sync(r1, ["sh", "-c", "echo again"])
        self.check(st.state == pb.CONTAINER_RUNNING and r.stdout == b"again\n",
                   "restarted (attempt 1): running, ExecSync answers", pb.ContainerState.Name(st.state))
        self.one_vm(vms, "after the restart")
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=r0))
        m = self.mounts_naming([r0])
        self.check(not m, "RemoveContainer of the exited one: no mount of it left", " ".join(m[:3]))
        for x in (r1, web, cli):
            self.rt.StopContainer(pb.StopContainerRequest(container_id=x, timeout=10), timeout=120)
            self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=x))
        m = self.mounts_naming([r1, web, cli])
        self.check(not m, "three more stopped and removed: no mount of them left", " ".join(m[:3]))
        self.one_vm(vms, "after RemoveContainer")

    def run(self):
        pb, a = self.pb, self.a
        v = self.rt.Version(pb.VersionRequest())
        self.check(v.runtime_api_version == "v1", "Version: %s %s, CRI %s" %
                   (v.runtime_name, v.runtime_version, v.runtime_api_version))
        st = self.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=a.image)))
        if not self.check(st.image.id != "", "ImageStatus: %s is there (%s)" % (a.image, st.image.id[:19])):
            return
        vmm_before = len(self.vmm_pids())
        taps_before = self.taps()
        uid = uuid.uuid4().hex
        logdir = os.path.join(a.logs, a.handler)
        os.makedirs(logdir, exist_ok=True)
        cg_parent = self.pod_cgroup(uid)
        pod_cfg = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="cri-" + a.handler, uid=uid, namespace="vmm-test", attempt=0),
            # no hostname: a pod on the host's network shares its UTS namespace
            log_directory=logdir,
            linux=pb.LinuxPodSandboxConfig(security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)),
                cgroup_parent=cg_parent or "",
                # the sum of the containers' limits, as kubelet gives it
                resources=pb.LinuxContainerResources(memory_limit_in_bytes=384 << 20)))
        t0 = time.monotonic()
        try:
            pod = self.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_cfg, runtime_handler=a.handler),
                                        timeout=600).pod_sandbox_id
        except self.grpc.RpcError as e:
            self.bad("RunPodSandbox: %s" % e.details())
            return
        t_pod = time.monotonic()
        self.ok("RunPodSandbox: %s... in %.2f s" % (pod[:12], t_pod - t0))
        self.fig["run_pod_sandbox_s"] = round(t_pod - t0, 2)
        self.pod_vms = self.vm_pids()
        if a.handler == "vmm":
            self.pod_jailed(self.pod_vms)
        ids = [pod]
        try:
            if cg_parent:
                self.pod_stats(pod, cg_parent)
            self.pod_flow(pod, pod_cfg, ids, t0)
        finally:
            self.teardown(pod, ids, vmm_before, taps_before)
            if cg_parent:
                self.pod_cgroup_gone(cg_parent)

    # -- the pod's cgroup on the host, as kubelet makes it -----------------
    CG = "/sys/fs/cgroup"

    def pod_cgroup(self, uid):
        """kubelet's part (cgroupfs driver): the pod's cgroup, made before
        RunPodSandbox with the controllers its children need. Its path as
        the CRI's cgroup_parent, or None without cgroup v2 (said)."""
        if not os.path.exists(os.path.join(self.CG, "cgroup.controllers")):
            print("skip %s: the pod's cgroup checks: no cgroup v2 at %s" % (self.a.handler, self.CG))
            return None
        rel = "/vmmcri/pod" + uid
        path = self.CG
        for part in rel.strip("/").split("/"):
            for c in ("cpu", "memory", "pids"):
                try:
                    with open(os.path.join(path, "cgroup.subtree_control"), "a") as f:
                        f.write("+" + c)
                except OSError:
                    pass
            path = os.path.join(path, part)
            os.makedirs(path, exist_ok=True)
        return rel

    def cg_of(self, pid):
        with open("/proc/%d/cgroup" % pid) as f:
            return next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), "")

    @staticmethod
    def status_of(pid):
        with open("/proc/%d/status" % pid) as f:
            return dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)

    def pod_jailed(self, relays):
        """The pod's VMM is jailed as root with a file server's
        capabilities (docs/security.md): `vmm run` stays outside as the
        relay, its child is pid 1 of a PID namespace of its own, in a
        mount namespace of its own without the host's files, CapEff and
        CapBnd 0x1f (0x41f with the port-forward's listener on port 1)."""
        why = []
        for r in relays:
            kids = [int(t) for t in open("/proc/%d/task/%d/children" % (r, r)).read().split()]
            vmm = [k for k in kids if self.status_of(k).get("NSpid", "").split()[-1:] == ["1"]]
            if len(vmm) != 1:
                why.append("%d: no VMM in a PID namespace of its own (children %s)" % (r, kids))
                continue
            st = self.status_of(vmm[0])
            if st.get("CapEff") not in ("000000000000001f", "000000000000041f") or st.get("CapBnd") != st.get("CapEff"):
                why.append("%d: CapEff %s CapBnd %s" % (vmm[0], st.get("CapEff"), st.get("CapBnd")))
            if os.readlink("/proc/%d/ns/mnt" % vmm[0]) == os.readlink("/proc/self/ns/mnt"):
                why.append("%d: the host's mount namespace" % vmm[0])
            if os.path.exists("/proc/%d/root/etc/passwd" % vmm[0]):
                why.append("%d: sees the host's files" % vmm[0])
        self.check(relays and not why, "the pod's VMM is jailed: pid 1 of its PID namespace, its own mount "
                   "namespace, root with a file server's capabilities only", "; ".join(why))

    def pod_stats(self, pod, parent):
        """The VMM counted in the pod's cgroup: it runs under the CRI's
        cgroup_parent, and PodSandboxStats (containerd reads that cgroup)
        shows the VM's memory and CPU."""
        pb, a = self.pb, self.a
        if a.handler == "vmm":
            where = [self.cg_of(p) for p in self.pod_vms]
            self.check(where and all(w.startswith(parent + "/") for w in where),
                       "the pod's VMM runs in the pod's cgroup (%s)" % (where[0] if where else "no VMM"), repr(where))
        try:
            st = self.rt.PodSandboxStats(pb.PodSandboxStatsRequest(pod_sandbox_id=pod)).stats
        except self.grpc.RpcError as e:
            self.bad("PodSandboxStats: %s" % e.details())
            return
        mem = st.linux.memory.working_set_bytes.value
        cpu = st.linux.cpu.usage_core_nano_seconds.value
        self.fig["pod_stats_working_set_mib"] = round(mem / 1048576.0, 1)
        if a.handler == "vmm":
            # a booted guest's kernel and guest-init: tens of MiB; the
            # pause process alone (runc) is well under one
            self.check(mem >= 16 << 20 and cpu > 0,
                       "PodSandboxStats: the pod's VM, %.1f MiB working set, %.2f s of CPU" % (mem / 1048576.0, cpu / 1e9),
                       "memory %d, cpu %d" % (mem, cpu))
        else:
            print("     %s: PodSandboxStats: %.1f MiB working set, %.2f s of CPU (reference)" %
                  (a.handler, mem / 1048576.0, cpu / 1e9))

    def pod_cgroup_gone(self, parent):
        """After RemovePodSandbox nothing is left in the pod's cgroup (the
        runtime removed the containers' cgroups); then kubelet's part:
        the pod's own goes."""
        path = self.CG + parent
        left = [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))] if os.path.isdir(path) else []
        self.check(not left, "no container cgroup left under the pod's", " ".join(left))
        for d in (path, os.path.dirname(path)):
            try:
                os.rmdir(d)
            except OSError:
                pass

    def new_pod(self, what, name, network, pid, **extra):
        """RunPodSandbox of a further pod (its logs in a folder of its own):
        (pod, config), or (None, config) after a FAIL saying why."""
        pb, a = self.pb, self.a
        logdir = os.path.join(a.logs, "%s-%s" % (a.handler, name))
        os.makedirs(logdir, exist_ok=True)
        pod_cfg = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="%s-%s" % (name, a.handler), uid=uuid.uuid4().hex,
                                           namespace="vmm-test"),
            log_directory=logdir,
            linux=pb.LinuxPodSandboxConfig(security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=network, pid=pid, ipc=pb.POD))), **extra)
        try:
            return self.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_cfg, runtime_handler=a.handler),
                                         timeout=600).pod_sandbox_id, pod_cfg
        except self.grpc.RpcError as e:
            self.bad("%s: RunPodSandbox: %s" % (what, e.details()))
            return None, pod_cfg

    def shared_pid_pod(self):
        """A pod that shares its processes (shareProcessNamespace: pid=POD):
        the pause is PID 1 of the pod's namespace, and each container sees
        the other's processes; execs join it too."""
        pb = self.pb
        vmm_before, taps_before = len(self.vmm_pids()), self.taps()
        pod, pod_cfg = self.new_pod("shared PID pod", "pid", pb.NODE, pb.POD)
        if not pod:
            return
        ids = [pod]
        try:
            loop = "trap 'exit 0' TERM; while :; do sleep %d & wait; done"
            x = self.start(pod, pod_cfg, self.container_config("a", ["sh", "-c", loop % 601], "a.log",
                                                               pod_cfg=pod_cfg), ids)
            y = self.start(pod, pod_cfg, self.container_config("b", ["sh", "-c", loop % 602], "b.log",
                                                               pod_cfg=pod_cfg), ids)
            for c in (x, y):
                self.wait_state(c, pb.CONTAINER_RUNNING, 60)
            # this test's pause is a shell waiting on sleep 3600 (cri.sh)
            # (a's child "sleep 601": the exec's own command lines name it too)
            r = self.exec_sync(y, ["sh", "-c", "grep -c 3600 /proc/1/cmdline; for f in /proc/[0-9]*/cmdline; do "
                                               "tr '\\0' ' ' < $f; echo; done | grep -cx 'sleep 601 '"])
            out = r.stdout.decode().split()
            self.check_pod(out == ["1", "1"], "shared PID pod: the pause is PID 1 and b sees a's sleep 601",
                       repr((r.stdout, r.stderr[-100:], self.spec_namespaces(pod), self.spec_namespaces(y))))
            for c in (x, y):
                self.rt.StopContainer(pb.StopContainerRequest(container_id=c, timeout=10), timeout=120)
                self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c))
        except self.grpc.RpcError as e:
            self.bad("shared PID pod: %s" % e.details())
        finally:
            self.teardown(pod, ids, vmm_before, taps_before, "shared PID pod: ")

    def cni_pod(self):
        """A pod on the CNI bridge: its IP serves the container's port to the host."""
        pb, a = self.pb, self.a
        vmm_before, taps_before = len(self.vmm_pids()), self.taps()
        links_before = set(os.listdir("/sys/class/net"))
        pod, pod_cfg = self.new_pod("CNI pod", "cni", pb.POD, pb.CONTAINER, hostname="cni-" + a.handler,
                                    dns_config=pb.DNSConfig(servers=["10.89.9.1"], searches=["vmm.test"]))
        if not pod:
            return
        ids = [pod]
        try:
            ip = self.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=pod)).status.network.ip
            self.check(ip != "", "CNI pod: RunPodSandbox, the pod's IP %s" % ip)
            cfg = self.container_config("web", ["httpd", "-f", "-p", "8080", "-h", "/www"], "web.log")
            c = self.rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=pod, config=cfg,
                                                                  sandbox_config=pod_cfg), timeout=600).container_id
            ids.append(c)
            self.rt.StartContainer(pb.StartContainerRequest(container_id=c), timeout=600)
            got, end = "", time.time() + 60
            while time.time() < end:
                r = subprocess.run(["wget", "-qO-", "-T", "5", "http://%s:8080/" % ip], capture_output=True,
                                   text=True)
                got = r.stdout.strip()
                if got:
                    break
                time.sleep(0.5)
            self.check(got == "hello-from-the-pod", "CNI pod: the host reaches the container's port at %s:8080" % ip,
                       repr(got))
            data, errs = self.port_forward(pod, 8080, b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            self.check(data.startswith(b"HTTP/1.") and data.rstrip().endswith(b"hello-from-the-pod"),
                       "CNI pod: PortForward to the pod's localhost:8080 (WebSocket)", repr((data[-80:], errs[:600])))
            data, errs = self.port_forward(pod, 8081, b"GET / HTTP/1.0\r\n\r\n")
            # runc: containerd's dial fails; vmm: the VMM accepts, the guest
            # finds nothing and the VMM closes it: either way an error on
            # the stream's error channel and no data
            self.check(data == b"" and errs.startswith(b"error forwarding port 8081"),
                       "CNI pod: PortForward to a port nothing listens on gives nothing back",
                       repr((data[:80], errs[:200])))
            out, err, code = self.exec_stream(c, ["sh", "-c", "echo out; echo err >&2; hostname; exit 3"])
            self.check((out, err, code) == (("out\ncni-%s\n" % a.handler).encode(), b"err\n", 3),
                       "CNI pod: Exec through the streaming server (stdout, stderr, exit code 3)",
                       repr((out, err, code)))
            r = self.exec_sync(c, ["sh", "-c", "hostname; cat /etc/hostname; grep -c '^nameserver 10.89.9.1' /etc/resolv.conf"])
            want = ("cni-%s\ncni-%s\n1\n" % (a.handler, a.handler)).encode()
            self.check_pod(r.stdout == want,
                           "CNI pod: the pod's hostname, /etc/hostname and resolv.conf from the CRI", repr(r.stdout))
            self.rt.StopContainer(pb.StopContainerRequest(container_id=c, timeout=10), timeout=120)
            self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c))
        except self.grpc.RpcError as e:
            self.bad("CNI pod: %s" % e.details())
        finally:
            self.teardown(pod, ids, vmm_before, taps_before, "CNI pod: ")
            extra = sorted(set(os.listdir("/sys/class/net")) - links_before - {a.cni})
            self.check(not extra, "CNI pod: no interface left on the host", " ".join(extra))

    def pod_flow(self, pod, pod_cfg, ids, t0):
        pb = self.pb
        cfg = self.container_config("main", ["sh", "-c", "trap 'exit 0' TERM; echo started; echo to-stderr >&2; "
                                                    "while :; do sleep 600 & wait; done"], "main.log")
        t1 = time.monotonic()
        c = self.rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=pod, config=cfg,
                                                              sandbox_config=pod_cfg), timeout=600).container_id
        ids.append(c)
        t2 = time.monotonic()
        self.rt.StartContainer(pb.StartContainerRequest(container_id=c), timeout=600)
        t3 = time.monotonic()
        st = self.wait_state(c, pb.CONTAINER_RUNNING, 60)
        t4 = time.monotonic()
        if not self.check(st.state == pb.CONTAINER_RUNNING, "CreateContainer %.2f s, StartContainer %.2f s: running"
                          % (t2 - t1, t3 - t2), pb.ContainerState.Name(st.state)):
            return
        self.fig.update(create_container_s=round(t2 - t1, 2), start_container_s=round(t3 - t2, 2),
                        pod_to_running_s=round(t4 - t0, 2))
        print("     %s: RunPodSandbox to a running container: %.2f s" % (self.a.handler, t4 - t0))
        self.check(st.started_at > 0 and st.image.image != "" and st.log_path.endswith("main.log"),
                   "ContainerStatus: started_at, image %s, log_path" % st.image.image)
        # ExecSync: output, stderr, status, env, kernel
        r = self.exec_sync(c, ["sh", "-c", "echo exec-out; echo exec-err >&2; exit 3"])
        self.check(r.stdout == b"exec-out\n" and r.stderr == b"exec-err\n" and r.exit_code == 3,
                   "ExecSync: stdout, stderr, exit code 3", repr((r.stdout, r.stderr, r.exit_code)))
        r = self.exec_sync(c, ["sh", "-c", "echo $CRI_TEST"])
        self.check(r.stdout == b"from-the-cri\n" and r.exit_code == 0, "ExecSync: the container's env",
                   repr(r.stdout))
        r = self.exec_sync(c, ["uname", "-r"])
        kern = r.stdout.decode().strip()
        host = os.uname().release
        if self.a.handler == "runc":
            self.check(kern == host, "ExecSync: uname -r is the host's (%s)" % kern, kern)
        else:
            self.check(kern != "" and kern != host, "ExecSync: uname -r is the guest's %s (host %s)" % (kern, host),
                       kern)
        # a missing command: a non-zero exit code (vmm: 127, as a shell
        # says) or an error from the call (runc cannot exec it)
        try:
            r = self.exec_sync(c, ["no-such-command"])
            self.check(r.exit_code != 0, "ExecSync: a missing command fails (exit code %d)" % r.exit_code)
        except self.grpc.RpcError as e:
            self.ok("ExecSync: a missing command fails (%s)" % e.details()[-60:])
        if self.a.handler == "vmm":
            self.pod_vm_size(pod, c)
        lat = []
        for _ in range(5):
            s = time.monotonic()
            self.exec_sync(c, ["true"])
            lat.append(time.monotonic() - s)
        self.fig["exec_sync_ms"] = round(statistics.median(lat) * 1000, 1)
        print("     %s: ExecSync latency (true, median of 5): %.1f ms" % (self.a.handler, self.fig["exec_sync_ms"]))
        # the pod's memory: its shim's process tree (shim, pause, the container, or their VMMs)
        shims = self.shims_of(pod)
        kib, n = self.tree_pss_kib(shims)
        self.fig["pod_pss_mib"] = round(kib / 1024, 1)
        self.fig["pod_processes"] = n
        self.fig["vmm_processes"] = len(self.vmm_pids())
        self.fig["vms"] = self.vm_count()
        print("     %s: the pod's memory (PSS of its shim's tree, %d processes): %.1f MiB; "
              "processes of the vmm binary: %d, VMs: %d"
              % (self.a.handler, n, kib / 1024, self.fig["vmm_processes"], self.fig["vms"]))
        self.check(kib > 0, "the pod's processes found (%d under %d shim(s))" % (n, len(shims)))
        thin = [p for p in shims if open("/proc/%d/cmdline" % p, "rb").read().split(b"\0")[0]
                .endswith(b"containerd-shim-vmm-v2")]
        if thin:
            tk, _ = self.tree_pss_kib(thin)
            self.fig["thin_shim_pss_mib"] = round(tk / 1024, 2)
            print("     %s: of it, containerd-shim-vmm-v2 (the thin shim): %.2f MiB PSS" % (self.a.handler, tk / 1024))
        # logs in the CRI format: "TIMESTAMP STREAM TAG MESSAGE"
        path = os.path.join(pod_cfg.log_directory, "main.log")
        lines = open(path).read().splitlines() if os.path.exists(path) else []
        fmt = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) (stdout|stderr) [FP] ")
        self.check(any(re.match(fmt.pattern + "started$", l) and " stdout " in l for l in lines) and
                   any(" stderr F to-stderr" in l for l in lines) and all(fmt.match(l) for l in lines),
                   "logs in the CRI format (%d lines)" % len(lines), repr(lines[:3]))
        # a container that exits on its own: exit code, reason
        cfg2 = self.container_config("exits", ["sh", "-c", "echo bye; exit 3"], "exits.log")
        c2 = self.rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=pod, config=cfg2,
                                                               sandbox_config=pod_cfg), timeout=600).container_id
        ids.append(c2)
        self.rt.StartContainer(pb.StartContainerRequest(container_id=c2), timeout=600)
        st = self.wait_state(c2, pb.CONTAINER_EXITED, 120)
        # finished_at is the shim's exit event, started_at containerd's own
        # stamp after the start: a container that exits at once may end
        # "before" it started (seen with runc), so each is only checked set
        self.check(st.state == pb.CONTAINER_EXITED and st.exit_code == 3 and st.reason == "Error" and
                   st.finished_at > 0 and st.started_at > 0,
                   "a container that exits: EXITED, exit code 3, reason Error",
                   "%s %d %s" % (pb.ContainerState.Name(st.state), st.exit_code, st.reason))
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c2))
        self.pod_sharing(pod, pod_cfg, ids, self.pod_vms)
        self.container_stats(pod, pod_cfg, ids)
        # after pod_sharing's memory figures: the OOM container's 150 MiB
        # would stay in them until the guest reported it free
        self.oom_container(pod, pod_cfg, ids)
        self.attach_container(pod, pod_cfg, ids)
        # stop and remove the main container
        s = time.monotonic()
        self.rt.StopContainer(pb.StopContainerRequest(container_id=c, timeout=10), timeout=120)
        st = self.status(c)
        self.check(st.state == pb.CONTAINER_EXITED, "StopContainer: EXITED in %.2f s (exit code %d, %s)" %
                   (time.monotonic() - s, st.exit_code, st.reason), pb.ContainerState.Name(st.state))
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c))
        left = [x.id for x in self.rt.ListContainers(pb.ListContainersRequest()).containers if x.id in (c, c2)]
        self.check(not left, "RemoveContainer: gone from ListContainers")

    def container_stats(self, pod, pod_cfg, ids):
        """ContainerStats and ListContainerStats (kubelet's `kubectl top
        pod --containers`): a container whose busybox tail holds 24 MiB of
        a pipe shows that working set and its CPU time. With vmm the
        figures come from the container's cgroup in the pod's VM
        (containerd-shim-vmm-v2); the host's cgroup of the container holds
        only its init proxy, a few hundred KiB."""
        pb = self.pb
        cfg = self.container_config("stats", ["sh", "-c", "(head -c 25165824 /dev/zero; exec sleep 3600) | "
                                              "tail -c 25165824 > /dev/null"], "stats.log")
        c = self.start(pod, pod_cfg, cfg, ids)
        mem = cpu = 0
        why = ""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                st = self.rt.ContainerStats(pb.ContainerStatsRequest(container_id=c), timeout=60).stats
                mem = st.memory.working_set_bytes.value
                cpu = st.cpu.usage_core_nano_seconds.value
                if mem >= 20 << 20:
                    break
            except self.grpc.RpcError as e:
                why = e.details()
            time.sleep(1)
        self.fig["container_stats_working_set_mib"] = round(mem / 1048576.0, 1)
        shims = [open("/proc/%d/cmdline" % p, "rb").read().replace(b"\0", b" ")[:160].decode()
                 for p in self.shims_of(pod)]
        self.check(mem >= 20 << 20 and cpu > 0, "ContainerStats: the container's own figures, %.1f MiB working set "
                   "(its 24 MiB), %.3f s of CPU" % (mem / 1048576.0, cpu / 1e9),
                   "memory %d, cpu %d %s; the pod's shims: %s" % (mem, cpu, why, shims))
        try:
            listed = {x.attributes.id: x for x in
                      self.rt.ListContainerStats(pb.ListContainerStatsRequest(), timeout=60).stats}
        except self.grpc.RpcError as e:
            listed, why = {}, e.details()
        got = listed.get(c)
        self.check(got is not None and got.memory.working_set_bytes.value >= 20 << 20,
                   "ListContainerStats: the same container, %d containers listed" % len(listed),
                   "%s %s" % (got, why))
        self.rt.StopContainer(pb.StopContainerRequest(container_id=c, timeout=5), timeout=120)
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c))

    def oom_container(self, pod, pod_cfg, ids):
        """A container over its memory limit: the OOM killer ends it (in
        the guest's cgroup with vmm, the host's with runc) and the CRI
        says so: exit code 137, reason OOMKilled."""
        pb = self.pb
        # busybox tail -c keeps the last N bytes of a pipe in memory: 150 MiB
        # against a 64 MiB limit
        cfg = self.container_config("oom", ["sh", "-c", "head -c 209715200 /dev/zero | tail -c 157286400 > /dev/null"],
                                    "oom.log", mem=64 << 20)
        c = self.start(pod, pod_cfg, cfg, ids)
        st = self.wait_state(c, pb.CONTAINER_EXITED, 300)
        # for a failure's message: what the pod's shim was given to publish with
        log = []
        for sp in self.shims_of(pod):
            try:
                env = open("/proc/%d/environ" % sp, "rb").read().split(b"\0")
                log.append([e.decode() for e in env if e.split(b"=")[0] in (b"GRPC_ADDRESS", b"NAMESPACE")])
                log.append(open("/proc/%d/cmdline" % sp, "rb").read().replace(b"\0", b" ").decode()[:300])
            except OSError as e:
                log.append(str(e))
        self.check(st.state == pb.CONTAINER_EXITED and st.exit_code == 137 and st.reason == "OOMKilled",
                   "a container over its 64 MiB limit: exit code 137, reason OOMKilled",
                   "%s %d %s; the shim: %s" % (pb.ContainerState.Name(st.state), st.exit_code, st.reason, log))
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c))

    def attach_container(self, pod, pod_cfg, ids):
        """Attach (as kubectl attach): a line sent on the container's
        stdin through the streaming server, its answer on stdout."""
        pb = self.pb
        # the answer is repeated: containerd's Attach starts copying stdin
        # before it adds the stdout writer, so a single answer can be
        # written before anyone is attached (seen once under runc)
        cfg = self.container_config("attach", ["sh", "-c", "trap 'exit 0' TERM; read line; "
                                               "while :; do echo got:$line; sleep 0.2; done"], "attach.log")
        cfg.stdin = True
        c = self.start(pod, pod_cfg, cfg, ids)
        got = b""
        try:
            self.wait_state(c, pb.CONTAINER_RUNNING, 60)
            url = self.rt.Attach(pb.AttachRequest(container_id=c, stdin=True, stdout=True)).url
            ws = WebSocket(url, "v4.channel.k8s.io")
            try:
                ws.send(0, b"hello\n")
                while b"got:hello" not in got:
                    m = ws.recv()
                    if m is None:
                        break
                    if m[0] == 1:
                        got += m[1]
            finally:
                ws.close()
        except (OSError, self.grpc.RpcError) as e:
            got += str(e).encode()
        self.check(b"got:hello" in got, "Attach: a line on the container's stdin, its answer on stdout", repr(got[:200]))
        self.rt.StopContainer(pb.StopContainerRequest(container_id=c, timeout=5), timeout=120)
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=c))

    def teardown(self, pod, ids, vmm_before, taps_before, what=""):
        pb = self.pb
        try:
            self.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod), timeout=300)
            self.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod), timeout=300)
            self.ok(what + "StopPodSandbox, RemovePodSandbox")
        except self.grpc.RpcError as e:
            self.bad(what + "StopPodSandbox/RemovePodSandbox: %s" % e.details())
        pods = [p.id for p in self.rt.ListPodSandbox(pb.ListPodSandboxRequest()).items]
        self.check(pod not in pods, what + "the pod is gone from ListPodSandbox")
        end = time.time() + 30
        while len(self.vmm_pids()) > vmm_before and time.time() < end:
            time.sleep(0.2)
        left = len(self.vmm_pids()) - vmm_before
        self.check(left <= 0, what + "no VMM process left", "%d left" % left)
        m = self.mounts_naming(ids)
        self.check(not m, what + "no mount of the pod left", " ".join(m[:3]))
        t = [x for x in self.taps() if x not in taps_before]
        self.check(not t, what + "no TAP left", " ".join(t))
        if self.a.root:
            st = [os.path.join(d, i) for d in (self.a.root, os.path.join(self.a.root, "k8s.io")) for i in ids
                  if os.path.exists(os.path.join(d, i))]
            self.check(not st, what + "no state folder left under %s" % self.a.root, " ".join(st))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("out")
    g.add_argument("--proto", required=True)
    f = sub.add_parser("flow")
    f.add_argument("--stubs", required=True)
    f.add_argument("--socket", required=True)
    f.add_argument("--handler", required=True)
    f.add_argument("--image", required=True)
    f.add_argument("--logs", default=tempfile.gettempdir())
    f.add_argument("--vmm", default="")
    f.add_argument("--root", default="")
    f.add_argument("--report", default="")
    f.add_argument("--state", default="/run/containerd", help="containerd's state folder (its bundles)")
    f.add_argument("--cni", default="", metavar="BRIDGE",
                   help="a second pod on the CNI network, whose bridge (it stays) is BRIDGE")
    a = ap.parse_args()
    if a.cmd == "gen":
        return generate(a.proto, a.out)
    fl = Flow(a)
    for step in [fl.run, fl.shared_pid_pod] + ([fl.cni_pod] if a.cni else []):
        try:
            step()
        except Exception as e:  # a call that failed outright: one FAIL, the counts still printed
            fl.bad("%s: %s" % (type(e).__name__, getattr(e, "details", lambda: str(e))()))
    if a.report:
        with open(a.report, "w") as f:
            json.dump(fl.fig, f)
    # not at the start of a line: the tier's total (cri.sh) is what make test counts
    print("-- cri %s: %d passed, %d failed" % (a.handler, fl.passed, fl.failed))
    return 1 if fl.failed else 0


if __name__ == "__main__":
    sys.exit(main())
