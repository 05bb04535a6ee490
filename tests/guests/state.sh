#!/usr/bin/env bash
# The CLI's state directory against other local users and a compromised
# jailed VMM (docs/security.md), as root (CI): no Linux guest needed.
#   state.sh VMM GUEST_DIR
set -u
vmm=$1
dir=$2
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
skipped() { skip=$((skip + 1)); echo "skip $1"; }
finish() {
	echo "state: $pass passed, $fail failed, $skip skipped"
	[ "$fail" = 0 ]
	exit
}

if [ "$(id -u)" != 0 ] || ! command -v setpriv > /dev/null; then
	skipped "state directory: needs root and setpriv (runs as two throwaway uids)"
	finish
fi
tmp=$(mktemp -d)
chmod 755 "$tmp"
# The binary where the throwaway uids can run it.
cp "$vmm" "$tmp/vmm"
chmod 755 "$tmp/vmm"
vmm=$tmp/vmm
victim=61001
attacker=61002
sleeper=
cleanup() {
	[ -n "$sleeper" ] && kill "$sleeper" 2> /dev/null
	rm -rf "$tmp" "/tmp/vmm-$victim" "/tmp/vmm-$attacker"
}
trap cleanup EXIT
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
# The victim's vmm, with neither XDG_RUNTIME_DIR nor VMM_STATE_DIR: /tmp/vmm-UID.
vvmm() { as $victim env -u XDG_RUNTIME_DIR -u VMM_STATE_DIR HOME=/ timeout 20 "$vmm" "$@"; }

# The victim's files the attack aims at, and a process of the victim's
# whose pid the attacker plants.
mkdir -p "$tmp/victim/files/sb1"
echo precious > "$tmp/victim/files/keep"
echo precious > "$tmp/victim/files/sb1/keep"
chown -R $victim:$victim "$tmp/victim"
# Not through as(): a function run in the background is a subshell, so
# $! would be that shell and the sleep would outlive the cleanup's kill.
setpriv --reuid=$victim --regid=$victim --clear-groups sleep 300 &
sleeper=$!
sleep 0.2
intact() { [ -f "$tmp/victim/files/keep" ] && [ -f "$tmp/victim/files/sb1/keep" ] && kill -0 "$sleeper" 2> /dev/null; }
# A forged record naming the sleeper: its pid, start time and binary.
forge() {
	local d=$1 start exe
	start=$(awk '{ sub(/.*\) /, ""); print $20 }' /proc/$sleeper/stat)
	exe=$(stat -L -c '%d %i' /proc/$sleeper/exe)
	echo "$sleeper" > "$d/pid"
	echo "$sleeper $start $exe" > "$d/process"
}

# 1. /tmp/vmm-VICTIM planted as a symbolic link to the victim's files.
rm -rf "/tmp/vmm-$victim"
as $attacker ln -s "$tmp/victim/files" "/tmp/vmm-$victim"
why=""
for verb in "ls" "prune" "rm -f sb1" "stop -t 1 sb1" "inspect sb1"; do
	# shellcheck disable=SC2086
	if vvmm $verb > "$tmp/out" 2> "$tmp/err"; then why="$why $verb-accepted"; fi
	grep -q "symbolic link" "$tmp/err" || why="$why $verb-no-reason"
done
intact || why="$why damage"
if [ -z "$why" ]; then ok "a planted /tmp/vmm-UID symlink: ls, prune, rm -f, stop refuse it, delete and kill nothing"
else bad "planted state-dir symlink:$why"; sed 's/^/     | /' "$tmp/err" | tail -3; fi

