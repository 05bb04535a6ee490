"""Shared by the bench/ scripts: how to start vmm and QEMU on the same
kernel and command line, and how to time a VMM until a console line."""
import atexit
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def build_paths(build):
    return {
        "vmm": os.path.join(build, "vmm"),
        "kernel": os.path.join(build, "kernel", "vmlinux"),
        "initrd": os.path.join(build, "initramfs.cpio"),
        "bench_initrd": os.path.join(build, "test-initramfs.cpio"),
        "first": os.path.join(build, "guests", "first.elf"),
    }


def require(paths, qemu=True):
    for f in paths:
        if not os.path.exists(f):
            sys.exit(f"{sys.argv[0]}: {f} missing: run 'make' (and 'make bench-guest') first")
    if qemu and not shutil.which("qemu-system-x86_64"):
        sys.exit(f"{sys.argv[0]}: qemu-system-x86_64 missing: run 'boot/deps.sh --bench'")


def base_cmdline():
    """vmm's default command line plus what vmm appends on this host, so
    both VMMs boot the same kernel with the same parameters."""
    c = "console=ttyS0 reboot=k panic=-1 loglevel=5"  # cli/launch/run_opts.h DEFAULT_CMDLINE
    if os.path.isdir("/sys/module/kvm_pvm"):
        c += " noxsave clearcpuid=smap,popcnt,cx16,erms,fsrm"
    return c


def vmm_cmd(vmm, kernel, initrd, cmdline, cpus, mem, disks=()):
    cmd = [vmm, "run", "--kernel", kernel, "--cpus", str(cpus), "--mem", str(mem),
           "--cmdline", cmdline]
    if initrd:
        cmd += ["--initrd", initrd]
    for d in disks:
        cmd += ["--disk", f"path={d}"]
    return cmd


_QEMU_CPU = []


