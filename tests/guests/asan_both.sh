#!/usr/bin/env bash
# The ASan pass of the test guests and the Firecracker API in one VM run
# (make asan): both run; the status is the first failure's.
#   asan_both.sh VMM GUEST_DIR UFFD_HANDLER
here=$(dirname "$0")
"$here/run.sh" "$1" "$2"
g=$?
"$here/../api/fc_api.sh" "$1" "$2" "$3" || exit $?
exit $g
