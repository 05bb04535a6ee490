#!/usr/bin/env bash
# Installs the Debian 12 packages vmm's build, tests and benchmarks need;
# does nothing when they are all there. Uses sudo when not root.
#   boot/deps.sh [--bench]
set -euo pipefail

pkgs=(
	build-essential   # gcc, make
	linux-libc-dev    # KVM uapi headers (linux/kvm.h, asm/bootparam.h)
	libcmocka-dev     # unit tests
	musl-tools        # static guest tools (musl-gcc)
	busybox-static    # the test/default initramfs and root image
	e2fsprogs         # mkfs.ext4 -d (root image), e2fsck/debugfs (tests)
	linux-source-6.12 # guest kernel source
	flex bison bc libelf-dev libssl-dev xz-utils patch # guest kernel build
	clang             # make fuzz (libFuzzer)
	python3           # tests (pty console), bench/boot
	curl              # tests: published ports, from the host; egress HTTPS
	python3-requests  # tests: egress HTTPS with a real client (egress_host.py)
	iproute2          # tests: network namespaces and TAPs (ip)
	debootstrap       # vmm image build --debian
	libcurl4-openssl-dev # vmm image pull: the OCI registry API over HTTPS
	zlib1g-dev libzstd-dev # vmm image pull/import: gzip and zstd layers
	docker-registry skopeo umoci # tests: a registry, image archives, images to push
	containerd podman runc # tests: vmm oci under real engines (tests/e2e/oci.sh)
	python3-grpcio python3-grpc-tools # tests: a CRI client generated at test time from the CRI api.proto (tests/e2e/cri.sh)
	gnuplot-nox       # bench/report's plots (and tests/cli/bench_report.py, which draws them)
	buildah           # tests: buildah bud builds the same tree as vmm image build (tests/cli/dockerfile.sh)
	containernetworking-plugins iptables # tests: podman run -p over CNI bridge+portmap (tests/e2e/oci.sh)
	libsqlite3-dev    # tests: a static SQLite writer, two sandboxes on one drive (tests/e2e/sqlitecount.c)
	nfs-kernel-server # tests: a drive on NFSv4, exported and mounted on loopback (tests/e2e/drives_nfs.sh)
	python3-yaml      # tests: the E2B gateway's answers against openapi.yml (tests/e2b/schema_check.py)
)
# tests: the official E2B SDK (npm e2b) against vmm e2b serve (tests/e2b);
# by command, not package: a node from elsewhere (NodeSource's carries its
# own npm) must not be replaced by Debian's
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
	pkgs+=(nodejs npm)
fi
if [ "${1:-}" = --bench ]; then
	pkgs+=(qemu-system-x86) # the peer bench/boot compares against
elif [ ! -e /dev/kvm ] || [ -d /sys/module/kvm_pvm ]; then
	# No KVM here, or one that emulates guest ring 0: the KVM test tiers
	# (those that boot Linux, on the latter) run in a QEMU TCG VM with an
	# emulated SVM CPU instead (tests/vmhost; Debian's kernel package is
	# downloaded into ~/.cache/vmm/vmhost on first use, never installed).
	pkgs+=(qemu-system-x86)
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} = 0 ] && exit 0

echo "  DEPS    installing: ${missing[*]}"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
