#!/usr/bin/env python3
"""Ctrl-C on a terminal: runs CMD as the foreground job of a pseudo-terminal,
waits until FILE holds TEXT, types Ctrl-C (the terminal sends SIGINT to
the whole foreground process group) and checks CMD exits with status 130
within SECONDS. Prints CMD's output and what happened.
   ctrl_c.py FILE TEXT SECONDS -- CMD..."""
import os
import pty
import select
import sys
import time

path, text, limit = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3])
cmd = sys.argv[5:] if sys.argv[4] == "--" else sys.argv[4:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
out = b""
status = None


def drain(t):
    global out
    r, _, _ = select.select([fd], [], [], t)
    if r:
        try:
            out += os.read(fd, 4096)
        except OSError:
            pass


def waited():
    wpid, st = os.waitpid(pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(st) if wpid else None


deadline = time.time() + 60
while time.time() < deadline and status is None:
    drain(0.1)
    status = waited()
    try:
        if text in open(path, "rb").read():
            break
    except OSError:
        pass
if status is not None:
    sys.stdout.write(out.decode(errors="replace"))
    print(f"exited with {status} before {text.decode()!r} appeared in {path}")
    sys.exit(1)
os.write(fd, b"\x03")
t0 = time.time()
while status is None and time.time() - t0 < limit + 30:
    drain(0.1)
    status = waited()
took = time.time() - t0
drain(0.2)
sys.stdout.write(out.decode(errors="replace"))
print(f"\nstatus={status} {took:.1f} s after Ctrl-C")
if status is None:
    os.kill(pid, 9)
sys.exit(0 if status == 130 and took < limit else 1)
