#!/usr/bin/env python3
"""bench/benchlib.py's peer choices, with fake peers (no KVM, no QEMU):
qemu_cpu() falls back to host,-arch-capabilities where a QEMU aborts with
-cpu host (as QEMU 7.2 does where it cannot set MSR 0x10a), keeps plain
host where it starts; kvmtool_path() leaves kvmtool out, saying why,
without a usable lkvm.

  bench_peers.py
"""
import contextlib
import io
import os
import stat
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import benchlib as bl  # noqa: E402

FAKE = """#!/bin/sh
# A QEMU that aborts at vCPU setup with -cpu %s, else greets on QMP.
prev=""
for a in "$@"; do
    if [ "$prev" = "-cpu" ] && [ "$a" = "%s" ]; then kill -ABRT $$; fi
    prev=$a
done
echo '{"QMP": {"version": {}, "capabilities": []}}'
exec sleep 30
"""


def pick_with(aborting_cpu):
    with tempfile.TemporaryDirectory() as d:
        q = os.path.join(d, "qemu-system-x86_64")
        with open(q, "w") as f:
            f.write(FAKE % (aborting_cpu, aborting_cpu))
        os.chmod(q, stat.S_IRWXU)
        old = os.environ["PATH"]
        os.environ["PATH"] = d + ":" + old
        os.environ.pop("BENCH_QEMU_CPU", None)
        bl._QEMU_CPU.clear()
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                return bl.qemu_cpu(), err.getvalue()
        finally:
            os.environ["PATH"] = old


def main():
    fails = 0

    def check(cond, what):
        nonlocal fails
        print(("ok: " if cond else "FAIL: ") + what)
        fails += not cond

    cpu, err = pick_with("host")
    check(cpu == "host,-arch-capabilities" and "aborts" in err,
          f"a QEMU that aborts with -cpu host gets host,-arch-capabilities (got {cpu!r})")
    check(bl.qemu_cmd("k", None, "c", 1, 64)[bl.qemu_cmd("k", None, "c", 1, 64).index("-cpu") + 1] == cpu,
          "qemu_cmd uses the probed -cpu")
    cpu, err = pick_with("nothing-aborts")
    check(cpu == "host" and not err, f"a QEMU that starts with -cpu host keeps it (got {cpu!r})")
    os.environ["BENCH_QEMU_CPU"] = "max"
    check(bl.qemu_cpu() == "max", "BENCH_QEMU_CPU overrides the probe")
    del os.environ["BENCH_QEMU_CPU"]

    os.environ.pop("BENCH_KVMTOOL", None)
    for arg, why in ((None, "no --kvmtool"), ("/nonexistent/lkvm", "not an executable")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            got = bl.kvmtool_path(arg)
        check(got is None and "kvmtool left out" in err.getvalue() and why in err.getvalue(),
              f"kvmtool left out, saying so: {why}")
    with tempfile.NamedTemporaryFile() as f:
        os.chmod(f.name, stat.S_IRWXU)
        check(bl.kvmtool_path(f.name) == f.name, "an executable lkvm is taken")
        cmd = bl.kvmtool_cmd(f.name, "bzImage", "initrd", "console=ttyS0", 1, 256)
        home = cmd[1][len("HOME="):] if cmd[0] == "env" and cmd[1].startswith("HOME=") else ""
        check(cmd[2:4] == [f.name, "run"] and "console=ttyS0 noapic" in cmd and "initrd" in cmd,
              "lkvm run with the same kernel, initrd and command line plus noapic")
        st = os.lstat(home) if home else None
        check(st is not None and stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and
              st.st_uid == os.getuid() and bl.kvmtool_cmd(f.name, "b", "i", "c", 1, 256)[1] == cmd[1],
              f"lkvm gets a private HOME of its own, made fresh (mkdtemp), one per process ({home!r})")
    # run_until keeps a command's stderr in an unnamed file (no fixed name
    # under /tmp another user could plant a symlink at).
    t, _, out, err = bl.run_until(["sh", "-c", "echo oops >&2; echo ready"], b"ready", 10,
                                  capture_stderr=True, wait_exit=True)
    check(t is not None and b"ready" in out and err == b"oops\n",
          f"run_until captures the command's stderr ({err!r})")
    why = bl.why_no_result(b"[ 0.1] WARNING: CPU: 0 at xstate.c:605\r\n[ 0.2] Kernel panic - not syncing: x\r\n",
                           900)
    check(why == "the guest kernel crashed (first: WARNING: CPU: 0 at xstate.c:605)",
          f"a run without a figure names the guest's crash ({why!r})")
    why = bl.why_no_result(b"booting\r\n", 900)
    check(why == "no result within 900 s", f"a run without a figure or crash names the timeout ({why!r})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
