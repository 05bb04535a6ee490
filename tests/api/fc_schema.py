#!/usr/bin/env python3
"""vmm's Firecracker-compatible API checked against Firecracker's own
swagger (../shared/specs/firecracker/firecracker.yaml from the repo root,
not in this repository; the tier skips without it) with python3-jsonschema, on a VMM that has no VM yet: no KVM is
needed before InstanceStart, so this runs on any host.

Each response body is validated against the schema the swagger gives for
that route and status (200 bodies, and {"fault_message"} for every 400);
request bodies we send are validated against the request schemas too, so a
test cannot drift from Firecracker's shapes. Then Firecracker's negative
cases with its status codes, the getting-started sequence with relative
paths, logger and metrics files, FlushMetrics, and the command line.

    fc_schema.py VMM
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import jsonschema
    import yaml
except ImportError:
    print("skip fc-schema: needs python3-jsonschema and python3-yaml")
    sys.exit(0)

vmm = os.path.abspath(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
# VMM_SPECS names the specs folder for a checkout elsewhere (a worktree).
spec = os.path.join(os.environ.get("VMM_SPECS") or os.path.join(os.path.dirname(root), "shared", "specs"),
                    "firecracker", "firecracker.yaml")
if not os.path.exists(spec):
    print("skip fc-schema: Firecracker's swagger is not at %s (../shared/specs/firecracker/ from the repo root)"
          % spec)
    sys.exit(0)
with open(spec) as f:
    swagger = yaml.safe_load(f)
defs = swagger["definitions"]
tmp = tempfile.mkdtemp(prefix="vmm-fcschema-")
os.environ["VMM_STATE_DIR"] = os.path.join(tmp, "state")
passed = failed = 0
procs = []


def ok(msg):
    global passed
    passed += 1
    print("ok   " + msg, flush=True)


def bad(msg):
    global failed
    failed += 1
    print("FAIL " + msg, flush=True)


def check(cond, msg, detail=""):
    (ok if cond else bad)(msg if cond else msg + (": " + str(detail) if detail else ""))
    return cond


# Firecracker's words, quoted from its tests (test_api.py) and its API
# server's parser tests (request/snapshot.rs), before boot. The bodies are
# what its Python client sends (json.dumps: ", " and ": "), so the line
# and column serde_json reports are the same.
FC_DESER = "An error occurred when deserializing the json body of a request: "
FC_TEXTS = [
    ("PUT", "/machine-config", {"mem_size_mib": 128}, "missing field `vcpu_count` at line 1 column 21."),
    ("PUT", "/machine-config", {"vcpu_count": 2}, "missing field `mem_size_mib` at line 1 column 17."),
    ("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 1 << 64},
     "error occurred when deserializing the json body of a request: invalid type"),
    ("PATCH", "/machine-config", {"mem_size_mib": 0},
     "The memory size (MiB) is either 0, or not a multiple of the configured page size."),
    ("PUT", "/boot-source", {"kernel_image_path": "foo.bar"},
     "The kernel file cannot be opened: No such file or directory (os error 2)"),
    ("PUT", "/snapshot/load", {"snapshot_path": "foo", "mem_backend": {"backend_path": "bar"}},
     "missing field `backend_type`"),
    ("PUT", "/snapshot/load", {"snapshot_path": "foo", "mem_backend": {"backend_type": "File"}},
     "missing field `backend_path`"),
    ("PUT", "/snapshot/load", {"mem_backend": {"backend_type": "File", "backend_path": "bar"}},
     "missing field `snapshot_path`"),
    ("PUT", "/snapshot/load", {"snapshot_path": "foo"},
     "missing field: either `mem_backend` or `mem_file_path` is required"),
    ("PUT", "/snapshot/load", '{\n            "snapshot_path": "foo",\n            "mem_backend": {\n'
     '                "backend_path": "bar"\n            }\n        }',
     FC_DESER + "missing field `backend_type` at line 5 column 13."),
    ("PUT", "/snapshot/load", '{\n            "mem_backend": {\n                "backend_path": "bar",\n'
     '                "backend_type": "Uffd"\n            }\n        }',
     FC_DESER + "missing field `snapshot_path` at line 6 column 9."),
    ("PATCH", "/drives/scratch", {"drive_id": "scratch", "path_on_host": "foo.bar", "is_read_only": True},
     "unknown field `is_read_only`"),
    ("PATCH", "/drives/scratch", {"drive_id": "scratch", "path_on_host": "foo.bar", "io_engine": "Sync"},
     "unknown field `io_engine`"),
    ("PATCH", "/drives/scratch", {"drive_id": "scratch", "path_on_host": "foo.bar", "is_root_device": False},
     "unknown field `is_root_device`"),
    ("PATCH", "/network-interfaces/eth0", {"iface_id": "eth0"},
     "The requested operation is not supported before starting the microVM."),
    ("PUT", "/actions", {"action_type": "SendCtrlAltDel"},
     "The requested operation is not supported before starting the microVM."),
]
# The metrics blocks Firecracker emits for the balloon and entropy devices
# (src/vmm/src/devices/virtio/{balloon,rng}/metrics.rs), every field.
FC_METRICS = {
    "balloon": ["activate_fails", "inflate_count", "stats_updates_count", "stats_update_fails", "deflate_count",
                "event_fails", "free_page_report_count", "free_page_report_freed", "free_page_report_fails",
                "free_page_hint_count", "free_page_hint_freed", "free_page_hint_fails"],
    "entropy": ["activate_fails", "entropy_event_fails", "entropy_event_count", "entropy_bytes", "host_rng_fails",
                "entropy_rate_limiter_throttled", "rate_limiter_event_count"],
}


def schema(ref):
    """A swagger 2.0 definition as a JSON schema (its $refs resolved locally)."""
    return {"$ref": "#/definitions/" + ref, "definitions": defs}


def valid(obj, ref):
    try:
        jsonschema.validate(obj, schema(ref))
        return None
    except jsonschema.ValidationError as e:
        return e.message


def http(sock, method, path, body=None, raw=None):
    """One request on a new connection: (status, headers, parsed body)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    if raw is None:
        data = b"" if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        data = data.encode() if isinstance(data, str) else data
        raw = ("%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
               % (method, path, len(data))).encode() + data
    s.sendall(raw)
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    head, _, payload = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    return status, headers, json.loads(payload) if payload else None


