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
# The runner's own summary of a run's failing tests (spec reporter), from its log.
failing() { [ ! -f "$1" ] || sed -n '/^✖ failing tests:/,$p' "$1"; }
set +e
for contract in "${contracts[@]}"; do
  echo "test-host: the suite with the plugin on the $contract session contract" >&2
  DSH_REWIND_CONTRACT=$contract TMPDIR=$TEST_TMP "$NODE24" --test --test-reporter=spec "$@" "${files[@]}" \
    2>&1 | tee "$TEST_TMP/run-$contract.log"
  r=${PIPESTATUS[0]}
  if [ "$r" != 0 ] && [ "${REWIND_NO_RERUN:-0}" != 1 ]; then
    # The files of the failing tests run once more, whole. A test that passes then is still
    # named as flaky at the end of the output (and in $TEST_TMP/flaky.txt); one that fails
    # again, or a failure no test file is named for, fails the run.
    mapfile -t failed < <(failing "$TEST_TMP/run-$contract.log" \
      | sed -n 's/^test at \([^:]*\.test\.mjs\):.*/\1/p' | sort -u)
    if [ ${#failed[@]} -gt 0 ]; then
      echo "test-host: rerunning on the $contract session contract: ${failed[*]}" >&2
      DSH_REWIND_CONTRACT=$contract TMPDIR=$TEST_TMP "$NODE24" --test --test-reporter=spec "$@" "${failed[@]}" \
        2>&1 | tee "$TEST_TMP/rerun-$contract.log"
      if [ "${PIPESTATUS[0]}" = 0 ]; then
        r=0
        { echo "on the $contract session contract, failed once and passed when rerun:"
          failing "$TEST_TMP/run-$contract.log" | grep '^✖ ' | grep -v '^✖ failing tests:'
        } >> "$TEST_TMP/flaky.txt"
      fi
    fi
  fi
  [ "$r" = 0 ] || rc=$r
done
set -e
# A failure in the first run scrolls far out of view behind the second: repeat every run's
# failing tests (the runner's own summary) last, so the end of the output names them.
for contract in "${contracts[@]}"; do
  for log in "$TEST_TMP/run-$contract.log" "$TEST_TMP/rerun-$contract.log"; do
    summary=$(failing "$log")
    if [ -n "$summary" ]; then
      echo "test-host: failing on the $contract session contract ($(basename "$log" .log)):" >&2
      head -n 200 <<<"$summary" >&2
    fi
  done
done
if [ -s "$TEST_TMP/flaky.txt" ]; then
  echo "test-host: FLAKY — these tests failed once and passed when their files were rerun:" >&2
  cat "$TEST_TMP/flaky.txt" >&2
  cp "$TEST_TMP/flaky.txt" "$CARGO_TARGET_DIR/host-tests-flaky.txt" 2>/dev/null || true
fi
if [ "$rc" = 0 ] && [ "${REWIND_KEEP_TMP:-0}" != 1 ]; then
  rm -rf "$TEST_TMP"
else
  echo "test-host: the tests' temp dirs are kept in $TEST_TMP" >&2
fi
exit "$rc"
