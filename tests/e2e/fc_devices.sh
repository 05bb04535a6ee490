# Sourced by fc_api.sh (uses fc, fc_start, ready, run_in, stop_sandbox,
# $kernel, $rootfs, $tmp): the balloon and entropy devices in a Linux guest,
# each VM booted through the Firecracker API (a snapshot cannot gain a
# device), one at a time (two 256 MiB guests at once would crowd the
# harness).
#   fcbal: balloon with statistics every 1 s, free page reporting and
#          deflate_on_oom; entropy without a limit.
#   fcrng: balloon with neither (so the freed memory stays with the VMM
#          until the balloon takes it); entropy limited to 1 KiB/s.
# Figures, not time, are asserted: RSS and meminfo move by tens of MiB,
# polled until they do (bounded); the limiter by a byte count.

# fc_boot NAME BALLOON_JSON ENTROPY_JSON: a VMM configured over its API
# socket with guest-init's root disk, vsock, the two devices, booted.
fc_boot() {
	local s=$tmp/$1.sock out
	cp --sparse=always "$rootfs" "$tmp/$1-root.img"
	fc_start "$1"
	out=$(fc "$s" PUT /boot-source "{\"kernel_image_path\": \"$kernel\", \"boot_args\": \"console=ttyS0 reboot=k panic=-1\"}"
	      fc "$s" PUT /drives/rootfs "{\"drive_id\": \"rootfs\", \"path_on_host\": \"$tmp/$1-root.img\", \"is_root_device\": true, \"is_read_only\": false}"
	      fc "$s" PUT /machine-config '{"vcpu_count": 1, "mem_size_mib": 256}'
	      fc "$s" PUT /vsock "{\"guest_cid\": 3, \"uds_path\": \"$tmp/$1.vsock\"}"
	      fc "$s" PUT /balloon "$2"
	      fc "$s" PUT /entropy "$3"
	      fc "$s" PUT /actions '{"action_type": "InstanceStart"}')
	[ "$(echo "$out" | grep -c '^204$')" = 7 ] || { echo "     $1: $out" | tr '\n' ' '; echo; return 1; }
	ready "$1"
}
# The VMM itself (fc_start's pid is timeout's) and its resident set in MiB.
fc_vmm_pid() { awk '{ print $1 }' "/proc/$1/task/$1/children" 2> /dev/null; }
rss_mib() { awk '/^VmRSS:/ { print int($2 / 1024) }' "/proc/$1/status" 2> /dev/null; }
# rss_settle PID: the RSS once two samples 1 s apart agree within 2 MiB (max 30 s).
rss_settle() {
	local a b
	a=$(rss_mib "$1")
	for _ in $(seq 30); do
		sleep 1
		b=$(rss_mib "$1")
		[ $((a - b)) -le 2 ] && [ $((b - a)) -le 2 ] && break
		a=$b
	done
	echo "$b"
}
# meminfo NAME FIELD: the guest's /proc/meminfo FIELD in MiB.
meminfo() { run_in "$1" awk -v f="$2:" '$1 == f { print int($2 / 1024) }' /proc/meminfo; }
# stat_of JSON KEY: a number from GET /balloon/statistics's body.
stat_of() { echo "$1" | grep -o "\"$2\":[0-9]*" | head -1 | cut -d: -f2; }
# fill NAME MIB: MIB of zeroes written to a fresh tmpfs in the guest (held).
fill() {
	run_in "$1" sh -c "mkdir -p /bt && mount -t tmpfs -o size=240m bt /bt && dd if=/dev/zero of=/bt/f bs=1M count=$2 2> /dev/null && [ \$(stat -c %s /bt/f) = $(($2 << 20)) ]"
}
unfill() { run_in "$1" sh -c 'rm -f /bt/f && umount /bt'; }
# hwrng_count NAME: bytes /dev/hwrng gives in 3 s (the guest's own timer),
# read 64 bytes at a time: a larger read() waits until all of it came, and
# what a read killed by the timeout had gathered is lost (with a limit,
# `head -c` counted 0).
hwrng_count() { run_in "$1" sh -c 'timeout 3 dd if=/dev/hwrng bs=64 count=16384 2> /dev/null | wc -c'; }