def serve(name, *args, cwd=None):
    sock = os.path.join(tmp, name + ".sock")
    err = open(os.path.join(tmp, name + ".err"), "w")
    p = subprocess.Popen([vmm, "--api-sock", sock, "--id", name, "--console", "none", *args], cwd=cwd or tmp,
                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    procs.append(p)
    for _ in range(100):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.05)
    return p, sock


def stop(p):
    p.terminate()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()


def req(sock, method, path, body=None, want=204, ref=None, words=None, msg=None):
    """Sends a request (its body checked against `ref` if given) and checks
    the status and the response body against the swagger."""
    if ref and body is not None and not isinstance(body, (str, bytes)):
        e = valid(body, ref)
        if e:
            bad("%s %s: our request is not a %s: %s" % (method, path, ref, e))
    st, hd, b = http(sock, method, path, body)
    what = msg or "%s %s %s -> %d" % (method, path, json.dumps(body) if body is not None else "", want)
    good = st == want
    if st == 400:
        e = valid(b, "Error")
        good = good and e is None and isinstance(b, dict) and "fault_message" in b
        if words:
            good = good and words in b.get("fault_message", "")
    check(good, what, "got %d %s" % (st, b))
    return st, hd, b


try:
    # -------- the command line ---------------------------------------------
    out = subprocess.run([vmm, "--version"], capture_output=True, text=True).stdout
    words = out.split("\n")[0].split(" ")
    # Kata: the second word, "v" stripped, is a semantic version >= 0.21.1.
    v = words[1].lstrip("v").split(".") if len(words) > 1 else []
    check(len(v) == 3 and all(x.isdigit() for x in v) and tuple(map(int, v)) >= (0, 21, 1),
          "vmm --version parses as Kata parses Firecracker's", out)
    r = subprocess.run([vmm, "--seccomp-filter", "/x.bpf"], capture_output=True, text=True)
    check(r.returncode != 0 and "seccomp" in r.stderr, "--seccomp-filter refused clearly", r.stderr)
    r = subprocess.run([vmm, "--metadata", "/nonexistent.json", "--api-sock", os.path.join(tmp, "x.sock")],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "--metadata /nonexistent.json" in r.stderr, "--metadata of a missing file: a clear "
          "error", r.stderr)
    r = subprocess.run([vmm, "--no-api", "--api-sock", os.path.join(tmp, "y.sock")], capture_output=True, text=True)
    check(r.returncode != 0 and "config-file" in r.stderr, "--no-api needs --config-file", r.stderr)
    r = subprocess.run([vmm, "--snapshot-version"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.startswith("v"), "--snapshot-version", r.stdout)

    # -------- GETs on a fresh VMM, against the swagger ----------------------
    p, s = serve("a", "--log-path", "cli.log", "--level", "Debug", "--show-level", "--show-log-origin",
                 "--http-api-max-payload-size", "100000", "--boot-timer")
    if not check(os.path.exists(s), "vmm --api-sock with Firecracker's logger and payload flags starts"):
        p, s = serve("a")  # the rest still runs
    for path, ref in (("/", "InstanceInfo"), ("/version", "FirecrackerVersion"),
                      ("/machine-config", "MachineConfiguration"), ("/vm/config", "FullVmConfiguration")):
        st, _, b = http(s, "GET", path)
        e = valid(b, ref) if st == 200 else "status %d" % st
        check(e is None, "GET %s is a %s" % (path, ref), e)
    st, _, b = http(s, "GET", "/")
    check(b["state"] == "Not started" and b["id"] == "a", "GET / before start", b)
    check(os.path.exists(os.path.join(tmp, "cli.log")), "--log-path (relative) opened")

    # -------- the configuration PUTs, with relative paths -------------------
    open(os.path.join(tmp, "vmlinux"), "wb").write(b"\0" * 4096)
    open(os.path.join(tmp, "rootfs.ext4"), "wb").truncate(1 << 20)
    open(os.path.join(tmp, "data.img"), "wb").truncate(1 << 20)
    req(s, "PUT", "/logger", {"log_path": "api.log", "level": "Info", "show_level": True,
                              "show_log_origin": False}, ref="Logger")
    req(s, "PUT", "/metrics", {"metrics_path": "metrics.json"}, ref="Metrics")
    req(s, "PUT", "/metrics", {"metrics_path": "metrics.json"}, want=400, words="Reinitialization")
    req(s, "PUT", "/boot-source", {"kernel_image_path": "./vmlinux", "boot_args": "console=ttyS0 reboot=k panic=1"},
        ref="BootSource")
    req(s, "PUT", "/drives/rootfs", {"drive_id": "rootfs", "path_on_host": "rootfs.ext4", "is_root_device": True,
                                     "is_read_only": False}, ref="Drive")
    req(s, "PUT", "/drives/data", {"drive_id": "data", "path_on_host": "./data.img", "is_root_device": False,
                                   "is_read_only": True, "cache_type": "Unsafe", "io_engine": "Sync",
                                   "rate_limiter": {"bandwidth": {"size": 1000000, "refill_time": 100}}}, ref="Drive")
    st, hd, _ = req(s, "PUT", "/machine-config", {"vcpu_count": 2, "mem_size_mib": 256, "smt": True,
                                                  "track_dirty_pages": True, "cpu_template": "None"},
                    ref="MachineConfiguration")
    check(hd.get("deprecation") == "true", "cpu_template answered with Deprecation: true", hd)
    req(s, "PATCH", "/machine-config", {"smt": False})
    req(s, "PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": "tap0",
                                               "guest_mac": "06:00:ac:10:00:02"}, ref="NetworkInterface")
    req(s, "PUT", "/network-interfaces/eth1", {"iface_id": "eth1", "host_dev_name": "tap1",
                                               "guest_mac": "06:00:AC:10:00:02"}, want=400, words="already in use")
    st, hd, _ = req(s, "PUT", "/vsock", {"guest_cid": 3, "uds_path": "v.sock", "vsock_id": "vsock0"}, ref="Vsock")
    check(hd.get("deprecation") == "true", "vsock_id answered with Deprecation: true", hd)
    st, _, b = http(s, "GET", "/vm/config")
    check(st == 200 and valid(b, "FullVmConfiguration") is None, "GET /vm/config is a FullVmConfiguration",
          valid(b, "FullVmConfiguration"))
    check(b.get("boot-source", {}).get("kernel_image_path") == os.path.join(tmp, "vmlinux"),
          "relative kernel path resolved against the VMM's working directory", b.get("boot-source"))
    check(b["machine-config"] == {"vcpu_count": 2, "mem_size_mib": 256, "smt": False, "track_dirty_pages": True,
                                  "huge_pages": "None"}, "machine-config as configured", b["machine-config"])
    check([d["drive_id"] for d in b["drives"]] == ["rootfs", "data"] and
          b["drives"][1]["rate_limiter"]["bandwidth"] == {"size": 10000000, "refill_time": 1000},
          "drives and limiter in /vm/config", b["drives"])
    st, _, b = http(s, "GET", "/machine-config")
    check(valid(b, "MachineConfiguration") is None and "cpu_template" not in b, "GET /machine-config", b)
    # Firecracker's static templates by name (deprecated field: Deprecation: true), shown by GET, and None
    # takes them away; the vendor is checked at InstanceStart (unit tests: tests/unit/vmm/api/test_http.c).
    for t in ("C3", "T2", "T2S", "T2CL", "T2A"):
        st, hd, b = http(s, "PATCH", "/machine-config", {"cpu_template": t})
        st2, _, mc = http(s, "GET", "/machine-config")
        check(st == 204 and hd.get("deprecation") == "true" and valid(mc, "MachineConfiguration") is None and
              mc.get("cpu_template") == t, "PATCH /machine-config cpu_template %s: taken, GET shows it" % t, (st, b, mc))
    req(s, "PATCH", "/machine-config", {"cpu_template": "None"}, ref="MachineConfigurationUpdate"
        if "MachineConfigurationUpdate" in defs else None)
    st, _, b = http(s, "GET", "/machine-config")
    check("cpu_template" not in b, "cpu_template None: GET leaves it out again", b)

    # -------- Firecracker's negative cases -----------------------------------
    req(s, "PUT", "/machine-config", {"vcpu_count": 2.0, "mem_size_mib": 256}, want=400)
    req(s, "PUT", "/machine-config", {"vcpu_count": 3, "mem_size_mib": 256, "smt": True}, want=400, words="SMT")
    req(s, "PATCH", "/machine-config", {}, want=400, words="Empty PATCH request.")
    req(s, "PATCH", "/machine-config", None, want=400, words="Empty PATCH request.")
    req(s, "PUT", "/boot-source", None, want=400, words="Empty PUT request.")
    req(s, "GET", "/machine-config", "{}", want=400, words="GET request cannot have a body.")
    req(s, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128, "foo": 1}, want=400, words="foo")
    req(s, "PUT", "/drives/rootfs", {"drive_id": "other", "path_on_host": "rootfs.ext4", "is_root_device": True},
        want=400, words="does not match")
    req(s, "PATCH", "/drives/rootfs", {"drive_id": "rootfs", "path_on_host": "data.img"}, want=400,
        words="before starting")
    req(s, "PATCH", "/network-interfaces/eth0", {"iface_id": "eth0", "rx_rate_limiter": {}}, want=400,
        words="before starting")
    req(s, "PUT", "/actions", {"action_type": "SendCtrlAltDel"}, want=400, words="before starting")
    req(s, "PUT", "/snapshot/create", {"snapshot_path": "s", "mem_file_path": "m"}, want=400, words="before starting")
    req(s, "PUT", "/snapshot/create", {"snapshot_path": "s", "mem_file_path": "m", "snapshot_type": "Diff"},
        want=400, words="before starting")
    req(s, "PUT", "/snapshot/load", {"snapshot_path": "s", "mem_file_path": "m"}, want=400,
        words="not allowed after configuring")
    # The Uffd memory backend's request shape is Firecracker's (here refused for the state only).
    req(s, "PUT", "/snapshot/load", {"snapshot_path": "s", "resume_vm": True,
                                     "mem_backend": {"backend_type": "Uffd", "backend_path": "uffd.sock"}},
        want=400, ref="SnapshotLoadParams", words="not allowed after configuring")
    pu, su = serve("u")
    # A body serde_json refuses is answered and the API serves on ...
    req(su, "PUT", "/snapshot/load", {"snapshot_path": "nosnap", "mem_backend": {"backend_type": "Uffd"}},
        want=400, words="missing field `backend_path`")
    req(su, "PUT", "/snapshot/load", {"snapshot_path": "nosnap", "mem_backend": {"backend_type": "Pmem",
                                                                               "backend_path": "x"}},
        want=400, words="expected `File` or `Uffd`")
    check(pu.poll() is None, "a malformed PUT /snapshot/load: the VMM serves on")
    # ... a well-formed load that fails is answered, then the VMM exits, as
    # Firecracker does (its clients wait for the process to end).
    req(su, "PUT", "/snapshot/load", {"snapshot_path": "nosnap", "mem_backend": {"backend_type": "Uffd",
                                                                               "backend_path": "./uffd.sock"}},
        want=400, ref="SnapshotLoadParams", words="not a vmm snapshot directory")
    try:
        rc = pu.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc not in (None, 0), "a failed PUT /snapshot/load: answered, then the VMM exits non-zero", rc)
    pu, su = serve("u2")
    req(su, "PUT", "/snapshot/load", {"snapshot_path": "nosnap", "mem_backend": {"backend_type": "Uffd",
                                                                               "backend_path": "/" + "u" * 120}},
        want=400, words="too long for a Unix socket")
    stop(pu)
    req(s, "DELETE", "/drives/rootfs", None, want=400, words="Invalid request method and/or path")
    req(s, "PUT", "/balloon/hinting/start", {}, want=400, words="Invalid request method and/or path")
    # -------- the entropy and balloon devices, before boot -----------------
    req(s, "PUT", "/entropy", {"rate_limiter": {"bandwidth": {"size": 1000, "refill_time": 100}}}, ref="EntropyDevice")
    req(s, "PUT", "/entropy", {"rate_limiter": {"bandwidth": {"size": 1000}}}, want=400, words="refill_time")
    req(s, "GET", "/balloon", want=400, words="not configured")
    req(s, "PUT", "/balloon", {"amount_mib": 257, "deflate_on_oom": True}, want=400, words="too large")
    req(s, "PUT", "/balloon", {"amount_mib": 1}, want=400, words="deflate_on_oom")
    req(s, "PUT", "/balloon", {"amount_mib": 64, "deflate_on_oom": True, "stats_polling_interval_s": 1,
                               "free_page_reporting": True}, ref="Balloon")
    st, _, b = http(s, "GET", "/balloon")
    check(st == 200 and valid(b, "Balloon") is None and b.get("amount_mib") == 64, "GET /balloon is a Balloon",
          (st, b))
    req(s, "PATCH", "/balloon", {"amount_mib": 32}, want=400, words="before starting", ref="BalloonUpdate")
    req(s, "GET", "/balloon/statistics", want=400, words="before starting")
    # /serial (Firecracker 1.10+) and /cpu-config (custom CPU templates, x86)
    req(s, "PUT", "/serial", {"serial_out_path": "serial.out"}, ref="SerialDevice")
    req(s, "PUT", "/serial", {"serial_out_path": "serial.out", "foo": 1}, want=400, words="foo")
    req(s, "PUT", "/serial", {"serial_out_path": 7}, want=400, words="invalid type: integer `7`, expected a string")
    cpu = {"kvm_capabilities": ["!56"],
           "cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                                "modifiers": [{"register": "ecx", "bitmap": "0bxx0" + "x" * 29}]}],
           "msr_modifiers": [{"addr": "0x10a", "bitmap": "0b" + "x" * 63 + "1"}]}
    req(s, "PUT", "/cpu-config", cpu, ref="CpuConfig")
    req(s, "PUT", "/cpu-config", {"cpuid_modifiers": [{"leaf": "1", "subleaf": "0x0", "flags": 0, "modifiers": []}]},
        want=400, ref="CpuConfig", words="No supported number system prefix found in value [1]")
    req(s, "PUT", "/cpu-config", {"cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                                                      "modifiers": [{"register": "eax", "bitmap": "0b2"}]}]},
        want=400, ref="CpuConfig", words="unknown character")
    req(s, "PUT", "/cpu-config", {"cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                                                      "modifiers": [{"register": "eax", "bitmap": "0b1" + "x" * 32}]}]},
        want=400, ref="CpuConfig", words="string is too long")
    req(s, "PUT", "/cpu-config", {"msr_modifiers": [{"addr": "0x10a"}]}, want=400, words="missing field `bitmap`")
    req(s, "PUT", "/cpu-config", {"cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                                                      "modifiers": [{"register": "esp", "bitmap": "0b1"}]}]},
        want=400, words="Invalid CPUID register. Must be one of [eax, ebx, ecx, edx]")
    req(s, "PUT", "/cpu-config", {"vcpu_features": []}, want=400, words="vcpu_features")
    req(s, "PATCH", "/balloon/statistics", {"stats_polling_interval_s": 2}, want=400, words="before starting",
        ref="BalloonStatsUpdate")
    st, _, b = http(s, "GET", "/vm/config")
    check(st == 200 and valid(b, "FullVmConfiguration") is None and b.get("balloon", {}).get("amount_mib") == 64
          and "rate_limiter" in b.get("entropy", {}), "GET /vm/config has the balloon and entropy devices",
          (valid(b, "FullVmConfiguration"), b.get("balloon"), b.get("entropy")))
    # URIs as Firecracker's server takes them.
    st, _, b = http(s, None, None, raw=b"GET http://localhost/machine-config HTTP/1.1\r\nConnection: close\r\n\r\n")
    check(st == 200 and b.get("vcpu_count") == 2, "absolute-form URI", (st, b))
    st, _, b = http(s, "GET", "/machine-config/")
    check(st == 200 and b.get("vcpu_count") == 2, "trailing slash", (st, b))
    # An oversize body: 400 with a fault_message (Firecracker), here over
    # the --http-api-max-payload-size of 100000.
    big = json.dumps({"kernel_image_path": "x" * 100001})
    st, _, b = http(s, "PUT", "/boot-source", big)
    check(st == 400 and valid(b, "Error") is None and "larger than the limit of 100000" in b["fault_message"],
          "oversize body: 400 with fault_message", (st, b))
    big = json.dumps({"kernel_image_path": "./vmlinux", "boot_args": "x" * 60000})
    st, _, b = http(s, "PUT", "/boot-source", big)
    check(st == 400 and "boot_args" in b["fault_message"], "a body over 51200 but under the limit is parsed", (st, b))

    # -------- MMDS: the store and its configuration (docs/mmds.md) ----------
    md = {"latest": {"meta-data": {"ami-id": "ami-12345678", "reservation-id": "r-fea54097"}}, "n": 1}
    req(s, "PATCH", "/mmds", {"n": 2}, want=400, words="not initialized")
    req(s, "PUT", "/mmds", md, ref="MmdsContentsObject")
    st, _, b = http(s, "GET", "/mmds")
    check(st == 200 and b == md, "GET /mmds gives back what PUT /mmds stored", (st, b))
    req(s, "PATCH", "/mmds", {"latest": {"meta-data": {"reservation-id": None, "x": "y"}}, "n": 2},
        ref="MmdsContentsObject")
    st, _, b = http(s, "GET", "/mmds")
    check(st == 200 and b == {"latest": {"meta-data": {"ami-id": "ami-12345678", "x": "y"}}, "n": 2},
          "PATCH /mmds merges as RFC 7396 says (null removes)", b)
    req(s, "PUT", "/mmds", "{\"a\":", want=400)
    req(s, "PUT", "/mmds", {"big": "x" * 52000}, want=400, words="limit")
    st, _, b = http(s, "GET", "/mmds")
    check(b.get("n") == 2, "a refused PUT /mmds leaves the store as it was", b)
    req(s, "PUT", "/mmds/config", {"network_interfaces": ["nope"]}, want=400, words="does not correspond")
    req(s, "PUT", "/mmds/config", {"network_interfaces": []}, want=400, words="is empty")
    req(s, "PUT", "/mmds/config", {"network_interfaces": ["eth0"], "version": "V3"}, want=400, words="V3")
    req(s, "PUT", "/mmds/config", {"network_interfaces": ["eth0"], "ipv4_address": "10.0.0.1"}, want=400,
        words="link-local")
    req(s, "PUT", "/mmds/config", {"network_interfaces": ["eth0"], "version": "V2",
                                   "ipv4_address": "169.254.170.2", "imds_compat": True}, ref="MmdsConfig")

    # -------- Firecracker's own error texts ----------------------------------
    # The texts its tests/integration_tests/functional/test_api.py and its
    # API server's unit tests match, as data: (method, path, body as its
    # Python client sends it, the text). Each answer is an Error too.
    for method, path, body, text in FC_TEXTS:
        req(s, method, path, body, want=400, words=text,
            msg="Firecracker's text: %s %s %s" % (method, path, json.dumps(body)))

    # -------- actions, metrics, logger ---------------------------------------
    st, _, b = http(s, "PUT", "/actions", {"action_type": "FlushMetrics"})
    check(st == 204, "FlushMetrics: 204", (st, b))
    lines = open(os.path.join(tmp, "metrics.json")).read().splitlines()
    try:
        m = json.loads(lines[-1])
        check(m["put_api_requests"]["drive_count"] == 3 and m["put_api_requests"]["drive_fails"] == 1 and
              "utc_timestamp_ms" in m, "metrics line with Firecracker's names", m["put_api_requests"])
        for block, fields in FC_METRICS.items():
            check(block in m and all(f in m[block] for f in fields),
                  "metrics line: Firecracker's %s block" % block, m.get(block))
        check(m["put_api_requests"]["mmds_count"] == 8 and m["put_api_requests"]["mmds_fails"] == 6 and
              m["patch_api_requests"]["mmds_fails"] == 1 and m["get_api_requests"]["mmds_count"] == 3,
              "MMDS requests counted under Firecracker's names", m)
    except (ValueError, IndexError, KeyError) as e:
        bad("metrics line: %s %s" % (e, lines))
    stop(p)
    log = open(os.path.join(tmp, "api.log")).read()
    check(" [a:main:INFO] " in log or "[a:" in log, "log lines in Firecracker's shape", log[:300])
    lines = open(os.path.join(tmp, "metrics.json")).read().splitlines()
    check(len(lines) >= 2, "a last metrics line at exit", lines)

    # -------- --config-file with Firecracker's keys (null sections) ---------
    cfg = {"boot-source": {"kernel_image_path": "vmlinux"}, "drives": [], "machine-config":
           {"vcpu_count": 1, "mem_size_mib": 128, "smt": False}, "cpu-config": None, "balloon": None,
           "network-interfaces": [], "vsock": None, "logger": {"log_path": "cf.log", "level": "Warning"},
           "metrics": {"metrics_path": "cf.metrics"}, "mmds-config": None, "entropy": None}
    # --metadata: the store's first contents, read back over the API.
    open(os.path.join(tmp, "md.json"), "w").write(json.dumps(md))
    p, s = serve("m", "--metadata", "md.json")
    st, _, b = http(s, "GET", "/mmds")
    check(st == 200 and b == md, "--metadata FILE fills the store (GET /mmds)", (st, b))
    stop(p)
    p, s = serve("m2", "--metadata", "md.json", "--mmds-size-limit", "20")
    check(p.wait(10) != 0, "--metadata larger than --mmds-size-limit: refused at start")
    e = valid(cfg, "FullVmConfiguration")
    check(e is None or "None" in e, "our config file is Firecracker's shape", e)
    open(os.path.join(tmp, "cfg.json"), "w").write(json.dumps(cfg))
    # It applies, then the VM build needs KVM: no "not supported" refusal.
    r = subprocess.run([vmm, "--config-file", "cfg.json", "--no-api", "--id", "cf", "--console", "none"],
                       cwd=tmp, capture_output=True, text=True, timeout=60)
    check("not supported in a configuration file" not in r.stderr and os.path.exists(os.path.join(tmp, "cf.metrics")),
          "--config-file with logger, metrics, null sections", r.stderr[-300:])
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)

print("fc-schema: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
