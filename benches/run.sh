#!/usr/bin/env bash
# Runs every benchmark (each measures its raw baseline in the same run) and
# gathers the results into docs/benchmarks.md.
#   benches/run.sh              all
#   benches/run.sh rewind-plan  one crate's benches
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT="$ROOT/target/bench-results"
mkdir -p "$OUT"
crates=("$@")
if [ ${#crates[@]} -eq 0 ]; then
  for dir in crates/*/; do
    [ -d "$dir/benches" ] && crates+=("$(basename "$dir")")
  done
fi
for c in "${crates[@]}"; do
  pkg=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "crates/$c/Cargo.toml" | head -n1)
  echo "benches/run.sh: cargo bench -p $pkg" >&2
  cargo bench --quiet -p "$pkg"
done
# Benchmarks of the plugin inside the real host (node scripts), when present.
shopt -s nullglob
for script in benches/*.mjs; do
  NODE24=$(scripts/setup-node.sh | tail -n1)
  echo "benches/run.sh: $script" >&2
  "$NODE24" "$script"
done
{
  echo "# Benchmarks"
  echo
  echo "Written by \`benches/run.sh\`. Every figure is the median of several runs, and every"
  echo "ratio compares it with a raw baseline measured in the same run, alternating the two so"
  echo "that the machine's drift hits both alike. Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr);"
  echo "rustc $(rustc --version | cut -d' ' -f2); run on $(date -u +%Y-%m-%d)."
  echo
  for f in "$OUT"/*.md; do
    cat "$f"
    echo
  done
} > docs/benchmarks.md
echo "benches/run.sh: wrote docs/benchmarks.md" >&2