# 2. /tmp/vmm-VICTIM planted as the attacker's directory: a sandbox whose
# record names the victim's sleeping process, one that is a symlink to
# the victim's files (for prune and rm to follow), a dead one.
rm -f "/tmp/vmm-$victim"
as $attacker mkdir -m 777 "/tmp/vmm-$victim"
as $attacker mkdir -m 777 "/tmp/vmm-$victim/sb1"
forge "/tmp/vmm-$victim/sb1"
chown -R $attacker "/tmp/vmm-$victim/sb1"
as $attacker ln -s "$tmp/victim/files/sb1" "/tmp/vmm-$victim/sb2"
as $attacker mkdir "/tmp/vmm-$victim/sb3"
as $attacker ln -s "$tmp/victim/files/keep" "/tmp/vmm-$victim/sb3/disk0"
why=""
for verb in "ls" "prune" "rm -f sb1" "rm sb2" "rm sb3" "stop -t 1 sb1" "logs sb1"; do
	# shellcheck disable=SC2086
	if vvmm $verb > "$tmp/out" 2> "$tmp/err"; then why="$why $verb-accepted"; fi
	grep -q "belongs to uid $attacker" "$tmp/err" || why="$why $verb-no-reason"
done
intact || why="$why damage"
if [ -z "$why" ]; then ok "a planted /tmp/vmm-UID of another user's (forged pid record, symlinks): refused, nothing killed or deleted"
else bad "planted state dir:$why"; sed 's/^/     | /' "$tmp/err" | tail -3; fi

# 3. The victim's own state directory with a sandbox folder that is a
# symlink, and a forged record whose process is not the sandbox's VMM:
# the folder is refused; the forged pid is never signalled.
rm -rf "/tmp/vmm-$victim"
why=""
# a reader (ls) lists nothing and makes no state directory
vvmm ls > /dev/null 2> "$tmp/err" || why="$why ls-failed"
[ ! -e "/tmp/vmm-$victim" ] || why="$why ls-made-it"
as $victim mkdir -m 700 "/tmp/vmm-$victim"
vvmm ls > /dev/null 2> "$tmp/err" || why="$why own-dir-refused"
as $victim ln -s "$tmp/victim/files/sb1" "/tmp/vmm-$victim/sb2"
as $victim mkdir "/tmp/vmm-$victim/sb4"
as $victim ln -s "$tmp/victim/files" "/tmp/vmm-$victim/sb4/sub"
echo "$sleeper" > "$tmp/pid" && as $victim cp "$tmp/pid" "/tmp/vmm-$victim/sb4/pid"
vvmm rm sb2 > /dev/null 2>&1 && why="$why symlink-folder-removed"
vvmm rm -f sb4 > /dev/null 2> "$tmp/err" || why="$why own-rm-failed"
vvmm prune > /dev/null 2>&1
intact || why="$why damage"
[ ! -e "/tmp/vmm-$victim/sb4" ] || why="$why sb4-left"
if [ -z "$why" ]; then ok "own state dir: a symlinked folder is refused, removal follows no link, a recorded pid that is not the VMM is not killed"
else bad "own state dir:$why"; sed 's/^/     | /' "$tmp/err" | tail -3; fi
rm -rf "/tmp/vmm-$victim"

if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	skipped "jail records, console log size: /dev/kvm is not usable on this host"
	finish
fi

