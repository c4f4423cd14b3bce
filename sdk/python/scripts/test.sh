#!/bin/sh
# Runs the Python SDK's tests (python3 -m unittest) against conch daemons built
# from this repository. The interpreter is $PYTHON when set, else the python3
# on PATH, else /usr/bin/python3 when only that one has the optional websockets
# package (Debian's python3-websockets), so the attach tests run rather than
# skip. Fails when no Python 3.9 or later is found.
set -eu
cd "$(dirname "$0")/.."

has() { "$1" -c 'import sys; assert sys.version_info >= (3, 9)' 2>/dev/null; }
py=${PYTHON:-}
if [ -z "$py" ]; then
	py=python3
	if ! "$py" -c 'import websockets' 2>/dev/null && [ -x /usr/bin/python3 ] && has /usr/bin/python3 &&
		/usr/bin/python3 -c 'import websockets' 2>/dev/null; then
		py=/usr/bin/python3
	fi
fi
if ! has "$py"; then
	echo "sdk/python: no Python 3.9 or later ($py); install python3" >&2
	exit 1
fi
"$py" -c 'import websockets' 2>/dev/null ||
	echo "sdk/python: $py has no websockets package: the attach tests are skipped (install python3-websockets)" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd ../.. && go build -o "$tmp/conch" ./cmd/conch)
echo "sdk/python: $("$py" --version) ($py)" >&2
CONCH_BIN="$tmp/conch" "$py" -m unittest discover -s tests -t .
