#!/usr/bin/env python3
"""The guest kernel's workload options (make kernel-config, part of make
test; no KVM): each option below must be built in (=y) in the config vmm
builds (boot/kernel/build.sh leaves it in BUILD/kernel/config), because
the workload named beside it fails without it (issue 38; the e2e part
"workloads", tests/e2e/workloads.sh, runs them). The guest loads no
modules, so =m counts as missing. The fragment's own check (build.sh)
catches an option that olddefconfig dropped; this one catches an option
taken out of the fragment, or one a workload needs that nobody added.

  tests/kernel/config_check.py CONFIG       check a built config
  tests/kernel/config_check.py --self-test  feed it bad configs, check it fails
"""
import io
import os
import sys
import tempfile

# (workload, [options it needs]). An option may serve several workloads;
# it is listed under the first.
WORKLOADS = [
    ("namespaces: unshare, bubblewrap, rootless Podman, Chromium's sandbox",
     ["NAMESPACES", "USER_NS", "PID_NS", "NET_NS", "UTS_NS", "IPC_NS", "TIME_NS"]),
    ("cgroup v2 and its namespace: systemd, Podman, Docker, crun/runc limits",
     ["CGROUPS", "CGROUP_SCHED", "FAIR_GROUP_SCHED", "CFS_BANDWIDTH", "CPUSETS",
      "PROC_PID_CPUSET", "MEMCG", "CGROUP_PIDS", "BLK_CGROUP", "BLK_DEV_THROTTLING",
      "CGROUP_FREEZER", "CGROUP_DEVICE", "CGROUP_CPUACCT"]),
    ("device rules on cgroup v2 (crun/runc attach a BPF program)",
     ["BPF_SYSCALL", "CGROUP_BPF", "BPF_JIT"]),
    ("seccomp filters: Chromium, systemd units, sshd, container profiles",
     ["SECCOMP", "SECCOMP_FILTER"]),
    ("io_uring: libuv (Node.js), Tokio, databases", ["IO_URING"]),
    ("runtimes' system calls: rseq (glibc), process_vm_readv (debuggers), kcmp (systemd)",
     ["RSEQ", "CROSS_MEMORY_ATTACH", "CHECKPOINT_RESTORE"]),
    ("POSIX and System V IPC, /dev/shm: Chromium, PostgreSQL, Python multiprocessing",
     ["POSIX_MQUEUE", "SYSVIPC", "SHMEM", "TMPFS"]),
    ("session keyrings (runc/crun, keyctl)", ["KEYS"]),
    ("container storage: overlayfs (Podman's and Docker's overlay driver)", ["OVERLAY_FS"]),
    ("squashfs images on loop devices (snap, AppImage, layers)",
     ["SQUASHFS", "SQUASHFS_XATTR", "SQUASHFS_ZLIB", "SQUASHFS_XZ", "SQUASHFS_ZSTD", "BLK_DEV_LOOP"]),
    ("xattrs and ACLs: file capabilities (ping, newuidmap), rootless overlay's user xattrs",
     ["EXT4_FS_POSIX_ACL", "EXT4_FS_SECURITY", "TMPFS_POSIX_ACL", "TMPFS_XATTR"]),
    ("FUSE: fuse-overlayfs, sshfs, virtio-fs", ["FUSE_FS", "VIRTIO_FS"]),
    ("container networks: bridge, veth, tun/tap (slirp4netns, pasta), dummy, macvlan",
     ["BRIDGE", "BRIDGE_NETFILTER", "VETH", "TUN", "DUMMY", "MACVLAN"]),
    ("IPv6 (loopback ::1, dual-stack servers)", ["IPV6"]),
    ("network tools: AF_PACKET (dhclient, tcpdump), ss", ["PACKET", "INET_DIAG", "UNIX_DIAG"]),
    ("nf_tables: nft, firewalld, netavark, iptables-nft",
     ["NETFILTER", "NF_TABLES", "NF_TABLES_INET", "NF_TABLES_IPV4", "NF_TABLES_IPV6",
      "NFT_CT", "NFT_NAT", "NFT_MASQ", "NFT_REDIR", "NFT_REJECT", "NFT_FIB_INET",
      "NFT_COMPAT"]),
    ("connection tracking and NAT: a container network's masquerade and port forwards",
     ["NF_CONNTRACK", "NF_CONNTRACK_PROCFS", "NF_NAT"]),
    ("the xt matches and targets Podman, Docker and netavark write",
     ["NETFILTER_XTABLES", "NETFILTER_XT_MATCH_CONNTRACK", "NETFILTER_XT_MATCH_STATE",
      "NETFILTER_XT_MATCH_ADDRTYPE", "NETFILTER_XT_MARK", "NETFILTER_XT_MATCH_COMMENT",
      "NETFILTER_XT_MATCH_MULTIPORT", "NETFILTER_XT_TARGET_MASQUERADE", "NETFILTER_XT_NAT",
      "NETFILTER_XT_TARGET_REDIRECT"]),
    ("iptables' tables (iptables-legacy, ip6tables)",
     ["IP_NF_IPTABLES", "IP_NF_FILTER", "IP_NF_NAT", "IP_NF_MANGLE", "IP_NF_RAW",
      "IP_NF_TARGET_REJECT", "IP6_NF_IPTABLES", "IP6_NF_FILTER", "IP6_NF_NAT",
      "IP6_NF_MANGLE", "IP6_NF_TARGET_REJECT"]),
    ("Ctrl-Alt-Del from the host (Firecracker's SendCtrlAltDel)",
     ["SERIO_I8042", "KEYBOARD_ATKBD", "VT"]),
]


