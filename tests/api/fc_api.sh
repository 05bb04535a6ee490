#!/usr/bin/env bash
# The Firecracker-compatible control API on real VMMs (test guests, no
# Linux): tests/api/fc_api.py.   fc_api.sh VMM GUEST_DIR [UFFD_HANDLER]
# (the Uffd handler defaults to BUILD/tools/uffd_handler beside VMM)
set -u
if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "skip fc-api: /dev/kvm is not usable on this host"
	exit 0
fi
command -v curl > /dev/null || { echo "fc-api: needs curl (make deps)"; exit 1; }
here=$(dirname "$0")
exec timeout 600 python3 "$here/fc_api.py" "$1" "$2" "$here/../../docs/openapi.yaml" "${3:-$(dirname "$1")/tools/uffd_handler}"
