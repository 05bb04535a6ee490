#!/usr/bin/env bash
# vmm image build --builtin (no KVM, no network, seconds): the listing of
# the recipes in vmm's lib folder (the build tree's images/, copied from
# the repository's boot/images/, and made-up recipes under VMM_LIB_DIR), the option
# parsing and its errors, and the versioning: a recipe builds into a new
# version named after it (or -t NAME) recorded with the hash of its
# inputs; built again with nothing changed it is "up to date" (the same
# version, nothing built), and a changed recipe file, guest-init or mirror
# makes the next version. FROM debootstrap: names are checked before
# anything runs.
#   builtin.sh VMM GUEST_INIT
set -u
vmm=$(realpath "$1")
gi=$2
. "$(dirname "$0")/lib.sh"

need_image_tools builtin

# The repository's recipes, from the build tree (no VMM_LIB_DIR yet).
export VMM_IMAGE_DIR=$tmp/images VMM_CACHE=$tmp/cache
if run 0 image build --builtin; then
	grep -q "^python .*Python 3" "$tmp/out" && grep -q "^node .*Node.js" "$tmp/out" &&
		ok "--builtin lists the repository's python and node recipes with what they hold" ||
		bad "--builtin listing: $(cat "$tmp/out")"
else bad "--builtin (list) failed"; fi
for r in python node; do
	grep -q "^FROM debootstrap:bookworm+" "$(dirname "$vmm")/images/$r/Dockerfile" 2> /dev/null &&
		ok "the $r recipe starts FROM debootstrap:bookworm+PACKAGES" || bad "the $r recipe: no debootstrap FROM"
done
run 0 image --help && grep -q -- "--builtin" "$tmp/out" && ok "vmm image --help documents --builtin" ||
	bad "vmm image --help says nothing of --builtin"

export VMM_LIB_DIR=$tmp/lib
mkdir -p "$tmp/lib/guest" "$tmp/lib/images/demo" "$tmp/lib/images/Bad_Name" "$tmp/lib/images/empty" \
	"$tmp/lib/images/badfrom" "$tmp/lib/images/badpkg"
cp "$gi" "$tmp/lib/guest/guest-init"
printf '# A made-up recipe: one file, an ENV, a label\nFROM scratch\nCOPY hello.txt /srv/hello.txt\nENV GREETING=hi\nLABEL vmm.mem=256\n' \
	> "$tmp/lib/images/demo/Dockerfile"
echo hello > "$tmp/lib/images/demo/hello.txt"
printf '# bad name\nFROM scratch\n' > "$tmp/lib/images/Bad_Name/Dockerfile"
printf '# a suite that is an option\nFROM debootstrap:-evil\n' > "$tmp/lib/images/badfrom/Dockerfile"
printf '# a package name Debian does not allow\nFROM debootstrap:bookworm+python3,Py;rm\n' > "$tmp/lib/images/badpkg/Dockerfile"

# debugfs cat of PATH in NAME/VERSION's image
dcat() { debugfs -R "cat $2" "$VMM_IMAGE_DIR/$1/rootfs.ext4" 2> /dev/null; }
versions() { ls "$VMM_IMAGE_DIR/$1" 2> /dev/null | grep -c '^[0-9]*$'; }
field() { "$vmm" image inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }

run 0 image build --builtin && grep -q "^demo  *not built  *A made-up recipe: one file, an ENV, a label$" "$tmp/out" &&
	! grep -q "^Bad_Name\|^empty" "$tmp/out" &&
	ok "the listing: each recipe with its first comment line, not built yet; no folder without a Dockerfile or a name" ||
	bad "listing: $(cat "$tmp/out")"

if run 0 image build --builtin demo -q && [ "$(cat "$tmp/out")" = demo:1 ]; then
	ok "--builtin demo builds demo:1 (prints it)"
	[ "$(dcat demo/1 /srv/hello.txt)" = hello ] && [ "$(dcat demo/1 /sbin/vmm-init | cmp - "$gi" && echo same)" = same ] &&
		ok "demo:1 holds the recipe's COPY and guest-init as /sbin/vmm-init" || bad "demo:1's files"
	[ "$(field demo:1 source)" = builtin:demo ] && [ "$(field demo:1 mem_mib)" = 256 ] &&
		[[ "$(field demo:1 inputs)" =~ ^[0-9a-f]{16}$ ]] &&
		ok "demo:1 records source builtin:demo, the inputs' hash and its label's --mem" ||
		bad "demo:1: $("$vmm" image inspect demo:1)"
