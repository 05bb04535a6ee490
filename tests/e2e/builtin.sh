# Sourced by run.sh (part "builtin"; uses $vmm, $tmp, lib.sh's ok/bad/
# run_in/run_cmd): a developer's loop in the built-in images (issue 38).
# The images are `vmm image build --builtin python|node`, made on the host
# before the KVM tier by tests/e2e/builtin_images.sh into the store named
# by VMM_E2E_BUILTIN_STORE (the vmhost VM has no network); where they
# could not be made, STORE.skip says why and the part skips.
# python (boot A): the tools the recipe promises (CPython, pip, venv,
# git, gcc, make), a C program built and run, then a small project
# (tests/e2e/builtin-py: multiprocessing and sqlite3 in WAL mode) whose
# suite passes under pytest and unittest with its count asserted, and
# git init/add/commit/log over it. node (boot B): node, npm, git, and
# `npm test` of a small package (tests/e2e/builtin-node: node --test, no
# registry) with its count asserted. Each suite is also run directly on
# this host (python3, node and npm on the PATH) and the ratio printed.
store=${VMM_E2E_BUILTIN_STORE:-}
e2e_input builtin "$store" VMM_E2E_BUILTIN_STORE builtin_images.sh || return 0
bdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export VMM_IMAGE_DIR=$store VMM_STATE_DIR=$tmp/bstate
bx() { T=${T:-120} run_in "$@" 2>&1; }
# timed NAME DIR CMD: the last lines of CMD's output in the sandbox's
# DIR, then "rc=N ms=M" (CMD's status and time by the guest's clock).
timed() {
	T=900 run_in "$1" sh -c 'cd "$1" && s=$(date +%s%N); sh -c "$2" > /tmp/timed.out 2>&1; rc=$?
		e=$(date +%s%N); tail -n 12 /tmp/timed.out; echo "rc=$rc ms=$(( (e - s) / 1000000 ))"' sh "$2" "$3" 2>&1
}
ms_of() { sed -n 's/^rc=[0-9]* ms=\([0-9]*\)$/\1/p' <<< "$1" | tail -1; }
rc_of() { sed -n 's/^rc=\([0-9]*\) ms=[0-9]*$/\1/p' <<< "$1" | tail -1; }
# host_ms CMD...: CMD's time here in ms (its output in $tmp/host.out).
host_ms() {
	local s e
	s=$(date +%s%N)
	"$@" > "$tmp/host.out" 2>&1
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}
ratio() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[1]) / max(float(sys.argv[2]), 1)))' "$1" "$2"; }
# boot NAME RECIPE: a sandbox of the built image (cold: these images are
# not warmed here).
bboot() {
	local ref
	if [ -f "$store/$2.fail" ]; then
		bad "builtin: $(cat "$store/$2.fail")"
		return 1
	fi
	ref=$(cat "$store/$2.ref" 2> /dev/null)
	if [ -z "$ref" ]; then
		bad "builtin: no $2 image in $store"
		return 1
	fi
	if out=$(timeout 900 "$vmm" run -d --name "$1" --image "$ref" 2> "$tmp/$1.err" < /dev/null) && [ "$out" = "$1" ]; then
		ok "builtin: a sandbox of the built-in $ref boots"
	else
		bad "builtin: run -d --image $ref: $out $(tail -5 "$tmp/$1.err")"
		return 1
	fi
}

