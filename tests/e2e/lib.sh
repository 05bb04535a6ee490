# The check layer of the e2e tier (docs: tests/README.md). Sourced by
# run.sh, and by an e2e file run alone, after $tmp exists; uses $vmm.
#
# A check is one `ok DESC` or `bad DESC` (or `check DESC FILE PATTERN`).
# It spans from the end of the previous check to its own ok/bad, and it
# FAILS, whatever its verdict, when a guest console gained a line that
# tests/e2e/guest-crash.re matches (a user segfault, a trap, an Oops, a
# BUG, a panic, a lockup, an RCU stall) in that span. The consoles are
# found by name, so a new sandbox needs nothing: every *.console and
# every console.log (a detached sandbox's, in its state folder) up to
# three levels under $tmp, plus the files given to console_watch. Each
# byte of each console is scanned once; a line still being written is
# scanned with the check that sees it finished; e2e_finish scans what is
# left after the last check.
#
# run_in NAME CMD... runs CMD in a sandbox (vmm exec, T seconds, 60 by
# default) and run_cmd CMD... any command: stdout as usual, stderr passed
# on too, and both the command line, its exit status and its stderr kept,
# so a failing check shows what its commands said, not only "missing".
#
# No knob turns any of this off.

e2e_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
e2e_con=$tmp/consoles # scratch files
mkdir -p "$e2e_con"
grep -v '^#' "$e2e_lib_dir/guest-crash.re" | grep -v '^$' > "$e2e_con/.patterns"
: > "$e2e_con/.cmdlog"
declare -gA e2e_con_off=() e2e_con_path=() e2e_con_size=() e2e_con_name=()
e2e_con_extra=()
e2e_con_held=()
pass=${pass:-0}
fail=${fail:-0}

# console_watch FILE...: consoles the name rules do not find (a guest on
# stdio writing to FILE).
console_watch() { e2e_con_extra+=("$@"); }