# 4. A compromised jailed VMM (its uid) rewrites the records root's CLI
# trusts and makes console.log a link or a FIFO: root's stop, rm -f and
# logs act only on the sandbox's own VMM and files.
if ! unshare -m -n true 2> /dev/null; then skipped "jail: this host refuses mount/network namespaces"
else
	export VMM_STATE_DIR=$tmp/jstate
	# spin.elf never answers the API: run -d waits for it (and would stop
	# and remove the sandbox when it gives up), so it waits in the
	# background while the sandbox runs and rm -f below ends both.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		timeout 120 "$vmm" run --jail -d --ready-timeout 100 --name jd --kernel "$dir/spin.elf" --mem 64 \
		< /dev/null > /dev/null 2>&1 &
	runpid=$!
	sb=$VMM_STATE_DIR/jd
	for _ in $(seq 300); do [ -s "$sb/jail-id" ] && [ -s "$sb/pid" ] && break; sleep 0.1; done
	for _ in $(seq 100); do cat "$sb"/console.log "$sb"/jail-rw/console.log 2> /dev/null | grep -q spinning && break; sleep 0.1; done
	jid=$(cat "$sb/jail-id" 2> /dev/null)
	vpid=$(cat "$sb/pid" 2> /dev/null)
	sleep 300 &
	decoy=$!
	why=""
	[ -n "$jid" ] && [ -n "$vpid" ] || why="$why not-started"
	echo "secret-of-root" > "$tmp/secret"
	chmod 600 "$tmp/secret"
	# What the jail's uid can do: the folder as it is bound into the jail.
	as "$jid" sh -c "echo $decoy > '$sb/pid'" 2> /dev/null && why="$why pid-writable"
	as "$jid" sh -c "echo $decoy 1 2 3 > '$sb/process'" 2> /dev/null && why="$why record-writable"
	as "$jid" sh -c "rm -f '$sb/pid' && echo $decoy > '$sb/pid'" 2> /dev/null && why="$why pid-replaceable"
	log=$sb/console.log
	[ -d "$sb/jail-rw" ] && log=$sb/jail-rw/console.log
	as "$jid" sh -c "rm -f '$log' && ln -s '$tmp/secret' '$log'" 2> /dev/null
	timeout 5 "$vmm" logs jd > "$tmp/out" 2> "$tmp/err"
	grep -q secret-of-root "$tmp/out" && why="$why logs-followed-link"
	as "$jid" sh -c "rm -f '$log' && mkfifo '$log'" 2> /dev/null
	timeout 5 "$vmm" logs jd > /dev/null 2>&1
	[ $? = 124 ] && why="$why logs-hung-on-fifo"
	timeout 20 "$vmm" rm -f jd > /dev/null 2> "$tmp/err" || why="$why rm-failed"
	sleep 0.3
	kill -0 "$decoy" 2> /dev/null || why="$why decoy-killed"
	[ -n "$vpid" ] && kill -0 "$vpid" 2> /dev/null && why="$why vmm-alive"
	kill "$decoy" 2> /dev/null
	[ ! -e "$sb" ] || why="$why folder-left"
	[ -f "$tmp/secret" ] || why="$why secret-deleted"
	if [ -z "$why" ]; then ok "a compromised jailed VMM cannot rewrite pid/process or make root's logs read another file; rm -f kills only its VMM"
	else bad "jail records:$why"; sed 's/^/     | /' "$tmp/err" | tail -3; fi
	"$vmm" rm -f jd > /dev/null 2>&1
	wait $runpid 2> /dev/null
	unset VMM_STATE_DIR
fi

# 5. The console log of a detached sandbox stays under --console-log-size
# (the unit test drives the UART past it; here the option reaches the VMM).
export VMM_STATE_DIR=$tmp/cstate
# (run -d waits in the background, as for jd above.)
timeout 120 "$vmm" run -d --ready-timeout 100 --name cl --console-log-size 1024 --kernel "$dir/spin.elf" --mem 64 \
	< /dev/null > /dev/null 2>&1 &
runpid=$!
for _ in $(seq 300); do grep -q spinning "$VMM_STATE_DIR/cl/console.log" 2> /dev/null && break; sleep 0.1; done
why=""
"$vmm" logs cl 2> /dev/null | grep -q spinning || why="$why logs"
size=$(stat -c %s "$VMM_STATE_DIR/cl/console.log" 2> /dev/null || echo missing)
[ "$size" != missing ] && [ "$size" -le 1024 ] || why="$why size-$size"
"$vmm" run --console-log-size 10 --kernel "$dir/spin.elf" > /dev/null 2>&1
[ $? = 2 ] || why="$why tiny-size-accepted"
timeout 20 "$vmm" rm -f cl > /dev/null 2>&1 || why="$why rm"
wait $runpid 2> /dev/null
if [ -z "$why" ]; then ok "--console-log-size: the detached console stays under it, vmm logs reads it"
else bad "--console-log-size:$why"; fi
unset VMM_STATE_DIR
finish