def qemu_cpu():
    """QEMU's -cpu for the peer: "host", or "host,-arch-capabilities" where
    plain host aborts (QEMU 7.2 fails to set MSR 0x10a on some hosts,
    nested KVM among them). Asked once per process: QEMU is started
    paused with QMP on stdio; its greeting comes after the vCPUs were
    reset (where the abort happens), EOF if it died. BENCH_QEMU_CPU
    overrides."""
    if os.environ.get("BENCH_QEMU_CPU"):
        return os.environ["BENCH_QEMU_CPU"]
    if _QEMU_CPU:
        return _QEMU_CPU[0]
    pick = "host"
    for cpu in ("host", "host,-arch-capabilities"):
        try:
            p = subprocess.Popen(["qemu-system-x86_64", "-M", "microvm,rtc=off,acpi=off", "-enable-kvm",
                                  "-cpu", cpu, "-m", "64", "-nodefaults", "-no-user-config",
                                  "-display", "none", "-S", "-qmp", "stdio"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            break
        try:
            greeting = p.stdout.readline()
        finally:
            p.kill()
            p.wait()
        if b'"QMP"' in greeting:
            pick = cpu
            break
    if pick != "host":
        print(f"{sys.argv[0]}: QEMU aborts with -cpu host here; its peer runs with -cpu {pick}",
              file=sys.stderr)
    _QEMU_CPU.append(pick)
    return pick


def kvmtool_path(path):
    """The lkvm to compare with (--kvmtool PATH, or $BENCH_KVMTOOL), or None
    with a line saying why kvmtool is left out (Debian does not package it:
    bench/kvmtool.md says how to build the one these benches expect)."""
    path = path or os.environ.get("BENCH_KVMTOOL")
    if not path:
        print(f"{sys.argv[0]}: kvmtool left out: no --kvmtool PATH (an lkvm built as bench/kvmtool.md says)",
              file=sys.stderr)
        return None
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"{sys.argv[0]}: kvmtool left out: {path} is not an executable file", file=sys.stderr)
        return None
    return path


_lkvm_home = None


def kvmtool_cmd(lkvm, kernel, initrd, cmdline, cpus, mem):
    """lkvm run with the same kernel (a bzImage: lkvm does not load ELF
    vmlinux files), initramfs and command line; `noapic` as this host's
    kvmtool needs it (bench/kvmtool.md), no network device."""
    # lkvm keeps its control sockets under $HOME/.lkvm: a HOME of its own,
    # as $HOME may be read-only (the nested-KVM harness) or shared.
    global _lkvm_home
    if _lkvm_home is None:  # a fresh private directory (mkdtemp), not a name in /tmp
        _lkvm_home = tempfile.mkdtemp(prefix="vmm-bench-lkvm-")
        atexit.register(shutil.rmtree, _lkvm_home, True)
    home = _lkvm_home
    cmd = ["env", f"HOME={home}", lkvm, "run", "--kernel", kernel, "--cpus", str(cpus), "--mem", str(mem),
           "--params", cmdline + " noapic", "--console", "serial", "--network", "mode=none"]
    if initrd:
        cmd += ["--initrd", initrd]
    return cmd


def qemu_cmd(kernel, initrd, cmdline, cpus, mem, disks=()):
    cmd = ["qemu-system-x86_64", "-M", "microvm,rtc=off,acpi=off", "-enable-kvm", "-cpu", qemu_cpu(),
           "-smp", str(cpus), "-m", str(mem), "-nodefaults", "-no-user-config",
           "-nographic", "-serial", "stdio", "-kernel", kernel, "-append", cmdline,
           "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=4"]
    if initrd:
        cmd += ["-initrd", initrd]
    for i, d in enumerate(disks):
        cmd += ["-drive", f"id=d{i},file={d},format=raw,if=none,cache=writeback",
                "-device", f"virtio-blk-device,drive=d{i}"]
    return cmd


def is_guest_ram(header, size, guest_bytes):
    """Whether a /proc/PID/smaps mapping (its header line and size) is guest
    RAM: one mapping of at least the guest's size (QEMU, kvmtool, a vmm
    clone's snapshot file), or any part of vmm's memfd ("/memfd:vmm-guest-ram")."""
    if size >= guest_bytes:
        return True
    fields = header.split(None, 5)
    return len(fields) > 5 and fields[5].startswith("/memfd:vmm-guest-ram")


def mem_without_guest(pid, guest_bytes):
    """(RSS, PSS) in KiB over the process's mappings, guest RAM
    (is_guest_ram) left out; (None, None) if the process is gone."""
    rss = pss = 0
    guest = False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
                if m:
                    guest = is_guest_ram(line, int(m.group(2), 16) - int(m.group(1), 16), guest_bytes)
                elif not guest and line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif not guest and line.startswith("Pss:"):
                    pss += int(line.split()[1])
    except OSError:
        return None, None
    return rss, pss


def why_no_result(out, timeout):
    """Why a run gave no figure, from its console: a guest kernel crash
    (named by its first line) or the timeout."""
    text = out.decode(errors="replace") if isinstance(out, bytes) else out
    hits = [i for i in (text.find(p) for p in ("Kernel panic", "BUG:", "Oops", "WARNING:")) if i >= 0]
    if hits:
        line = text[min(hits):].splitlines()[0].strip()
        return f"the guest kernel crashed (first: {line[:120]})"
    return f"no result within {timeout:.0f} s"


def run_until(cmd, marker, timeout, guest_bytes=None, capture_stderr=False, wait_exit=False):
    """Starts cmd and reads its console until `marker`. Returns (seconds to
    the marker or None, RSS KiB at that moment, stdout bytes, stderr bytes).
    With wait_exit, lets the VM run to its own end (up to timeout)."""
    # An unnamed temporary file: no name under /tmp another user could
    # have put a symlink at.
    err = tempfile.TemporaryFile() if capture_stderr else subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    buf = b""
    t = None
    rss = None
    deadline = t0 + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([p.stdout], [], [], 0.5)
            if r:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                if t is None and marker in buf:
                    t = time.monotonic() - t0
                    if guest_bytes:
                        rss = mem_without_guest(p.pid, guest_bytes)[0]
                    if not wait_exit:
                        break
            elif p.poll() is not None:
                break
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    text = b""
    if capture_stderr:
        err.seek(0)
        text = err.read()
        err.close()
    return t, rss, buf, text


def median(xs):
    return statistics.median(xs) if xs else None


def print_table(title, rows, res, higher_is_better=(), peer="qemu microvm"):
    """rows: (label, key, unit). Prints vmm, the peer (res["qemu"]: QEMU
    unless `peer` names another) and the ratio peer/vmm (for figures where
    higher is better, vmm/peer), so >1 means vmm wins."""
    print(title)
    print(f"{'':40s} {'vmm':>14s} {peer:>14s} {'ratio':>8s}")
    for label, key, unit in rows:
        v, q = median(res["vmm"][key]), median(res["qemu"][key])
        if v and q:
            ratio = f"{(v / q if key in higher_is_better else q / v):.2f}x"
        else:
            ratio = "n/a"
        fv = "n/a" if v is None else f"{v:.1f} {unit}"
        fq = "n/a" if q is None else f"{q:.1f} {unit}"
        print(f"{label:40s} {fv:>14s} {fq:>14s} {ratio:>8s}")
    print("(ratio > 1: vmm is better)")
