#!/usr/bin/env bash
# CLI habits and messages without KVM (issue 24): usage mistakes in one
# line, docker's verbs and flags (ps, ls -a/-q/--format, logs --tail,
# exec -it and without --, stop of a stopped sandbox), messages (exec -w,
# stop -t, snapshot of an unknown sandbox, --mem, a copied binary's
# kernel), and make install into a staging directory.
#   habits.sh VMM [GUEST_INIT]   (run from the source tree: make install)
set -u
vmm=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
cli_state

lines() { wc -l < "$1"; }

# Unknown options, missing values, missing operands: one line naming the
# problem and "see 'vmm VERB --help'", status 2; never the whole usage.
good=1
while IFS='|' read -r verb args want; do
	# shellcheck disable=SC2086
	if run 2 $verb $args && [ "$(lines "$tmp/err")" = 1 ] && grep -qF -- "$want" "$tmp/err" &&
		grep -qF -- "(see 'vmm ${verb%% *} --help')" "$tmp/err"; then :
	else good=0; echo "     vmm $verb $args: $(head -3 "$tmp/err")"; fi
done <<'LIST'
run|--bogus|unknown option '--bogus'
run|--mem|option '--mem' needs a value
exec|-Z x -- true|unknown option '-Z'
exec|-w|option '-w' needs a value
exec|--bogus x -- true|unknown option '--bogus'
ls|-x|unknown option '-x'
ps|--bogus|unknown option '--bogus'
stop|-t x y|-t 'x'
stop||expected NAME
snapshot|--zz a b|unknown option '--zz'
snapshot|a|expected SANDBOX DIR
cp|--bogus a b|unknown option '--bogus'
cp|a|expected SRC DST
logs|--bogus x|unknown option '--bogus'
logs|--tail|option '--tail' needs a value
rm|-x a|unknown option '-x'
kill|a b --token|option '--token' needs a value
top|--bogus a|unknown option '--bogus'
inspect||expected NAME
pause|a b|unexpected argument 'b'
image|frob|unknown command 'frob'
restore|--bogus d|unknown option '--bogus'
LIST
[ $good = 1 ] && ok "usage mistakes: one line and 'see vmm VERB --help', status 2, in every verb" ||
	bad "usage mistakes in one line"
if run 2 frob && [ "$(lines "$tmp/err")" = 1 ] && grep -qF "unknown command 'frob' (see 'vmm --help')" "$tmp/err"; then
	ok "an unknown command: one line"
else bad "an unknown command"; fi

# made_up NAME [exited]: a sandbox folder as the VMM leaves it.
made_up() {
	mkdir -m 700 "$VMM_STATE_DIR/$1"
	echo tok > "$VMM_STATE_DIR/$1/token"
	echo "{\"name\":\"$1\",\"kind\":\"run\",\"source\":\"k\",\"cpus\":1,\"mem_mib\":64,\"created\":1,\"expires\":0,\"detached\":true,\"image\":\"base:1\"}" \
		> "$VMM_STATE_DIR/$1/config.json"
	[ "${2:-}" = exited ] && printf '3\nthe guest powered off\n' > "$VMM_STATE_DIR/$1/exit"
	return 0
}
made_up ex1 exited
made_up ex2 exited

# vmm ps is vmm ls; -a lists exited ones (all are listed); -q names only;
# --format fields.
if run 0 ps && grep -q "^ex1 .*exited" "$tmp/out" && run 0 ls -a && grep -q "^ex2 .*exited" "$tmp/out" &&
	run 0 ls -q && [ "$(cat "$tmp/out")" = "$(printf 'ex1\nex2')" ] &&
	run 0 ps -aq && [ "$(cat "$tmp/out")" = "$(printf 'ex1\nex2')" ] &&
	run 0 ls --format '{{.Name}}:{{ .State }}:{{.ExitStatus}}:{{.Image}}' &&
	[ "$(cat "$tmp/out")" = "$(printf 'ex1:exited:3:base:1\nex2:exited:3:base:1')" ] &&
	run 2 ls --format '{{.Nope}}' && grep -q "fields are" "$tmp/err"; then
	ok "vmm ps, ls -a, ls -q, ls --format '{{.Name}}:{{.State}}...'"
else bad "ps / ls -a -q --format: $(cat "$tmp/out")"; fi

# A stray file or symbolic link in the state folder is not a sandbox: ls
# skips it, with no error line per entry; a verb that names it refuses it.
: > "$VMM_STATE_DIR/stray"
ln -s /tmp "$VMM_STATE_DIR/straylink"
if run 0 ls -q && [ "$(cat "$tmp/out")" = "$(printf 'ex1\nex2')" ] && [ ! -s "$tmp/err" ] &&
	run 1 logs straylink && grep -q "symbolic link or not a directory" "$tmp/err"; then
	ok "ls skips a stray file and symbolic link in the state folder; logs refuses the link"
