# What a Linux guest's console shows when something in it crashed or hung.
# One extended regular expression a line (grep -E and Python re read the
# same text); lines starting with # are comments. tests/e2e/lib.sh fails
# the running check when a console line matches any of them, and
# tests/api/api_test.py --console does the same per API check. There is
# no allow-list: a match is a failure.
#
# A user process killed by its own fault (arch/x86/mm/fault.c
# show_signal_msg: "cat[65]: segfault at 0 ip ..."; arch/x86/kernel/traps.c
# do_trap / do_general_protection: "traps: sh[587] general protection
# fault ip:...", "traps: x[9] trap invalid opcode ...").
segfault at [0-9a-f]+
traps: .*\[[0-9]+\]
general protection fault
# With print-fatal-signals=1 on the guest's command line.
potentially unexpected fatal signal
# The kernel: an Oops (its header carries the die counter "[#1]"), BUG(),
# a panic, the lockup detectors, RCU stalls, hung tasks.
Oops: 
\[#[0-9]+\]
kernel BUG at
BUG: 
Kernel panic - not syncing
soft lockup
hard LOCKUP
rcu.*(self-detected stall|detected (expedited )?stalls)
blocked for more than [0-9]+ seconds
