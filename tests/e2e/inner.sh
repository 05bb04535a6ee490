# Sourced by run.sh (part "inner"; uses $vmm, $tmp, lib.sh's ok/bad/
# run_in): containers and a browser inside a sandbox (issue 38). The image
# is tests/e2e/inner/Dockerfile (Debian's Podman with crun and netavark,
# and Chromium), built on the host before the KVM tier by
# tests/e2e/inner_image.sh into the store VMM_E2E_INNER_STORE names (the
# vmhost VM has no network); where it could not be made, STORE.skip says
# why and the part skips. One sandbox (1.5 GiB, the image's vmm.mem):
# - Podman: a busybox image made here as an OCI archive (no registry),
#   copied in with vmm cp and `podman load`ed; `podman run --rm` with
#   --network none (output, exit status), then on Podman's default bridge
#   network (netavark; CNI's plugins where netavark dies of SIGILL, as in
#   the TCG harness) reaching a web server the sandbox runs, through the
#   bridge's gateway, and with --network host. (No wget -T: Debian's
#   busybox-static 1.35 segfaults with it.)
# - Chromium: headless, as an unprivileged user, with its own sandbox
#   (no --no-sandbox: Chromium refuses to start without one), renders a
#   page the sandbox serves and writes a screenshot; while it loads (the
#   page holds an image the server answers slowly) its renderer is looked
#   at in /proc: seccomp filter mode and user and pid namespaces of its
#   own. The PNG is copied out with vmm cp; its header, size and a pixel
#   of the page's background are checked here.
# The workloads are timed in the sandbox and, where this host has the
# program, on the host (podman run with runc; chromium) and the ratios
# printed.
store=${VMM_E2E_INNER_STORE:-}
e2e_input inner "$store" VMM_E2E_INNER_STORE inner_image.sh || return 0
export VMM_IMAGE_DIR=$store VMM_STATE_DIR=$tmp/istate
idir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/inner
ix() { T=${T:-180} run_in inner "$@" 2>&1; }
# itimed CMD: CMD's output in the sandbox, then "rc=N ms=M" (its status
# and time by the guest's clock).
itimed() {
	T=${T:-600} run_in inner sh -c 's=$(date +%s%N); sh -c "$1" > /tmp/timed.out 2>&1; rc=$?
		e=$(date +%s%N); tail -n 20 /tmp/timed.out; echo "rc=$rc ms=$(( (e - s) / 1000000 ))"' sh "$1" 2>&1
}
ims() { sed -n 's/^rc=[0-9]* ms=\([0-9]*\)$/\1/p' <<< "$1" | tail -1; }
irc() { sed -n 's/^rc=\([0-9]*\) ms=[0-9]*$/\1/p' <<< "$1" | tail -1; }
iout() { sed '/^rc=[0-9]* ms=[0-9]*$/d' <<< "$1"; }
iratio() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[1]) / max(float(sys.argv[2]), 1)))' "$1" "$2"; }

inner_boot() {
	local ref out
	if [ -f "$store/inner.fail" ]; then
		bad "inner: $(cat "$store/inner.fail")"
		return 1
	fi
	ref=$(cat "$store/inner.ref" 2> /dev/null)
	if [ -z "$ref" ]; then
		bad "inner: no image in $store"
		return 1
	fi
	if out=$(timeout 900 "$vmm" run -d --name inner --image "$ref" 2> "$tmp/inner.err" < /dev/null) && [ "$out" = inner ]; then
		ok "inner: a sandbox of $ref (Podman, Chromium) boots"
	else
		bad "inner: run -d --image $ref: $out $(tail -5 "$tmp/inner.err")"
		return 1
	fi
}

# A busybox image as an OCI archive (image-spec image-layout.md: oci-layout,
# index.json, blobs/sha256), one uncompressed layer, made with sha256sum.
inner_oci() {
	local d=$tmp/ioci bb L LS CD CS MD MS
	bb=$(command -v busybox) || return 1
	rm -rf "$d" && mkdir -p "$d/root/bin" "$d/root/etc" "$d/img/blobs/sha256" || return 1
	cp "$bb" "$d/root/bin/busybox"
	for a in sh echo cat wget ip sed hostname true; do ln -s busybox "$d/root/bin/$a"; done
	echo 'root:x:0:0:root:/root:/bin/sh' > "$d/root/etc/passwd"
	tar -C "$d/root" --owner=0 --group=0 --numeric-owner -cf "$d/layer.tar" . || return 1
	L=$(sha256sum "$d/layer.tar" | cut -d' ' -f1) LS=$(stat -c %s "$d/layer.tar")
	mv "$d/layer.tar" "$d/img/blobs/sha256/$L"
	printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$L" > "$d/cfg"
	CD=$(sha256sum "$d/cfg" | cut -d' ' -f1) CS=$(stat -c %s "$d/cfg")
	mv "$d/cfg" "$d/img/blobs/sha256/$CD"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$CD" "$CS" "$L" "$LS" > "$d/man"
	MD=$(sha256sum "$d/man" | cut -d' ' -f1) MS=$(stat -c %s "$d/man")
	mv "$d/man" "$d/img/blobs/sha256/$MD"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"localhost/bb:1"}}]}' "$MD" "$MS" > "$d/img/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' > "$d/img/oci-layout"
	tar -C "$d/img" -cf "$tmp/bb-oci.tar" .
}

