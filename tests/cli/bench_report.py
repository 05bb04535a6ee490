#!/usr/bin/env python3
"""bench/report's parsing and plots, with made-up bench output (no KVM):
ratio rows parse, MB/s-like figures convert, and with gnuplot installed
every plot the issue asks for is written (ratios, start-up phases,
start-latency distributions, restores at once, memory per sandbox against
the count, throughput per device); a plot with no data is left out.

  bench_report.py
"""
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(HERE, "..", "..", "bench", "report")
loader = importlib.machinery.SourceFileLoader("report", path)
spec = importlib.util.spec_from_loader("report", loader)
report = importlib.util.module_from_spec(spec)
loader.exec_module(report)

fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += 0 if cond else 1


rows = report.parse_rows("sequential write (dd)        13.0 MB/s     28.1 MB/s      0.46x\n"
                         "create empty file             55.8 ops/s    46.7 ops/s     1.19x\n"
                         "not a row\n")
check(len(rows) == 2 and rows[0]["ratio"] == 0.46 and rows[1]["vmm"] == "55.8 ops/s",
      f"ratio rows parse ({rows})")
# bench/net's table: a variant column between vmm and the peer, labels
# that start with a digit (bench/vsock), header and run lines that are not rows.
rows3 = report.parse_rows("                         vmm   vmm-nooffload     qemu    ratio\n"
                          "ping round trip      5.71 ms         3.02 ms    6.20 ms    1.09x\n"
                          "1-byte echo p50    1874.7 us    178.8 us   0.095x\n"
                          "  run 1 vmm : ping 5.71 ms, guest->host 0.52 MB/s\n")
check(len(rows3) == 2 and rows3[0] == {"figure": "ping round trip", "vmm": "5.71 ms", "peer": "6.20 ms",
                                       "ratio": 1.09} and rows3[1]["figure"] == "1-byte echo p50",
      f"ratio rows with a variant column and a leading digit parse ({rows3})")
out = ("  run 1 vmm: 0.3 s\nbench/restore: snapshot taken\n"
       "                                p50     p99   n\n"
       "restore to API (256 MiB)   362.7 ms  516.4 ms  20\n"
       "QEMU / vmm                     5.0x\n")
table = report.summary_table(out)
md = report.markdown({"restore": {"rc": 0, "seconds": 1, "output": out, "rows": []}}, "T", "h")
check(len(table) == 3 and table[1].startswith("restore to API") and "restore to API (256 MiB)" in md,
      f"a bench without ratio rows: its summary table goes into the Markdown ({table})")
check(report.summary_table("  run 1 vmm: 0.3 s\n") == [], "no table, nothing quoted")
check(report.mb_per_s("13.0 MB/s") == 13.0 and report.mb_per_s("1 Gbit/s") == 125.0 and
      report.mb_per_s("55.8 ops/s") is None and report.mb_per_s("fast") is None,
      "throughput figures convert to MB/s, other units do not")

results = {
    "fs": {"rc": 0, "seconds": 1, "output": "", "rows": rows},
    "net": {"rc": 0, "seconds": 1, "output": "", "rows": report.parse_rows(
        "TCP guest -> host              2.1 Gbit/s    1.9 Gbit/s     1.11x\n")},
    "restore": {"rc": 0, "seconds": 1, "output": "", "rows": [], "data": {
        "restore_s": [0.31, 0.29, 0.35], "cold_s": [12.0, 13.5],
        "batches": [{"at_once": 1, "seconds": 0.4, "answered": 1},
                    {"at_once": 4, "seconds": 1.1, "answered": 4}],
        "pss_kib_by_count": {"clones": [30000, 40000], "cold": [260000, 520000]}}},
    "startup": {"rc": 0, "seconds": 1, "output": "", "rows": [], "data": {
        "this": {"cold_phases": [[["x", {"kvm": 1500, "load": 9000, "total": 20000}]]]}}},
}
if shutil.which("gnuplot"):
    with tempfile.TemporaryDirectory() as d:
        files = report.plots(results, d, "T")
        names = sorted(os.path.basename(f) for f in files)
        want = ["T-at-once.png", "T-latency.png", "T-memory.png", "T-phases.png", "T-ratios.png",
                "T-throughput.png"]
        check(names == want, f"every plot written ({names})")
        check(all(os.path.getsize(f) > 1000 for f in files), "the plots are not empty")
        with open(os.path.join(d, "T-throughput.dat")) as f:
            thr = f.read()
        check("sequential write" in thr and "TCP guest" in thr and "create empty" not in thr,
              "throughput plot: MB/s rows of fs and net, not ops/s")
        with open(os.path.join(d, "T-memory.dat")) as f:
            mem = f.read().split()
        # clones: 30000 KiB for 1 -> 29.3 MiB each; 40000 for 2 -> 19.5 each
        check(abs(float(mem[mem.index("1") + 1]) - 29.296875) < 1e-6, "memory plot: MiB per sandbox")
        del results["restore"]["data"]
        files = report.plots(results, d, "U")
        check(not any("latency" in f or "memory" in f for f in files), "no restore data: its plots left out")
else:
    print("skip plots: gnuplot not installed (Debian: gnuplot-nox)")
md = report.markdown(results, "T", "host")
check("| sequential write (dd) | 13.0 MB/s | 28.1 MB/s | 0.46x |" in md, "the Markdown table")
sys.exit(1 if fails else 0)
