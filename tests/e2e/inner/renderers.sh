#!/bin/sh
# The e2e part "inner"'s watcher (tests/e2e/inner.sh), run in the sandbox in
# the background while Chromium renders: every 0.2 s for up to 5 min, a
# line for each renderer process (--type=renderer): its pid, its real uid, its
# seccomp mode (proc(5), /proc/PID/status "Seccomp:", 2 = filter) and
# whether its user and pid namespaces differ from PID 1's. Writes its PID
# to /tmp/renderers.pid and the lines to /tmp/renderers.
echo $$ > /tmp/renderers.pid
: > /tmp/renderers
for _ in $(seq 1500); do
	for p in $(pgrep -f -- --type=renderer); do
		st=$(cat /proc/$p/status 2> /dev/null) || continue
		u=$(readlink /proc/$p/ns/user) && n=$(readlink /proc/$p/ns/pid) || continue
		[ "$u" != "$(readlink /proc/1/ns/user)" ] && u=own-userns || u=init-userns
		[ "$n" != "$(readlink /proc/1/ns/pid)" ] && n=own-pidns || n=init-pidns
		echo "$p renderer uid=$(echo "$st" | awk '/^Uid:/ { print $2 }') $u $n" \
			"seccomp=$(echo "$st" | awk '/^Seccomp:/ { print $2 }')" >> /tmp/renderers
	done
	sleep 0.2
done