# ---- fcbal: free page reporting, statistics, deflate_on_oom -------------------
fcbal_checks() {
local sb=$tmp/fcbal.sock pid rng a b r0 r1 r2 st st0 st1 f0 f1 fresh i p avail0 avail1 total0 total1
pid=$(fc_vmm_pid "${fc_pids##* }")

# Entropy: the driver is bound, two reads differ, unlimited throughput.
rng=$(run_in fcbal cat /sys/class/misc/hw_random/rng_current)
a=$(run_in fcbal sh -c 'head -c 64 /dev/hwrng | od -An -tx1 | tr -d " \n"')
b=$(run_in fcbal sh -c 'head -c 64 /dev/hwrng | od -An -tx1 | tr -d " \n"')
if [ "${rng#virtio_rng}" != "$rng" ] && [ ${#a} = 128 ] && [ ${#b} = 128 ] && [ "$a" != "$b" ]; then
	ok "entropy: /dev/hwrng is $rng; two 64-byte reads give 64 bytes each, and differ"
else bad "entropy: rng_current '$rng', reads '$a' '$b'"; fi
free_bytes=$(hwrng_count fcbal)
echo "     entropy without a limiter: ${free_bytes:-?} bytes in 3 s"

# Statistics follow the guest at the interval; RSS rises with 128 MiB held
# and drops back once it is freed (free page reporting).
st0=$(fc "$sb" GET /balloon/statistics)
r0=$(rss_settle "$pid")
fill fcbal 128
r1=$(rss_mib "$pid")
fresh=
for i in $(seq 20); do # the guest's next report, 1 s apart
	st1=$(fc "$sb" GET /balloon/statistics)
	f0=$(stat_of "$st0" free_memory) f1=$(stat_of "$st1" free_memory)
	[ -n "$f0" ] && [ -n "$f1" ] && [ $(((f0 - f1) >> 20)) -ge 100 ] && { fresh=$i; break; }
	sleep 0.5
done
echo "     fcbal: RSS $r0 MiB settled, $r1 MiB with 128 MiB held; statistics: free_memory $((${f0:-0} >> 20)) -> $((${f1:-0} >> 20)) MiB after ${fresh:-?} polls"
if [ "$(echo "$st0" | tail -1)" = 200 ] && [ -n "$fresh" ]; then
	ok "balloon statistics: free_memory drops by >= 100 MiB in a report within 20 polls of the guest filling 128 MiB"
else bad "balloon statistics: $(echo "$st0" | head -1) / $(echo "$st1" | head -1)"; fi
if [ -n "$r0" ] && [ -n "$r1" ] && [ $((r1 - r0)) -ge 96 ]; then
	ok "balloon: the VMM's RSS rises by >= 96 MiB while the guest holds 128 MiB ($r0 -> $r1 MiB)"
else bad "balloon: RSS $r0 -> $r1 MiB with 128 MiB held"; fi
unfill fcbal
r2=$r1
for _ in $(seq 60); do
	r2=$(rss_mib "$pid")
	[ $((r1 - r2)) -ge 96 ] && break
	sleep 1
done
if [ -n "$r2" ] && [ $((r1 - r2)) -ge 96 ]; then
	ok "balloon free page reporting: the guest frees 128 MiB, the VMM's RSS drops back ($r1 -> $r2 MiB)"
else bad "balloon free page reporting: RSS $r1 -> $r2 MiB after the guest freed 128 MiB"; fi

# Inflate to 64 MiB: with deflate_on_oom Linux keeps MemTotal and takes
# the pages from what is available; actual follows the target.
avail0=$(meminfo fcbal MemAvailable)
total0=$(meminfo fcbal MemTotal)
p=$(fc "$sb" PATCH /balloon '{"amount_mib": 64}' | tail -1)
for _ in $(seq 60); do
	st=$(fc "$sb" GET /balloon/statistics)
	[ "$(stat_of "$st" actual_mib)" = 64 ] && break
	sleep 1
done
avail1=$(meminfo fcbal MemAvailable)
total1=$(meminfo fcbal MemTotal)
echo "     fcbal inflated to 64 MiB: MemTotal $total0 -> $total1 MiB, MemAvailable $avail0 -> $avail1 MiB"
if [ "$p" = 204 ] && [ "$(stat_of "$st" actual_mib)" = 64 ] && [ -n "$avail1" ] && [ $((avail0 - avail1)) -ge 56 ]; then
	ok "balloon inflate (PATCH amount_mib 64): actual_mib reaches 64, the guest's MemAvailable shrinks by >= 56 MiB"
else bad "balloon inflate: PATCH $p, $(echo "$st" | head -1), MemAvailable $avail0 -> $avail1"; fi
}

# ---- fcrng: limited entropy, a balloon without reporting ---------------------
fcrng_checks() {
local sr=$tmp/fcrng.sock pid lim_bytes n r1 r2 p total0 total1 total2
pid=$(fc_vmm_pid "${fc_pids##* }")

# In 3 s the bucket gives at most its 1024 bytes plus 3 s of refill
# (4 KiB); 2 KiB more covers a late guest timer. Without a limit fcbal
# read far more, so the bound is the limiter's doing.
lim_bytes=$(hwrng_count fcrng)
echo "     entropy at 1 KiB/s: ${lim_bytes:-?} bytes in 3 s (unlimited: ${free_bytes:-?})"
if [ -n "$lim_bytes" ] && [ "$lim_bytes" -ge 512 ] && [ "$lim_bytes" -le 6144 ] &&
	[ -n "$free_bytes" ] && [ "$free_bytes" -gt 12288 ]; then
	ok "entropy rate limiter: 512..6144 bytes of /dev/hwrng in 3 s at 1 KiB/s ($lim_bytes), > 12 KiB without ($free_bytes)"
else bad "entropy rate limiter: $lim_bytes bytes limited, $free_bytes unlimited"; fi

# Touch most of the guest's memory and free it: without reporting it stays
# resident in the VMM; inflating 128 MiB then gives it back (MADV_REMOVE)
# and, without deflate_on_oom, Linux lowers MemTotal.
n=$(( $(meminfo fcrng MemAvailable) - 40 ))
[ "$n" -le 200 ] || n=200
fill fcrng "$n"
unfill fcrng
r1=$(rss_settle "$pid")
total0=$(meminfo fcrng MemTotal)
p=$(fc "$sr" PATCH /balloon '{"amount_mib": 128}' | tail -1)
for _ in $(seq 60); do
	total1=$(meminfo fcrng MemTotal)
	[ -n "$total1" ] && [ $((total0 - total1)) -ge 120 ] && break
	sleep 1
done
r2=$(rss_settle "$pid")
echo "     fcrng: filled and freed $n MiB; inflated to 128 MiB: MemTotal $total0 -> $total1 MiB, RSS $r1 -> $r2 MiB"
if [ "$p" = 204 ] && [ -n "$total1" ] && [ $((total0 - total1)) -ge 120 ]; then
	ok "balloon inflate without deflate_on_oom: the guest's MemTotal shrinks by >= 120 MiB ($total0 -> $total1)"
else bad "balloon inflate: PATCH $p, MemTotal $total0 -> $total1"; fi
if [ -n "$r2" ] && [ $((r1 - r2)) -ge 64 ]; then
	ok "balloon inflate: the VMM's RSS drops by >= 64 MiB ($r1 -> $r2 MiB)"
else bad "balloon inflate: RSS $r1 -> $r2 MiB"; fi
p=$(fc "$sr" PATCH /balloon '{"amount_mib": 0}' | tail -1)
for _ in $(seq 60); do
	total2=$(meminfo fcrng MemTotal)
	[ -n "$total2" ] && [ $((total0 - total2)) -le 1 ] && break
	sleep 1
done
if [ "$p" = 204 ] && [ -n "$total2" ] && [ $((total0 - total2)) -le 1 ]; then
	ok "balloon deflate (amount_mib 0): MemTotal back to $total2 MiB"
else bad "balloon deflate: PATCH $p, MemTotal $total2 (was $total0)"; fi
}

free_bytes=
if fc_boot fcbal '{"amount_mib": 0, "deflate_on_oom": true, "stats_polling_interval_s": 1, "free_page_reporting": true}' '{}'; then
	ok "fc-api devices: boot-source, drive, vsock, balloon (stats 1 s, reporting, deflate_on_oom), entropy, InstanceStart: guest-init answers"
	grep -o "boot marker: guest ready [0-9.]* ms" "$tmp/fcbal.err" | sed 's/^/     fcbal: /'
	fcbal_checks
else bad "fc-api devices: fcbal did not boot: $(tail -3 "$tmp/fcbal.err")"; fi
stop_sandbox fcbal
if fc_boot fcrng '{"amount_mib": 0, "deflate_on_oom": false, "stats_polling_interval_s": 0}' \
	'{"rate_limiter": {"bandwidth": {"size": 1024, "refill_time": 1000}}}'; then
	ok "fc-api devices: fcrng (entropy limited to 1 KiB/s, balloon without reporting) boots, guest-init answers"
	grep -o "boot marker: guest ready [0-9.]* ms" "$tmp/fcrng.err" | sed 's/^/     fcrng: /'
	fcrng_checks
else bad "fc-api devices: fcrng did not boot: $(tail -3 "$tmp/fcrng.err")"; fi
stop_sandbox fcrng
