#!/usr/bin/env bash
# Installs the official E2B JavaScript SDK (npm `e2b`, the version below)
# into the cache, ~/.cache/vmm/npm/e2b-VERSION (VMM_CACHE moves it), once;
# prints that folder (NODE_PATH=FOLDER/node_modules finds it). Needs node
# and npm; exits 1 saying why when they are missing or the install fails.
set -eu
version=${E2B_SDK_VERSION:-2.51.0}
cache=${VMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmm}
dir=$cache/npm/e2b-$version
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
	echo "sdk.sh: node and npm are needed (apt-get install nodejs npm)" >&2
	exit 1
fi
if [ ! -f "$dir/node_modules/e2b/package.json" ]; then
	mkdir -p "$dir"
	[ -f "$dir/package.json" ] || echo '{"name":"vmm-e2b-test","private":true,"type":"module"}' > "$dir/package.json"
	if ! npm install --prefix "$dir" --no-audit --no-fund --silent "e2b@$version" >&2; then
		echo "sdk.sh: npm install e2b@$version failed" >&2
		exit 1
	fi
fi
echo "$dir"
