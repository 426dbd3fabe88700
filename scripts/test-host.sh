#!/usr/bin/env bash
# Real-host tests: builds the planner CLI, installs Node 24 + the DSH 0.1.0-rc.8 packages
# (scripts/setup-node.sh), then runs every tests/host/*.test.mjs with Node 24's test runner.
# Extra arguments go to `node --test` (e.g. --test-name-pattern=steering).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR=$ROOT/$CARGO_TARGET_DIR ;; esac
echo "test-host: cargo build -p rewind-plan --example plan-cli" >&2
cargo build --quiet -p rewind-plan --example plan-cli
export PLAN_CLI="$CARGO_TARGET_DIR/debug/examples/plan-cli"
echo "test-host: cargo build -p dsh-rewind-cli" >&2
cargo build --quiet -p dsh-rewind-cli
export DSH_REWIND_CLI="$CARGO_TARGET_DIR/debug/dsh-rewind"

NODE24=$("$ROOT/scripts/setup-node.sh" | tail -n1)
echo "test-host: $("$NODE24" --version) --test tests/host/" >&2
cd "$ROOT/tests/host"
shopt -s nullglob
files=(*.test.mjs)
[ ${#files[@]} -gt 0 ] || { echo "test-host: no tests/host/*.test.mjs" >&2; exit 1; }
# Every temp dir the tests make (DSH homes, workspaces, stores) goes under one private TMPDIR,
# removed when the run passes (kept, and named, when it fails; REWIND_KEEP_TMP=1 keeps it always).
TEST_TMP=$(mktemp -d -t rewind-host-tests-XXXXXX)
# Twice: on the plain rc.8 spine, then with the plugin behind the newer-contract shim
# (lib/newer-contract.mjs: the session contract of DSH 0.1.2+ at format 3 over the rc.8 objects;
# a test double, not a real newer host). DSH_REWIND_CONTRACT=rc.8|newer runs one of them only.
contracts=(${DSH_REWIND_CONTRACT:-rc.8 newer})
rc=0
set +e
for contract in "${contracts[@]}"; do
  echo "test-host: the suite with the plugin on the $contract session contract" >&2
  DSH_REWIND_CONTRACT=$contract TMPDIR=$TEST_TMP "$NODE24" --test --test-reporter=spec "$@" "${files[@]}" \
    2>&1 | tee "$TEST_TMP/run-$contract.log"
  r=${PIPESTATUS[0]}
  [ "$r" = 0 ] || rc=$r
done
set -e
# A failure in the first run scrolls far out of view behind the second: repeat every run's
# failing tests (the runner's own summary) last, so the end of the output names them.
for contract in "${contracts[@]}"; do
  log="$TEST_TMP/run-$contract.log"
  if grep -q '^✖ failing tests:' "$log" 2>/dev/null; then
    echo "test-host: failing on the $contract session contract:" >&2
    sed -n '/^✖ failing tests:/,$p' "$log" | head -n 200 >&2
  fi
done
if [ "$rc" = 0 ] && [ "${REWIND_KEEP_TMP:-0}" != 1 ]; then
  rm -rf "$TEST_TMP"
else
  echo "test-host: the tests' temp dirs are kept in $TEST_TMP" >&2
fi
exit "$rc"