else bad "stray entries: $(cat "$tmp/out" "$tmp/err")"; fi
rm -f "$VMM_STATE_DIR/stray" "$VMM_STATE_DIR/straylink"

# logs --tail N: the last N lines of console.log.1 and console.log together.
printf 'one\ntwo\nthree\n' > "$VMM_STATE_DIR/ex1/console.log.1"
printf 'four\nfive\n' > "$VMM_STATE_DIR/ex1/console.log"
if run 0 logs --tail 1 ex1 && [ "$(cat "$tmp/out")" = five ] &&
	run 0 logs --tail 3 ex1 && [ "$(cat "$tmp/out")" = "$(printf 'three\nfour\nfive')" ] &&
	run 0 logs -n 0 ex1 && [ ! -s "$tmp/out" ] &&
	run 0 logs --tail 99 ex1 && [ "$(lines "$tmp/out")" = 5 ] &&
	run 0 logs --tail all ex1 && [ "$(lines "$tmp/out")" = 5 ]; then
	ok "logs --tail N: the last N lines, across console.log.1"
else bad "logs --tail: $(cat "$tmp/out")"; fi

# stop on a sandbox that is not running: done, quietly, status 0.
if run 0 stop ex1 && [ ! -s "$tmp/err" ] && [ "$(cat "$tmp/out")" = ex1 ]; then
	ok "stop on an exited sandbox: status 0, no complaint"
else bad "stop on an exited sandbox"; fi

# rm of exited sandboxes removes their records.
if run 0 rm ex1 ex2 && [ -z "$(ls "$VMM_STATE_DIR")" ]; then
	ok "rm removes exited sandboxes' records"
else bad "rm of exited sandboxes"; fi

# snapshot of a sandbox that is not there: said once.
if run 1 snapshot nosuch "$tmp/snap" && [ "$(lines "$tmp/err")" = 1 ] && grep -q "no sandbox named nosuch" "$tmp/err"; then
	ok "snapshot of an unknown sandbox: its error once"
else bad "snapshot nosuch: error not once"; fi

# record_process DIR PID: the record that makes PID the sandbox's VMM.
record_process() {
	local st dev ino
	st=$(sed 's/^.*) //' "/proc/$2/stat" | cut -d' ' -f20)
	read -r dev ino < <(stat -L -c '%d %i' "/proc/$2/exe")
	echo "$2 $st $dev $ino" > "$1/process"
	echo "$2" > "$1/pid"
}
# stop -t 10 of a running sandbox whose guest API is not there (a VMM
# stand-in answering its control socket, no vsock.sock): it must not
# claim "did not power off within 10 s" at once.
made_up st1
python3 - "$VMM_STATE_DIR/st1" > /dev/null 2>&1 <<'PY' &
import os, socket, sys
d = sys.argv[1]
cs = socket.socket(socket.AF_UNIX); cs.bind(d + "/control.sock"); cs.listen(8)
open(d + "/pid", "w").write("%d\n" % os.getpid())
while True:
    c, _ = cs.accept()
    req = b""
    while not req.endswith(b"\n"):
        req += c.recv(4096) or b"\n"
    if b'"stop"' in req:
        c.sendall(b'{"ok":true}\n'); c.close(); os._exit(0)
    c.sendall(b'{"ok":true,"state":"running"}\n')
    c.close()
PY
pids+=($!)
for _ in $(seq 100); do [ -S "$VMM_STATE_DIR/st1/control.sock" ] && [ -s "$VMM_STATE_DIR/st1/pid" ] && break; sleep 0.05; done
record_process "$VMM_STATE_DIR/st1" "$(cat "$VMM_STATE_DIR/st1/pid")"
if run 0 stop -t 10 st1 && ! grep -q "did not power off within" "$tmp/err" && grep -q "did not take the shutdown" "$tmp/err"; then
	ok "stop -t 10 without a guest API: no 'did not power off within 10 s' before waiting"
else bad "stop -t 10: the wrong message"; fi
rm -rf "$VMM_STATE_DIR/st1"

# cp: a sandbox path must be absolute (said with the form to use); one
# sandbox to another is refused with how to do it.
made_up rel1
if run 2 cp /etc/hostname rel1:tmp/x && grep -qF "rel1:tmp/x: a path in the sandbox must be absolute (rel1:/tmp/x)" "$tmp/err" &&
	run 2 cp rel1:etc/hostname "$tmp/h" && grep -qF "(rel1:/etc/hostname)" "$tmp/err" &&
	run 2 cp rel1:/a other:/b && grep -qF "copy from one sandbox to another through the host" "$tmp/err" &&
	[ "$(lines "$tmp/err")" = 1 ]; then
	ok "cp: a relative sandbox path and a sandbox-to-sandbox copy: what to do instead, status 2"