else bad "--builtin demo: $(cat "$tmp/out")"; fi

if run 0 image build --builtin demo && [ "$(cat "$tmp/out")" = demo:1 ] && grep -q "demo:1 is up to date" "$tmp/err" &&
	[ "$(versions demo)" = 1 ]; then
	ok "built again with nothing changed: demo:1 is up to date, no new version"
else bad "rebuild unchanged: $(cat "$tmp/out") $(cat "$tmp/err")"; fi
run 0 image build --builtin && grep -q "^demo  *demo:1  " "$tmp/out" && ok "the listing names demo:1 as current" ||
	bad "listing after the build: $(cat "$tmp/out")"

echo changed > "$tmp/lib/images/demo/hello.txt"
run 0 image build --builtin demo -q && [ "$(cat "$tmp/out")" = demo:2 ] && [ "$(dcat demo/2 /srv/hello.txt)" = changed ] &&
	ok "a changed recipe file: demo:2, with the new content" || bad "changed file: $(cat "$tmp/out")"
printf '\n' >> "$tmp/lib/guest/guest-init"
run 0 image build --builtin && grep -q "^demo  *demo:2 (old)  " "$tmp/out" &&
	ok "a changed guest-init: the listing says demo:2 is old" || bad "listing after guest-init changed: $(cat "$tmp/out")"
run 0 image build --builtin demo -q && [ "$(cat "$tmp/out")" = demo:3 ] &&
	ok "a changed guest-init: demo:3" || bad "changed guest-init: $(cat "$tmp/out")"
run 0 image build --builtin demo -q --mirror http://mirror.example/debian && [ "$(cat "$tmp/out")" = demo:4 ] &&
	ok "another mirror: demo:4 (the mirror is an input)" || bad "--mirror: $(cat "$tmp/out")"
run 0 image build --builtin demo --refresh -q --mirror http://mirror.example/debian && [ "$(cat "$tmp/out")" = demo:5 ] &&
	ok "--refresh with the same inputs: built anyway, demo:5" || bad "--refresh: $(cat "$tmp/out") $(cat "$tmp/err")"
run 0 image build --builtin demo -t mydemo -q && [ "$(cat "$tmp/out")" = mydemo:1 ] && [ "$(field mydemo source)" = builtin:demo ] &&
	ok "-t mydemo: the recipe built as mydemo:1" || bad "-t: $(cat "$tmp/out") $(cat "$tmp/err")"

# Errors: usage (2), before anything is built.
run 2 image build --builtin nosuch && grep -q "no such recipe" "$tmp/err" &&
	ok "an unknown recipe: status 2, named" || bad "unknown recipe: $(cat "$tmp/err")"
run 2 image build --builtin demo other && grep -q "one recipe at a time" "$tmp/err" &&
	ok "two recipes: status 2" || bad "two recipes: $(cat "$tmp/err")"
run 2 image build --builtin demo --debian bookworm && grep -q -- "--debian: not an option of --builtin" "$tmp/err" &&
	ok "--builtin with another source option: status 2, naming it" || bad "--debian: $(cat "$tmp/err")"
run 2 image build --builtin -t x && grep -q "which recipe" "$tmp/err" && ok "-t without a recipe: status 2" ||
	bad "-t alone: $(cat "$tmp/err")"
run 2 image build --builtin demo -t x:2 && ok "-t NAME:VERSION refused (versions are numbered)" || bad "-t x:2 accepted"
run 2 image build --builtin demo --mirror && grep -q "needs a value" "$tmp/err" && ok "--mirror without its URL: status 2" ||
	bad "--mirror alone: $(cat "$tmp/err")"
run 2 image build --builtin ../demo && ok "a recipe name with a slash: status 2" || bad "--builtin ../demo accepted"

# FROM debootstrap: checked before debootstrap runs.
run 1 image build --builtin badfrom && grep -q "debootstrap:SUITE\[+PACKAGE,PACKAGE...\]" "$tmp/err" &&
	[ ! -e "$VMM_IMAGE_DIR/badfrom" ] && ok "FROM debootstrap:-evil: refused, naming the form; no version" ||
	bad "debootstrap:-evil: $(cat "$tmp/err")"
run 1 image build --builtin badpkg && grep -q "Debian names" "$tmp/err" && ok "FROM debootstrap: with a bad package name: refused" ||
	bad "bad package: $(cat "$tmp/err")"
[ "$(versions demo)" = 5 ] && ok "demo has 5 versions: nothing else was built" || bad "demo versions: $(versions demo)"

echo "builtin: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
