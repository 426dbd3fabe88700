#!/usr/bin/env bash
# The main job: a real demo, no configuration needed.
#
# With the plugin package present, it builds the plugin, boots the real DSH
# host (0.1.0-rc.8, Node 24) with it and a scripted model in a temporary
# workspace, runs a short coding session, rewinds it, and undoes the rewind's
# file changes, printing the transcript and the files at each step.
# Without it, it shows the planner on a session recorded from the real host.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

if [ -f tests/host/demo.mjs ] && [ -x scripts/build.sh ]; then
  scripts/build.sh >&2
  NODE24=$(scripts/setup-node.sh | tail -n1)
  exec "$NODE24" tests/host/demo.mjs "$@"
fi

cargo build --quiet -p rewind-plan --example plan-cli
CLI="$CARGO_TARGET_DIR/debug/examples/plan-cli"
LOG=${1:-tests/fixtures/edits.jsonl}
echo "Session log: $LOG (recorded from the real DSH host)"
echo
echo "Messages a rewind can target (1 = newest):"
"$CLI" candidates "$LOG" | python3 -c '
import json, sys
for c in json.load(sys.stdin)["candidates"]:
    note = "  (unread steering)" if c["pending"] else ""
    print("  %2d. @%-4d %s%s" % (c["index"], c["seq"], c["preview"], note))'
echo
TARGET=${2:-2}
echo "Plan for /rewind $TARGET:"
"$CLI" plan "$LOG" "$TARGET" | python3 -m json.tool
