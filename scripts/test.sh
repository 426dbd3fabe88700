#!/usr/bin/env bash
# Runs every test of the project, installing what it needs first (idempotent;
# the first run on a fresh machine downloads Rust crates, Node 24 and the DSH
# packages from their registries, and Debian's chromium for the browser tests).
#
#   scripts/test.sh            everything
#   TEST_ONLY=rust|release|host|web scripts/test.sh   one part
#
# Environment: PROPTEST_CASES (default per test), CARGO_TARGET_DIR (default ./target).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
ONLY=${TEST_ONLY:-all}
step() { printf '\n=== %s ===\n' "$*" >&2; }

command -v cargo >/dev/null || { echo "test.sh: cargo is not on PATH (install Rust first)" >&2; exit 1; }
command -v npm >/dev/null || { echo "test.sh: npm is not on PATH (install Node.js >= 18 first)" >&2; exit 1; }

if [ "$ONLY" = all ] || [ "$ONLY" = rust ]; then
  step "Rust: cargo test --workspace"
  cargo test --workspace
fi

if [ "$ONLY" = all ] || [ "$ONLY" = release ]; then
  step "release: platform packages, actionlint of .github/workflows"
  scripts/check-release.sh
fi

if [ "$ONLY" = all ] || [ "$ONLY" = host ]; then
  if [ -x scripts/build.sh ]; then
    step "package: build (napi addon, host plugin, client bundle) and typings check"
    scripts/build.sh --check
  fi
  step "real DSH host: node --test tests/host"
  scripts/test-host.sh
fi

if [ "$ONLY" = all ] || [ "$ONLY" = web ]; then
  if [ -x scripts/test-web.sh ]; then
    step "browser: dsh web + headless Chromium"
    scripts/test-web.sh
  fi
fi
