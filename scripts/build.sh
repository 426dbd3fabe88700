#!/usr/bin/env bash
# Builds the npm package dsh-prompt-rewind at the repository root (the napi
# addon in release mode, the host plugin, the client bundle) after installing
# its build tools with `npm ci`.
#   scripts/build.sh           build
#   scripts/build.sh --check   build, then type-check the host plugin, check its
#                              module layout and that the committed napi typings
#                              match the build
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
command -v npm >/dev/null || { echo "build.sh: npm is not on PATH" >&2; exit 1; }
STAMP=node_modules/.build-deps.stamp
want=$(sha256sum package.json package-lock.json | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "build.sh: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
  printf '%s\n' "$want" > "$STAMP"
fi
node scripts/build-package.mjs
if [ "${1:-}" = --check ]; then
  echo "build.sh: type-check the host plugin" >&2
  npm run --silent typecheck
  echo "build.sh: js/src layout: no import cycle, no module over 400 lines" >&2
  node scripts/check-js-layout.mjs
  echo "build.sh: napi typings match the build" >&2
  npm run --silent check:typings
fi
