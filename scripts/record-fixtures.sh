#!/usr/bin/env bash
# Re-records the real DSH session logs in tests/fixtures/ (see tests/host/record-fixtures.mjs).
# Usage: scripts/record-fixtures.sh [name...]   (no names: every session)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE24=$("$ROOT/scripts/setup-node.sh" | tail -n1)
exec "$NODE24" "$ROOT/tests/host/record-fixtures.mjs" "$ROOT/tests/fixtures" "$@"