# What a failed network check leaves to read: the kernel's complaints
# (a crashed program), netavark, the interfaces and firewall rules.
inner_netdiag() {
	ix sh -c 'dmesg | grep -iE "segfault|traps:|general protection|netavark|podman0|veth" | tail -15
		/usr/lib/podman/netavark --version; echo "netavark --version: $?"
		podman network ls; busybox ip -o addr; busybox ip route; iptables -S 2>&1 | head -20; iptables -t nat -S 2>&1 | head -20
		busybox wget -q -O - http://127.0.0.1:8080/hello.txt; echo "wget in the sandbox: $?"
		podman --log-level debug run --rm --pull=never localhost/bb:1 true 2>&1 | grep -iE "netavark|network|error" | tail -25' | sed 's/^/     | /'
}

inner_podman() {
	local out ms h P got s bridge trap
	if ! inner_oci; then
		bad "inner: making the busybox OCI archive (no busybox on this host?)"
		return
	fi
	timeout 120 "$vmm" cp "$tmp/bb-oci.tar" inner:/root/bb-oci.tar > /dev/null 2> "$tmp/icp.err" ||
		{ bad "inner: vmm cp of the OCI archive: $(cat "$tmp/icp.err")"; return; }
	out=$(T=300 ix podman load -i /root/bb-oci.tar)
	[[ "$out" == *"Loaded image"*"localhost/bb:1"* ]] && ok "inner: podman load of an OCI archive: localhost/bb:1" ||
		{ bad "inner: podman load: $out"; return; }
	# the first run sets Podman up (storage, the runtime's state): apart
	out=$(itimed 'podman run --rm --pull=never --network none localhost/bb:1 sh -c "echo hi-from-container; exit 3"')
	[ "$(iout "$out")" = hi-from-container ] && [ "$(irc "$out")" = 3 ] &&
		ok "inner: podman run --rm (crun, overlay): the container's output and exit status 3 (first run $(ims "$out") ms)" ||
		bad "inner: podman run --rm --network none: $out"
	out=$(itimed 'podman run --rm --pull=never --network none localhost/bb:1 sh -c "echo hi-from-container; exit 3"')
	ms=$(ims "$out")
	[ "$(iout "$out")" = hi-from-container ] && [ "$(irc "$out")" = 3 ] &&
		ok "inner: podman run --rm again: ${ms} ms" || bad "inner: podman run --rm (second): $out"
	got=$(ix podman info --format '{{.Host.OCIRuntime.Name}} {{.Store.GraphDriverName}} {{.Host.NetworkBackend}} {{.Host.CgroupsVersion}} {{.Host.CgroupManager}}')
	[ "$got" = "crun overlay netavark v2 cgroupfs" ] && ok "inner: podman info: crun, overlay, netavark, cgroup v2 through cgroupfs" ||
		bad "inner: podman info: $got"

	# The sandbox's web server (busybox httpd, forking into the background)
	# and the container on the default bridge reaching it at the gateway.
	got=$(ix sh -c 'mkdir -p /srv/www && echo hello-from-sandbox > /srv/www/hello.txt && busybox httpd -p 8080 -h /srv/www && echo up')
	[ "$got" = up ] || bad "inner: busybox httpd: $got"
	bridge='sh -c "gw=\$(ip route | sed -n \"s/^default via \([0-9.]*\).*/\1/p\"); echo gw=\$gw; wget -q -O - http://\$gw:8080/hello.txt; echo wget=\$?; exit 5"'
	out=$(itimed "podman run --rm --pull=never localhost/bb:1 $bridge")
	if [ "$(iout "$out")" = "gw=10.88.0.1
hello-from-sandbox
wget=0" ] && [ "$(irc "$out")" = 5 ]; then
		ok "inner: podman run on the default bridge (netavark): the container reaches the sandbox's server at 10.88.0.1:8080, exit 5 ($(ims "$out") ms)"
	elif [[ "$out" == *"netavark: : EOF"* ]] && trap=$(ix sh -c 'dmesg | grep "traps: netavark.*invalid opcode" | tail -1') && [ -n "$trap" ]; then
		# In the QEMU TCG harness Debian's netavark 1.4.0 dies of SIGILL
		# on an AVX instruction (vmovdqu, at 0x131e6b of its text) after
		# it has set the container's route: code that runs AVX without
		# the CPU and kernel having it enabled. Not the sandbox's doing:
		# the same bridge through CNI's plugins instead.
		echo "skip inner: podman's default bridge through netavark: it died of SIGILL on AVX code (the guest's CPU flags: $(ix sh -c 'f=$(grep -m1 -ow "avx\|avx2\|xsave\|osxsave" /proc/cpuinfo | sort -u | tr "\n" " "); echo "${f:-no avx, avx2, xsave or osxsave}"')): ${trap#*] }"
		ix busybox ip link delete podman0 > /dev/null # CNI's bridge takes the same subnet
		out=$(itimed "CONTAINERS_CONF=/etc/containers/containers-cni.conf podman run --rm --pull=never localhost/bb:1 $bridge")
		if [[ "$(iout "$out")" == "gw=10.88.0.1
hello-from-sandbox
wget=0" ]] && [ "$(irc "$out")" = 5 ]; then
			ok "inner: podman run on the default bridge (CNI): the container reaches the sandbox's server at 10.88.0.1:8080, exit 5 ($(ims "$out") ms)"
		else
			bad "inner: podman run on the default bridge through CNI: $out"
			inner_netdiag
		fi
	else
		bad "inner: podman run on the default bridge: $out"
		inner_netdiag
	fi
	out=$(itimed 'podman run --rm --pull=never --network host localhost/bb:1 sh -c "wget -q -O - http://127.0.0.1:8080/hello.txt; echo wget=\$?"')
	if [ "$(iout "$out")" = "hello-from-sandbox
wget=0" ] && [ "$(irc "$out")" = 0 ]; then
		ok "inner: podman run --network host reaches the server on 127.0.0.1 ($(ims "$out") ms)"
	else
		bad "inner: podman run --network host: $out"
		inner_netdiag
	fi

	# The same run on this host: podman with runc, its own storage (vfs).
	if command -v podman > /dev/null && command -v runc > /dev/null && command -v conmon > /dev/null && [ -n "$ms" ]; then
		P=(podman --root "$tmp/hpod/root" --runroot "$tmp/hpod/run" --storage-driver vfs --runtime runc
			--cgroup-manager cgroupfs --events-backend none)
		mkdir -p "$tmp/hpod/tmp"
		if TMPDIR=$tmp/hpod/tmp "${P[@]}" load -i "$tmp/bb-oci.tar" > /dev/null 2>&1 &&
			TMPDIR=$tmp/hpod/tmp "${P[@]}" run --rm --pull=never --network none localhost/bb:1 true > /dev/null 2>&1; then
			s=$(date +%s%N)
			got=$(TMPDIR=$tmp/hpod/tmp "${P[@]}" run --rm --pull=never --network none localhost/bb:1 sh -c "echo hi-from-container; exit 3" 2>&1)
			h=$((($(date +%s%N) - s) / 1000000))
			[ "$got" = hi-from-container ] &&
				echo "     inner: podman run --rm --network none: sandbox ${ms} ms (crun), host ${h} ms (runc): $(iratio "$ms" "$h")x" ||
				echo "     inner: podman run on the host: $got"
		else
			echo "     inner: podman on the host: $(TMPDIR=$tmp/hpod/tmp "${P[@]}" load -i "$tmp/bb-oci.tar" 2>&1 | tail -2)"
		fi
		"${P[@]}" rm -af > /dev/null 2>&1
		"${P[@]}" rmi -af > /dev/null 2>&1
	else
		echo "     inner: no podman, runc and conmon on this host: no host figure"
	fi
}

# inner_png FILE: "W H R,G,B" of FILE's (a PNG, 8-bit RGB or RGBA,
# non-interlaced: what Chromium writes) size and pixel (8, 8); PNG 1.2
# (RFC 2083) sections 3.2 (signature), 4.1.1 (IHDR), 6 (filters).
inner_png() {
	python3 - "$1" << 'PY'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
if d[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("not a PNG: %r" % d[:8])
w, h, depth, ctype, _, _, lace = struct.unpack(">IIBBBBB", d[16:29])
if d[12:16] != b"IHDR" or depth != 8 or ctype not in (2, 6) or lace:
    sys.exit("unexpected IHDR %r depth %d type %d interlace %d" % (d[12:16], depth, ctype, lace))
idat, i = b"", 8
while i < len(d):
    n, t = struct.unpack(">I4s", d[i:i + 8])
    if t == b"IDAT":
        idat += d[i + 8:i + 8 + n]
    i += 12 + n
raw, bpp = zlib.decompress(idat), 3 if ctype == 2 else 4
stride, prev, rows = w * bpp, bytearray(w * bpp), []
for y in range(9):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
print(w, h, "%d,%d,%d" % tuple(rows[8][8 * bpp:8 * bpp + 3]))
PY
}

inner_chromium() {
	local out ms h flags got size hp s
	timeout 120 "$vmm" cp "$idir/www/." inner:/srv/www > /dev/null 2> "$tmp/icp.err" &&
		timeout 60 "$vmm" cp "$idir/renderers.sh" inner:/root/renderers.sh > /dev/null 2>> "$tmp/icp.err" ||
		bad "inner: vmm cp of the page: $(cat "$tmp/icp.err")"
	got=$(ix sh -c 'useradd -m -u 1000 agent && chmod 755 /srv/www/cgi-bin/slow /root/renderers.sh &&
		{ nohup /root/renderers.sh > /dev/null 2>&1 < /dev/null & } && echo ready')
	[ "$got" = ready ] || bad "inner: the browser's user and the watcher: $got"
	flags='--headless --disable-gpu --hide-scrollbars --window-size=640,480 --screenshot=shot.png'
	out=$(T=900 itimed "cd /home/agent && setpriv --reuid=agent --regid=agent --init-groups env HOME=/home/agent chromium $flags http://localhost:8080/index.html")
	ms=$(ims "$out")
	[ "$(irc "$out")" = 0 ] && grep -q "ritten to file" <<< "$out" &&
		ok "inner: headless chromium (its sandbox on, as uid 1000) renders the sandbox's page: a screenshot in ${ms} ms" ||
		bad "inner: chromium --headless --screenshot: $out"
	# each renderer as last seen (pid first): one seen just after its
	# start, before it applied its filter, reads seccomp=0 once
	got=$(ix sh -c 'kill $(cat /tmp/renderers.pid); awk '"'"'{ p = $1; sub(/^[0-9]+ /, ""); last[p] = $0 } END { for (p in last) print last[p] }'"'"' /tmp/renderers | sort -u')
	if grep -q "^renderer uid=1000 own-userns own-pidns seccomp=2$" <<< "$got" && ! grep -qv "^renderer uid=1000 own-userns own-pidns seccomp=2$" <<< "$got"; then
		ok "inner: Chromium's sandbox is on: its renderer (uid 1000) runs under a seccomp filter in its own user and pid namespaces"
	else
		bad "inner: the renderers seen: '$got'"
	fi
	rm -f "$tmp/shot.png"
	timeout 120 "$vmm" cp inner:/home/agent/shot.png "$tmp/shot.png" > /dev/null 2> "$tmp/icp.err" ||
		bad "inner: vmm cp of the screenshot: $(cat "$tmp/icp.err")"
	got=$(inner_png "$tmp/shot.png" 2>&1)
	size=$(stat -c %s "$tmp/shot.png" 2> /dev/null)
	[ "$got" = "640 480 30,144,255" ] && [ "${size:-0}" -gt 1000 ] &&
		ok "inner: the screenshot, copied out with vmm cp, is a 640x480 PNG of $size bytes with the page's blue at (8, 8)" ||
		bad "inner: the screenshot: $got ($size bytes)"

	# The same page on this host (as root, so --no-sandbox; the GPU process
	# died of SIGSEGV in the TCG harness: the GPU thread in the browser).
	if command -v chromium > /dev/null && command -v busybox > /dev/null && [ -n "$ms" ]; then
		mkdir -p "$tmp/hchrome"
		busybox httpd -f -p 127.0.0.1:18181 -h "$idir/www" &
		hp=$!
		s=$(date +%s%N)
		(cd "$tmp/hchrome" && HOME=$tmp/hchrome TMPDIR=$tmp/hchrome chromium --no-sandbox --disable-dev-shm-usage --in-process-gpu $flags http://127.0.0.1:18181/index.html > out 2>&1)
		h=$((($(date +%s%N) - s) / 1000000))
		kill "$hp" 2> /dev/null
		[ -s "$tmp/hchrome/shot.png" ] &&
			echo "     inner: chromium --headless --screenshot (the page waits 4 s for its image): sandbox ${ms} ms, host ${h} ms (as root: --no-sandbox): $(iratio "$ms" "$h")x" ||
			echo "     inner: chromium on the host made no screenshot: $(grep -E "FATAL|Goodbye|exited|rror while" "$tmp/hchrome/out" | tail -2)"
	else
		echo "     inner: no chromium on this host: no host figure"
	fi
}

if inner_boot; then
	inner_podman
	inner_chromium
fi
"$vmm" rm -f inner > /dev/null 2>&1
unset VMM_IMAGE_DIR VMM_STATE_DIR