if bboot bpy python; then
	got=$(bx bpy sh -c 'python3 --version; pip --version | cut -d" " -f1-2; git --version; gcc --version | head -1 | cut -d" " -f1; make --version | head -1 | cut -d" " -f1-2; python3 -m pytest --version')
	[[ "$got" == *"Python 3."*"pip "[0-9]*"git version"*"gcc"*"GNU Make"*"pytest "[0-9]* ]] &&
		ok "builtin: python has CPython, pip, git, gcc, make and pytest" || bad "builtin: python's tools: $got"
	got=$(bx bpy sh -c 'python3 -m venv --without-pip /tmp/venv && /tmp/venv/bin/python -c "import sys; print(sys.prefix)" &&
		python3 -c "import venv, ensurepip, sqlite3; print(sqlite3.sqlite_version)" > /dev/null && echo venv-ok')
	[[ "$got" == "/tmp/venv"*"venv-ok" ]] && ok "builtin: python3 -m venv makes a working environment" ||
		bad "builtin: venv: $got"
	got=$(bx bpy sh -c 'printf "#include <stdio.h>\nint main(void) { puts(\"built\"); return 42; }\n" > /tmp/h.c &&
		printf "h: h.c\n\tcc -O2 -o h h.c\n" > /tmp/Makefile && make -s -C /tmp h && /tmp/h; echo "st=$?"')
	[ "$got" = "built
st=42" ] && ok "builtin: make and gcc build a C program that runs" || bad "builtin: C build: $got"
	# A server on localhost, reached by that name (/etc/hosts: without it
	# the name goes to DNS, which a sandbox without a network lacks).
	got=$(bx bpy python3 -c 'import socket
s = socket.create_server(("localhost", 0))
c = socket.create_connection(("localhost", s.getsockname()[1]))
a, _ = s.accept()
c.sendall(b"hi")
print(a.recv(2).decode(), socket.gethostbyname("localhost"), socket.gethostbyname(socket.gethostname()))')
	[ "$got" = "hi 127.0.0.1 127.0.1.1" ] && ok "builtin: localhost and the hostname resolve; a TCP server on localhost answers" ||
		bad "builtin: localhost: $got"

	timeout 120 "$vmm" cp "$bdir/builtin-py" bpy:/root/tally > /dev/null 2> "$tmp/bcp.err" || bad "builtin: vmm cp of the project: $(cat "$tmp/bcp.err")"
	out=$(timed bpy /root/tally 'python3 -m pytest -q -p no:cacheprovider')
	py_pytest=$(ms_of "$out")
	[ "$(rc_of "$out")" = 0 ] && grep -q "^8 passed" <<< "$out" &&
		ok "builtin: pytest runs the project's suite (multiprocessing, sqlite3 WAL): 8 passed in ${py_pytest} ms" ||
		bad "builtin: pytest: $out"
	out=$(timed bpy /root/tally 'python3 -m unittest')
	py_unit=$(ms_of "$out")
	[ "$(rc_of "$out")" = 0 ] && grep -q "^Ran 8 tests" <<< "$out" && grep -q "^OK" <<< "$out" &&
		ok "builtin: unittest runs the same suite: Ran 8 tests, OK in ${py_unit} ms" || bad "builtin: unittest: $out"
	# The same suite on this host (unittest: the host may have no pytest).
	cp -r "$bdir/builtin-py" "$tmp/tally"
	h=$(cd "$tmp/tally" && host_ms python3 -m unittest)
	if grep -q "^Ran 8 tests" "$tmp/host.out" && grep -q "^OK" "$tmp/host.out" && [ -n "$py_unit" ]; then
		echo "     builtin: python -m unittest (8 tests): sandbox ${py_unit} ms, host ${h} ms: $(ratio "$py_unit" "$h")x"
	else echo "     builtin: the suite on the host: $(tail -3 "$tmp/host.out")"; fi

	files=$(find "$bdir/builtin-py" -type f ! -path '*/__pycache__/*' | wc -l)
	got=$(bx bpy sh -c 'cd /root/tally && git init -q -b main && git add -A &&
		git -c user.name=agent -c user.email=agent@example.com commit -qm "tally: counters in SQLite" &&
		echo change >> tally/__init__.py && git -c user.name=agent -c user.email=agent@example.com commit -qam "tally: second" &&
		git log --format=%s && git ls-files | wc -l && git status --porcelain | wc -l')
	[ "$got" = "tally: second
tally: counters in SQLite
$files
0" ] && ok "builtin: git init, add, commit and log in the project (2 commits, $files files)" || bad "builtin: git: $got"
fi
"$vmm" rm -f bpy > /dev/null 2>&1

if bboot bnode node; then
	got=$(bx bnode sh -c 'node --version; npm --version; git --version
		node -e "require(\"dns\").lookup(\"localhost\", {family: 4}, (e, a) => console.log(e ? e.code : a))"')
	[[ "$got" == v[0-9]*"
"[0-9]*"
git version"*"
127.0.0.1" ]] && ok "builtin: node has node, npm and git ($(echo $got | cut -d' ' -f1-2)); localhost resolves" ||
		bad "builtin: node's tools: $got"
	timeout 120 "$vmm" cp "$bdir/builtin-node" bnode:/root/wordcount > /dev/null 2> "$tmp/bcp.err" || bad "builtin: vmm cp of the package: $(cat "$tmp/bcp.err")"
	out=$(timed bnode /root/wordcount 'npm test')
	node_ms=$(ms_of "$out")
	[ "$(rc_of "$out")" = 0 ] && grep -Eq "^(#|ℹ) pass 7$" <<< "$out" && grep -Eq "^(#|ℹ) fail 0$" <<< "$out" &&
		ok "builtin: npm test (node --test: workers, a child process, files): pass 7 in ${node_ms} ms" ||
		bad "builtin: npm test: $out"
	cp -r "$bdir/builtin-node" "$tmp/wordcount"
	h=$(cd "$tmp/wordcount" && host_ms npm test)
	if grep -Eq "^(#|ℹ) pass 7$" "$tmp/host.out" && [ -n "$node_ms" ]; then
		echo "     builtin: npm test (7 tests): sandbox ${node_ms} ms (node $(bx bnode node --version)), host ${h} ms (node $(node --version)): $(ratio "$node_ms" "$h")x"
	else echo "     builtin: npm test on the host: $(tail -3 "$tmp/host.out")"; fi
fi
"$vmm" rm -f bnode > /dev/null 2>&1
unset VMM_IMAGE_DIR VMM_STATE_DIR
