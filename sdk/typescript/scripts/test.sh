#!/bin/sh
# Builds the SDK and runs its tests (node --test) against a conch daemon
# built from this repository. Installs the package's dependencies (npm ci)
# when they are missing or older than the lock file. Fails when node or npm
# is missing: the SDK's tests are never skipped.
set -eu
cd "$(dirname "$0")/.."

for tool in node npm go; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "sdk/typescript: $tool is not installed; the SDK's tests need node >= 20, npm and go" >&2
		exit 1
	fi
done
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "sdk/typescript: node $(node --version) is too old; the SDK needs node >= 20" >&2
	exit 1
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund
fi

rm -rf dist build
npm run --silent build
npm run --silent build:test

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd ../.. && go build -o "$tmp/conch" ./cmd/conch)
CONCH_BIN="$tmp/conch" node --test build/test/*.test.js
