# Sourced by run.sh (part "devloop"): what an agent's work loop needs of
# the built-in base image (issue 38). Boot A (the default disk, 2 vCPUs,
# 384 MiB): the tools a userland's basics include, nohup/flock/script
# from guest-init, a nohup job that outlives the `vmm exec` that started
# it, and nproc, free and df matching --cpus, --mem and the 4 GiB default
# disk, sparse on the host. Boot B (--disk-size 160M): df says 160M, and
# filling the disk gives "No space left on device" to the writer while
# the sandbox keeps serving. A --disk-size below the image's size is
# refused before any boot.
export VMM_IMAGE_DIR=$tmp/dl-images
export VMM_STATE_DIR=$tmp/dl-state
dl() { run_cmd timeout "${T:-300}" "$vmm" "$@"; }
busybox_bin=${BUSYBOX:-/bin/busybox}

if ! dl image build base --busybox "$busybox_bin" -q > /dev/null 2> "$tmp/dl-build.err"; then
	bad "devloop: building base: $(cat "$tmp/dl-build.err")"
elif ! T=600 dl run -d --name dla --image base --cpus 2 --mem 384 > /dev/null 2> "$tmp/dla.err"; then
	bad "devloop: run --image base: $(tail -3 "$tmp/dla.err")"
else
	# The basics, each on the PATH and runnable.
	missing=$(run_in dla sh -c 'for t in nohup flock setsid timeout script ps tar gzip wget; do
		command -v $t > /dev/null || echo $t; done')
	[ -z "$missing" ] && ok "devloop: base has nohup flock setsid timeout script ps tar gzip wget" ||
		bad "devloop: base lacks: $missing"

	# A nohup job started by an exec that ends at once keeps running.
	run_in dla sh -c 'nohup sh -c "sleep 2; echo done > /tmp/bg" > /dev/null 2>&1 &'
	got=
	for _ in $(seq 60); do
		got=$(run_in dla cat /tmp/bg 2> /dev/null)
		[ "$got" = done ] && break
		sleep 1
	done
	[ "$got" = done ] && ok "devloop: a nohup job outlives the vmm exec that started it" ||
		bad "devloop: the nohup job never wrote /tmp/bg"
	# ... and one on the exec's terminal (-t): the hang-up at its end is
	# ignored (as with ssh -t, once nohup has run: hence the sleep).
	run_cmd timeout 60 "$vmm" exec -t dla -- sh -c 'cd /tmp && nohup sh -c "sleep 2; echo done > /tmp/bgt" & sleep 1' \
		< /dev/null > /dev/null
	got=
	for _ in $(seq 60); do
		got=$(run_in dla cat /tmp/bgt 2> /dev/null)
		[ "$got" = done ] && break
		sleep 1
	done
	[ "$got" = done ] && run_in dla test -f /tmp/nohup.out &&
		ok "devloop: under -t the nohup job survives the terminal's hang-up, output in nohup.out" ||
		bad "devloop: nohup under -t: /tmp/bgt '$got'"

	# flock: busy inside, free after; script: a terminal, -e's status.
	out=$(run_in dla sh -c 'flock -n /tmp/l -c "flock -n /tmp/l true; echo inner=\$?"; flock -n /tmp/l true; echo after=$?')
	[ "$out" = "inner=1
after=0" ] && ok "devloop: flock -n finds the lock busy while held, free after" || bad "devloop: flock: $out"
	out=$(run_in dla sh -c 'script -q -c tty /dev/null; script -qe -c "exit 3" /dev/null; echo st=$?')
	[[ "$out" == */dev/pts/*st=3* ]] && ok "devloop: script runs its command on a pty; -e returns its status" ||
		bad "devloop: script: $out"

	# The sandbox's shape as the guest sees it.
	n=$(run_in dla nproc)
	[ "$n" = 2 ] && ok "devloop: nproc says 2 with --cpus 2" || bad "devloop: nproc '$n' with --cpus 2"
	mem=$(run_in dla free | awk '/^Mem:/ {print $2}')
	[ -n "$mem" ] && [ "$mem" -gt $((288 * 1024)) ] && [ "$mem" -le $((384 * 1024)) ] &&
		ok "devloop: free's total ($mem KiB) is --mem 384 less the kernel's own" ||
		bad "devloop: free total '$mem' KiB with --mem 384"
	size=$(run_in dla df -k / | awk 'NR == 2 {print $2}')
	[ -n "$size" ] && [ "$size" -gt $((3584 * 1024)) ] && [ "$size" -le $((4096 * 1024)) ] &&
		ok "devloop: df / shows the 4 GiB default disk ($size KiB)" || bad "devloop: df / size '$size' KiB"
	img=$VMM_STATE_DIR/dla/rootfs.img
	if [ -f "$img" ]; then
		apparent=$(stat -c %s "$img")
		used=$(du -k "$img" | cut -f1)
		[ "$apparent" = $((4096 * 1024 * 1024)) ] && [ "$used" -lt $((512 * 1024)) ] &&
			ok "devloop: the 4 GiB root disk is sparse on the host ($used KiB used)" ||
			bad "devloop: root disk $apparent bytes, $used KiB used"
	else bad "devloop: no $img"; fi
	[ "$(stat -c %s "$VMM_IMAGE_DIR/base/1/rootfs.ext4")" -lt $((1024 * 1024 * 1024)) ] &&
		ok "devloop: the shared image file was not grown" || bad "devloop: the image file grew"
fi
dl rm -f dla > /dev/null 2>&1

# A disk smaller than the image: refused, before a boot.
if dl run --image base --disk-size 8M -- true > /dev/null 2> "$tmp/dlsmall.err"; then
	bad "devloop: --disk-size 8M below the image ran"
else
	grep -q "the image is [0-9]* MiB: the disk cannot be smaller" "$tmp/dlsmall.err" &&
		ok "devloop: --disk-size below the image's size is refused, naming its size" ||
		bad "devloop: --disk-size 8M: $(cat "$tmp/dlsmall.err")"
fi

# A small disk: df says so; filling it is ENOSPC for the writer only.
if T=600 dl run -d --name dlb --image base --disk-size 160M > /dev/null 2> "$tmp/dlb.err"; then
	size=$(run_in dlb df -k / | awk 'NR == 2 {print $2}')
	[ -n "$size" ] && [ "$size" -gt $((128 * 1024)) ] && [ "$size" -le $((160 * 1024)) ] &&
		ok "devloop: --disk-size 160M: df / says $size KiB" || bad "devloop: --disk-size 160M: df '$size'"
	out=$(T=600 run_in dlb sh -c 'dd if=/dev/zero of=/root/fill bs=1M 2>&1; echo st=$?')
	if [[ "$out" == *"No space left on device"* ]] && [[ "$out" != *st=0* ]] &&
		[ "$(run_in dlb sh -c 'rm /root/fill && echo alive')" = alive ]; then
		ok "devloop: a full disk: the writer gets No space left on device, the sandbox keeps serving"
	else bad "devloop: full disk: $out"; fi
else bad "devloop: run --disk-size 160M: $(tail -3 "$tmp/dlb.err")"; fi
dl rm -f dlb > /dev/null 2>&1
unset VMM_IMAGE_DIR VMM_STATE_DIR