def read_config(path):
    """{OPTION: value} of a .config, "n" for `# CONFIG_X is not set`."""
    opts = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("CONFIG_") and "=" in line:
                k, v = line.split("=", 1)
                opts[k[len("CONFIG_"):]] = v
            elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
                opts[line[len("# CONFIG_"):-len(" is not set")]] = "n"
    return opts


def check(path, out=sys.stdout):
    """Prints one line per workload and the count line; returns the
    number of workloads with a missing option."""
    opts = read_config(path)
    passed = failed = 0
    for workload, needed in WORKLOADS:
        missing = [o + ("=" + opts[o] if o in opts else " unset")
                   for o in needed if opts.get(o) != "y"]
        if missing:
            failed += 1
            print(f"FAIL {workload}: CONFIG_{', CONFIG_'.join(missing)}", file=out)
        else:
            passed += 1
            print(f"ok   {workload} ({len(needed)} options)", file=out)
    if "MODULES" in opts and opts["MODULES"] == "y":
        failed += 1
        print("FAIL the guest loads no modules, but CONFIG_MODULES=y", file=out)
    print(f"kernel-config: {passed} passed, {failed} failed ({path})", file=out)
    return failed


def self_test():
    """A complete config passes; one with an option dropped, one with it
    =m, one with it `is not set` fail, naming that option."""
    all_opts = [o for _, needed in WORKLOADS for o in needed]
    good = "".join(f"CONFIG_{o}=y\n" for o in all_opts) + "# CONFIG_MODULES is not set\n"
    victim = "NFT_COMPAT"
    cases = [
        ("complete", good, 0),
        ("dropped", good.replace(f"CONFIG_{victim}=y\n", ""), 1),
        ("module", good.replace(f"CONFIG_{victim}=y", f"CONFIG_{victim}=m"), 1),
        ("not set", good.replace(f"CONFIG_{victim}=y", f"# CONFIG_{victim} is not set"), 1),
        ("modules on", good.replace("# CONFIG_MODULES is not set", "CONFIG_MODULES=y"), 1),
    ]
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for name, text, want_failed in cases:
            path = os.path.join(d, "config")
            with open(path, "w") as f:
                f.write(text)
            out = io.StringIO()
            got = check(path, out)
            named = want_failed == 0 or "CONFIG_" + (victim if name != "modules on" else "MODULES") in out.getvalue()
            if got != want_failed or not named:
                ok = False
                print(f"kernel-config self-test: the {name} config: {got} failures, want {want_failed}:")
                print(out.getvalue(), end="")
    print("kernel-config self-test: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        sys.exit("usage: config_check.py CONFIG | --self-test")
    sys.exit(1 if check(sys.argv[1]) else 0)


if __name__ == "__main__":
    main()