# Lists the consoles with their sizes now (one find), registering those
# not seen before, keyed by device:inode (one console seen under two names
# is one). A detached sandbox's console.log is held open by this shell
# first: its folder goes when the sandbox stops, the open descriptor keeps
# the file (and what the VMM still writes into it), read through
# /proc/$$/fd. Not a hard link: vmm logs reads only files with one link
# (a link planted in a sandbox folder must not make it read another file),
# so a link would make the product refuse its own console.
console_discover() {
	local key size path fd
	e2e_con_size=()
	while read -r key size path; do
		[ -n "$path" ] || continue
		e2e_con_size[$key]=$size
		[ -z "${e2e_con_path[$key]+x}" ] || continue
		e2e_con_name[$key]=${path##*/}
		if [ "${path##*/}" = console.log ] && exec {fd}< "$path" 2> /dev/null; then
			e2e_con_name[$key]=$(basename "$(dirname "$path")").console
			path=/proc/$$/fd/$fd
			e2e_con_held+=("$path")
		fi
		e2e_con_path[$key]=$path
		e2e_con_off[$key]=0
	done < <(
		find "$tmp" -maxdepth 3 -type f \( -name '*.console' -o -name console.log \) -printf '%D:%i %s %p\n' 2> /dev/null
		[ "${#e2e_con_extra[@]}" = 0 ] || stat -c '%d:%i %s %n' "${e2e_con_extra[@]}" 2> /dev/null
		[ "${#e2e_con_held[@]}" = 0 ] || stat -L -c '%d:%i %s %n' "${e2e_con_held[@]}" 2> /dev/null
	)
}

# console_scan_one KEY FINAL: prints the crash lines among the bytes of
# one console since its last scan and moves its offset past them; without
# FINAL, a last line with no newline yet is left for the next scan.
console_scan_one() {
	local key=$1 final=$2 f=${e2e_con_path[$1]} off=${e2e_con_off[$1]} size=${e2e_con_size[$1]:-} len hits
	local name=${e2e_con_name[$1]:-${f##*/}}
	[ -n "$size" ] || return 0 # gone (its name is another file's by now)
	[ "$size" -lt "$off" ] && off=0 # truncated and written again
	[ "$size" -gt "$off" ] || return 0
	len=$((size - off))
	tail -c +$((off + 1)) "$f" | head -c "$len" > "$e2e_con/.chunk"
	if [ "$final" = 0 ] && [ -n "$(tail -c 1 "$e2e_con/.chunk" 2> /dev/null | tr -d '\0')" ]; then
		len=$((len - $(tail -n 1 "$e2e_con/.chunk" | wc -c)))
	fi
	e2e_con_off[$key]=$((off + len))
	hits=$(head -c "$len" "$e2e_con/.chunk" | tr -d '\r' | grep -aE -f "$e2e_con/.patterns")
	[ -n "$hits" ] || return 0
	echo "$hits" | head -8 | awk -v p="     | $name: " '{ print p $0 }'
	[ "$(echo "$hits" | wc -l)" -le 8 ] || echo "     | $name: ... $(echo "$hits" | wc -l) crash lines in all"
}

# console_scan FINAL: console_scan_one over every console.
console_scan() {
	local key
	console_discover
	for key in "${!e2e_con_path[@]}"; do console_scan_one "$key" "$1"; done
}

# The end of a check: the verdict, unless a console shows a crash.
e2e_check_end() {
	local verdict=$1 desc=$2
	console_scan 0 > "$e2e_con/.crash"
	if [ "$verdict" = ok ] && [ ! -s "$e2e_con/.crash" ]; then
		pass=$((pass + 1))
		echo "ok   $desc"
	else
		fail=$((fail + 1))
		if [ -s "$e2e_con/.crash" ]; then
			[ "$verdict" = ok ] && desc="$desc (its own test passed)"
			echo "FAIL $desc: a guest crashed during this check:"
			cat "$e2e_con/.crash"
		else echo "FAIL $desc"; fi
		if [ -s "$e2e_con/.cmdlog" ]; then
			echo "     the commands of this check:"
			tail -n 40 "$e2e_con/.cmdlog" | sed 's/^/     | /'
		fi
	fi
	: > "$e2e_con/.cmdlog"
	return 0 # `A && ok X || bad Y` must never run both
}
# e2e_input WHAT PATH VAR MAKER [file]: is a part's input there, made on
# the host by make e2e (tests/e2e/MAKER) and named by VAR (PATH, its
# value)? 1, having said why, where VAR is unset, where PATH.skip says why
# it could not be made (both skips), or, with "file", where PATH is
# missing or empty (a FAIL); the part then returns. Else 0.
e2e_input() {
	local what=$1 path=$2 var=$3 maker=$4 kind=${5:-}

	if [ -z "$path" ]; then
		echo "skip $what: $var is not set (make e2e makes it with tests/e2e/$maker)"
	elif [ -f "$path.skip" ]; then
		echo "skip $what: $(cat "$path.skip")"
	elif [ "$kind" = file ] && [ ! -s "$path" ]; then
		bad "$what: the image $path is missing"
	else
		return 0
	fi
	return 1
}
ok() { e2e_check_end ok "$1"; }
bad() { e2e_check_end bad "$1"; }
check() { # check DESCRIPTION FILE PATTERN
	if grep -qE -- "$3" "$2"; then ok "$1"; else bad "$1 (no /$3/ in $(basename "$2"))"; fi
}

# e2e_finish: what the consoles gained after the last check (a crash while
# the sandboxes stopped) fails the run too.
e2e_finish() {
	console_scan 1 > "$e2e_con/.crash"
	if [ -s "$e2e_con/.crash" ]; then
		fail=$((fail + 1))
		echo "FAIL consoles after the last check: a guest crashed:"
		cat "$e2e_con/.crash"
	fi
	return 0
}

# run_cmd CMD...: runs CMD; its stderr goes on to ours too; the command,
# its exit status and its stderr are kept for the check's failure report.
run_cmd() {
	local st errf
	errf=$(mktemp "$e2e_con/.err.XXXXXX")
	"$@" 2> "$errf"
	st=$?
	{
		echo "\$ $(printf '%s ' "$@" | tr '\n\t' '  ' | cut -c 1-300)-> exit status $st"
		tail -n 20 "$errf" | sed 's/^/  stderr: /'
	} >> "$e2e_con/.cmdlog"
	cat "$errf" >&2
	rm -f "$errf"
	return "$st"
}

# run_in NAME CMD...: CMD in sandbox NAME through vmm exec (T seconds).
run_in() {
	local name=$1
	shift
	run_cmd timeout "${T:-60}" "$vmm" exec "$name" -- "$@"
}