else bad "cp relative / sandbox-to-sandbox messages"; fi
rm -rf "$VMM_STATE_DIR/rel1"

# --mem beyond the host: its maximum named.
if run 2 run --kernel /dev/null --mem 99T && grep -q "this host has [0-9]* MiB of RAM: at most --mem [0-9]*" "$tmp/err"; then
	ok "--mem 99T: the host's maximum"
else bad "--mem 99T"; fi
avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
total=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
if [ $((avail + 64)) -lt "$total" ]; then
	if run 1 run --kernel /dev/null --mem $((avail + 32)) && grep -q "more than this host has free" "$tmp/err"; then
		ok "--mem above the host's free memory: a warning"
	else bad "--mem above free memory: no warning"; fi
else skipped "--mem above free memory: nearly all of it is free"; fi

# A copied binary without a kernel: where it looked, and what fixes it.
mkdir "$tmp/bin"
cp "$vmm" "$tmp/bin/vmm"
if (cd "$tmp" && timeout 20 bin/vmm run -- true < /dev/null > "$tmp/out" 2> "$tmp/err"); [ $? = 1 ] &&
	grep -qF "$tmp/bin" "$tmp/err" && grep -q -- "--kernel" "$tmp/err" && grep -q "make install" "$tmp/err"; then
	ok "a copied binary without a kernel: says where it looked and what fixes it"
else bad "a copied binary's kernel message"; fi

# make install into a staging directory; the installed binary, run from
# elsewhere, finds its kernel in PREFIX/lib/vmm (-v prints the path before
# it needs KVM); make uninstall leaves no file.
src=$(dirname "$0")/../..
echo fake-kernel > "$tmp/vmlinux"
if make -s -C "$src" install DESTDIR="$tmp/root" PREFIX=/usr KERNEL_IMAGE="$tmp/vmlinux" > "$tmp/err" 2>&1 &&
	[ -x "$tmp/root/usr/bin/vmm" ] && [ -f "$tmp/root/usr/share/man/man1/vmm.1" ] &&
	[ -f "$tmp/root/usr/share/bash-completion/completions/vmm" ] &&
	(cd / && timeout 20 "$tmp/root/usr/bin/vmm" run -v -- true < /dev/null > "$tmp/out" 2> "$tmp/err"
	 grep -qF "kernel $tmp/root/usr/lib/vmm/kernel/vmlinux" "$tmp/err") &&
	grep -q '^\.SS vmm exec' "$tmp/root/usr/share/man/man1/vmm.1" &&
	make -s -C "$src" uninstall DESTDIR="$tmp/root" PREFIX=/usr > "$tmp/err" 2>&1 &&
	[ -z "$(find "$tmp/root" -type f)" ]; then
	ok "make install DESTDIR=... PREFIX=/usr: the installed vmm finds its kernel; man page per verb; uninstall"
else bad "make install / uninstall"; fi

# exec against the host build of guest-init (the sandbox API without a VM).
if [ -n "${2:-}" ] && [ -x "$2" ]; then
	mkdir "$tmp/reg"
	VMM_API_TOKEN=tok VMM_API_REGISTRY="$tmp/reg" setsid "$2" --serve-unix "$tmp/api.sock" > /dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -S "$tmp/api.sock" ] && break; sleep 0.05; done
	export VMM_API_PORT=0 VMM_TOKEN=tok
	if run 127 exec -w /nonexistent "$tmp/api.sock" -- sh -c pwd &&
		grep -q "working directory /nonexistent: No such file or directory" "$tmp/err" &&
		! grep -q "command not found" "$tmp/err"; then
		ok "exec -w /nonexistent: the missing directory named"
	else bad "exec -w /nonexistent"; fi
	if run 0 exec -w /tmp "$tmp/api.sock" sh -c 'pwd; echo "$0 $1"' a1 b2 && [ "$(cat "$tmp/out")" = "$(printf '/tmp\na1 b2')" ] &&
		run 0 exec -it "$tmp/api.sock" -- echo it && grep -q it "$tmp/out" &&
		run 0 exec -i "$tmp/api.sock" echo i && grep -q i "$tmp/out"; then
		ok "exec NAME CMD without --, exec -it, exec -i"
	else bad "exec without -- / -it"; fi
	unset VMM_API_PORT VMM_TOKEN
else skipped "exec against the host guest-init: none given"; fi

echo "cli habits: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
