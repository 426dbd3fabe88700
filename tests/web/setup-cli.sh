#!/usr/bin/env bash
# Installs the DSH 0.1.0-rc.8 CLI for the browser test into tests/web/.work/cli, with the one-line
# HMR guard applied by pnpm `patchedDependencies` (declared in tests/web/cli/package.json, so pnpm
# applies it on every install and never twice). Idempotent. Prints the path of the CLI's bin.js
# as the last line of stdout; progress goes to stderr.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLI="$HERE/.work/cli"
say() { printf 'setup-cli: %s\n' "$*" >&2; }
mkdir -p "$CLI/patches"
cp "$HERE/cli/package.json" "$CLI/package.json"
cp "$HERE"/cli/patches/*.patch "$CLI/patches/"
if ! (cd "$CLI" && npx -y pnpm@9 install --reporter=silent >"$CLI/install.log" 2>&1); then
  tail -30 "$CLI/install.log" >&2
  say "pnpm install failed"
  exit 1
fi
BOOT=$(ls -d "$CLI"/node_modules/.pnpm/@deepseek-ai+dsh-app-boot@0.1.0-rc.8*/node_modules/@deepseek-ai/dsh-app-boot/lib/index.js | head -1)
grep -q 'typeof hmr?.registerConfig !== "function"' "$BOOT" || { say "the HMR guard is not in $BOOT"; exit 1; }
say "dsh 0.1.0-rc.8 installed, HMR guard present"
echo "$CLI/node_modules/@deepseek-ai/dsh/lib/bin.js"
