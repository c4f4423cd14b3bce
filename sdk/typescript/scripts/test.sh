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

# The package as npm packs it from a clean checkout (no dist yet) installs
# into an empty project and imports, from JavaScript as from TypeScript.
mkdir "$tmp/src" "$tmp/app"
cp -R package.json package-lock.json tsconfig.json README.md src "$tmp/src/"
ln -s "$PWD/node_modules" "$tmp/src/node_modules"
(cd "$tmp/src" && npm pack --silent --pack-destination "$tmp" >/dev/null)
tarball=$(ls "$tmp"/conchsh-sdk-*.tgz)
if ! tar -tzf "$tarball" | grep -q '^package/dist/index.js$'; then
	echo "sdk/typescript: npm pack shipped no code:" >&2
	tar -tzf "$tarball" >&2
	exit 1
fi
(cd "$tmp/app" && echo '{"name":"app","private":true,"type":"module"}' > package.json &&
	npm install --silent --no-audit --no-fund --omit=optional "$tarball" &&
	node -e "import('@conchsh/sdk').then((m) => { if (typeof m.Sandbox !== 'function' || typeof m.ConchError !== 'function') process.exit(1) })")
echo "sdk/typescript: the packed package installs into an empty project and imports"
(cd ../.. && go build -o "$tmp/conch" ./cmd/conch)
CONCH_BIN="$tmp/conch" node --test build/test/*.test.js
