#!/usr/bin/env python3
"""Interactive console: run vmm on a pseudo-terminal, type Ctrl-A x, and
check the VM stops with status 7 and the terminal's mode is restored, and
that vmm said how to leave (Ctrl-A x) once at the start.
   pty_console.py VMM GUEST_ELF"""
import os
import pty
import select
import sys
import termios
import time

vmm, guest = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(vmm, [vmm, "run", "--kernel", guest, "--mem", "64"])
before = termios.tcgetattr(fd)
# Wait until vmm has put the terminal in raw mode (ECHO off).
deadline = time.time() + 10
while time.time() < deadline and termios.tcgetattr(fd)[3] & termios.ECHO:
    time.sleep(0.05)
raw = not (termios.tcgetattr(fd)[3] & termios.ECHO)
os.write(fd, b"\x01x")
out = b""
status = None
deadline = time.time() + 10
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            out += os.read(fd, 4096)
        except OSError:
            pass
    wpid, st = os.waitpid(pid, os.WNOHANG)
    if wpid:
        status = os.waitstatus_to_exitcode(st)
        break
after = termios.tcgetattr(fd)
hint = out.count(b"Ctrl-A x stops the VM")
ok = raw and status == 7 and after[3] & termios.ECHO and b"console escape" in out and hint == 1
print(f"raw={raw} status={status} echo-restored={bool(after[3] & termios.ECHO)} leave-hint={hint}")
sys.exit(0 if ok else 1)
