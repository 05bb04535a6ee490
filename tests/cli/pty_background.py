#!/usr/bin/env python3
"""Runs a command as an interactive shell runs `CMD &`: in a process group
of its own that is not the foreground of its (pseudo-)terminal. It must
neither stop (SIGTTIN, SIGTTOU: a background job that reads the terminal or
changes its mode) nor touch the terminal's mode. With --fg-on TEXT: once
TEXT appears on the terminal, the job is brought to the foreground as `fg`
does (tcsetpgrp, SIGCONT) and --type BYTES are typed a second later;
with --fg-after S, the same S seconds after the start.
Exits with the job's status, or 99 if it stopped, 98 if it ran past
--timeout, 97 if the terminal's mode changed while it was in the background.
   pty_background.py [--fg-on TEXT | --fg-after S] [--type BYTES] [--timeout S] -- CMD..."""
import argparse
import os
import select
import signal
import sys
import termios
import time

ap = argparse.ArgumentParser()
ap.add_argument("--fg-on")
ap.add_argument("--fg-after", type=float)
ap.add_argument("--type", default="")
ap.add_argument("--timeout", type=float, default=30)
ap.add_argument("cmd", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd

master, slave = os.openpty()
shell = os.fork()
if shell == 0:
    # The shell: a session whose controlling terminal is the pty, in the
    # foreground; the job in a process group of its own, in the background.
    os.close(master)
    os.setsid()
    import fcntl
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    mode = termios.tcgetattr(slave)
    job = os.fork()
    if job == 0:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR1])
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.execvp(cmd[0], cmd)
    try:
        os.setpgid(job, job)  # as the job does: whichever runs first
    except PermissionError:
        pass  # EACCES: the job has exec'd, its own setpgid came first
    end = time.time() + a.timeout
    fg = False
    while True:
        pid, st = os.waitpid(job, os.WNOHANG | os.WUNTRACED)
        if pid and os.WIFSTOPPED(st):
            os.write(slave, b"\r\nJOB STOPPED by signal %d\r\n" % os.WSTOPSIG(st))
            os.killpg(job, signal.SIGKILL)
            os._exit(99)
        if pid:
            break
        if not fg and termios.tcgetattr(slave) != mode:
            os.write(slave, b"\r\nTERMINAL MODE CHANGED by a background job\r\n")
            os.killpg(job, signal.SIGKILL)
            os._exit(97)
        if time.time() > end:
            os.killpg(job, signal.SIGKILL)
            os._exit(98)
        if signal.sigtimedwait([signal.SIGUSR1], 0.05):
            os.tcsetpgrp(slave, job)   # `fg`
            os.killpg(job, signal.SIGCONT)
            fg = True
    os.tcsetpgrp(slave, os.getpgrp())
    os._exit(os.waitstatus_to_exitcode(st) & 0xff)

os.close(slave)
out = b""
start = time.time()
told = None
typed = False
status = None
while status is None:
    r, _, _ = select.select([master], [], [], 0.1)
    if r:
        try:
            out += os.read(master, 4096)
        except OSError:
            pass
    if told is None and ((a.fg_on and a.fg_on.encode() in out) or
                         (a.fg_after is not None and time.time() - start > a.fg_after)):
        os.kill(shell, signal.SIGUSR1)
        told = time.time()
    if told and not typed and time.time() - told > 1:
        os.write(master, a.type.encode().decode("unicode_escape").encode("latin-1"))
        typed = True
    pid, st = os.waitpid(shell, os.WNOHANG)
    if pid:
        status = os.waitstatus_to_exitcode(st)
try:
    while select.select([master], [], [], 0.1)[0]:
        out += os.read(master, 4096)
except OSError:
    pass
sys.stdout.write(out.decode(errors="replace"))
sys.exit(status)
