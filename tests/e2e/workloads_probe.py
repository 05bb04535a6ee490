#!/usr/bin/env python3
"""Kernel features probed from inside a sandbox, through the system calls
container runtimes and browsers make (tests/e2e/workloads.sh copies this
into the Debian image and runs one probe at a time):

  workloads_probe.py seccomp     a seccomp filter (Chromium's sandbox, crun)
  workloads_probe.py io_uring    io_uring_setup (libuv, Tokio, databases)
  workloads_probe.py tun         a TUN device from /dev/net/tun (slirp4netns, pasta)
  workloads_probe.py mqueue      a POSIX message queue
  workloads_probe.py bpf-device CGROUP   a BPF device filter on a cgroup
                                 (what crun/runc do for the devices rules on
                                 cgroup v2), then /dev/null opened inside it

Each prints one line NAME=RESULT; the host checks the result. Guest-side
Python with ctypes: the image has no compiler. System call numbers and
structure layouts are x86-64's (linux/seccomp.h, linux/filter.h,
linux/io_uring.h, linux/if_tun.h, linux/bpf.h)."""
import ctypes
import errno
import fcntl
import os
import struct
import subprocess
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4

SYS_GETPPID = 110
SYS_BPF = 321
SYS_IO_URING_SETUP = 425


def seccomp():
    """A filter that fails getppid with errno 99 and allows the rest
    (seccomp(2): PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with
    SECCOMP_MODE_FILTER and a classic BPF program on seccomp_data.nr)."""
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_GET_SECCOMP = 38, 22, 21
    SECCOMP_MODE_FILTER = 2
    RET_ERRNO, RET_ALLOW = 0x00050000, 0x7FFF0000
    # struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }
    prog = [
        (0x20, 0, 0, 0),               # ld  [0]  (seccomp_data.nr)
        (0x15, 0, 1, SYS_GETPPID),     # jeq #getppid, 0, 1
        (0x06, 0, 0, RET_ERRNO | 99),  # ret ERRNO(99)
        (0x06, 0, 0, RET_ALLOW),       # ret ALLOW
    ]
    insns = b"".join(struct.pack("=HBBI", *i) for i in prog)
    buf = ctypes.create_string_buffer(insns)
    # struct sock_fprog { u16 len; struct sock_filter *filter; }
    fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "no_new_privs-" + errno.errorcode[ctypes.get_errno()]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0) != 0:
        return "set-" + errno.errorcode[ctypes.get_errno()]
    mode = libc.prctl(PR_GET_SECCOMP, 0, 0, 0, 0)
    r = libc.syscall(SYS_GETPPID)
    e = ctypes.get_errno()
    return "mode%d,getppid-errno%d,getpid-%s" % (mode, e if r < 0 else 0,
                                                  "ok" if os.getpid() > 0 else "bad")


def io_uring():
    """io_uring_setup(4, params): a ring's file descriptor."""
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    fd = libc.syscall(SYS_IO_URING_SETUP, 4, params)
    if fd < 0:
        return "setup-" + errno.errorcode[ctypes.get_errno()]
    sq_entries = struct.unpack_from("=I", params.raw, 0)[0]
    kind = os.readlink("/proc/self/fd/%d" % fd)
    os.close(fd)
    return "%s,sq_entries=%d" % (kind, sq_entries)


def tun():
    """TUNSETIFF on /dev/net/tun: an interface that lives while the fd does."""
    TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", b"wltun0", IFF_TUN | IFF_NO_PI))
    seen = os.path.exists("/sys/class/net/wltun0")
    os.close(fd)
    return "wltun0" if seen else "no-interface"


def mqueue():
    """mq_open/mq_send/mq_receive, the queue visible in /dev/mqueue."""
    libc.mq_open.restype = ctypes.c_int
    q = libc.mq_open(b"/wl-probe", os.O_CREAT | os.O_RDWR, 0o600, None)
    if q < 0:
        return "open-" + errno.errorcode[ctypes.get_errno()]
    if libc.mq_send(q, b"hello-mq", 8, 0) != 0:
        return "send-" + errno.errorcode[ctypes.get_errno()]
    buf = ctypes.create_string_buffer(8192)
    n = libc.mq_receive(q, buf, 8192, None)
    listed = os.path.exists("/dev/mqueue/wl-probe")
    libc.mq_unlink(b"/wl-probe")
    return "%s,listed=%s" % (buf.raw[:max(n, 0)].decode(), listed)


def bpf_device(cgroup):
    """A BPF_PROG_TYPE_CGROUP_DEVICE program that denies every device,
    attached to CGROUP (BPF_CGROUP_DEVICE); then cat /dev/null from inside
    the cgroup must fail and from outside succeed."""
    BPF_PROG_LOAD, BPF_PROG_ATTACH = 5, 8
    PROG_TYPE_CGROUP_DEVICE, ATTACH_CGROUP_DEVICE = 15, 6
    # r0 = 0 (deny); exit.  struct bpf_insn { u8 code; u8 regs; s16 off; s32 imm; }
    insns = struct.pack("=BBhi", 0xB7, 0, 0, 0) + struct.pack("=BBhi", 0x95, 0, 0, 0)
    ibuf = ctypes.create_string_buffer(insns)
    lic = ctypes.create_string_buffer(b"GPL")
    attr = ctypes.create_string_buffer(
        struct.pack("=IIQQ", PROG_TYPE_CGROUP_DEVICE, 2, ctypes.addressof(ibuf),
                    ctypes.addressof(lic)), 128)
    prog = libc.syscall(SYS_BPF, BPF_PROG_LOAD, attr, 128)
    if prog < 0:
        return "load-" + errno.errorcode[ctypes.get_errno()]
    cg = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY)
    attr = ctypes.create_string_buffer(struct.pack("=IIII", cg, prog, ATTACH_CGROUP_DEVICE, 0), 128)
    if libc.syscall(SYS_BPF, BPF_PROG_ATTACH, attr, 128) < 0:
        return "attach-" + errno.errorcode[ctypes.get_errno()]
    inside = subprocess.run(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec cat /dev/null', "sh", cgroup],
                            capture_output=True, text=True)
    outside = subprocess.run(["cat", "/dev/null"], capture_output=True)
    why = "denied" if "Operation not permitted" in inside.stderr else "inside-%d:%s" % (
        inside.returncode, inside.stderr.strip())
    return "%s,outside=%d" % (why, outside.returncode)


def main():
    probes = {"seccomp": seccomp, "io_uring": io_uring, "tun": tun, "mqueue": mqueue,
              "bpf-device": bpf_device}
    if len(sys.argv) < 2 or sys.argv[1] not in probes:
        sys.exit("usage: workloads_probe.py %s [ARG]" % "|".join(probes))
    try:
        result = probes[sys.argv[1]](*sys.argv[2:])
    except OSError as e:
        result = "OSError-%s" % errno.errorcode.get(e.errno, e.errno)
    print("%s=%s" % (sys.argv[1], result))


if __name__ == "__main__":
    main()
