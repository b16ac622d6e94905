#!/usr/bin/env bash
# Issue 64's speed goal, side by side on one machine: two release builds, each with its own
# templates and heads, alternated ROUNDS times. Per build and round: `aegis bench --fast-only
# --runs 20` (verdict latency by message length) and `aegis check --file` on the first 500 texts of
# benign-real-holdout.jsonl, each tagged with its round and build so no feature cache has read
# them (wall time, model load included).
#
#   scripts/research/speed-side-by-side.sh OUT BEFORE_AEGIS BEFORE_PROMPTS AFTER_AEGIS AFTER_PROMPTS [ROUNDS]
#
# e.g. a worktree of the baseline built with `cargo build --release -p aegis-cli` into its own
# target folder, against target/release/aegis and prompt_guard. Writes OUT/summary.txt; name the
# CPU (OUT/cpu.txt) beside every figure.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1
declare -A aegis=([before]=$2 [after]=$4)
declare -A prompts=([before]=$3 [after]=$5)
rounds=${6:-3}
mkdir -p "$out"
lscpu | grep "Model name" >"$out/cpu.txt" || true
: >"$out/summary.txt"
for round in $(seq "$rounds"); do
  for build in before after; do
    tag="$round-$build"
    "${aegis[$build]}" bench --fast-only --runs 20 --prompts "${prompts[$build]}" \
      --json "$out/bench-$tag.json" >"$out/bench-$tag.txt" 2>&1
    python3 - "$tag" >"$out/texts-$tag.jsonl" <<'PY'
import json
import sys

tag = sys.argv[1]
with open("prompt_guard/heads/benign-real-holdout.jsonl", encoding="utf-8") as rows:
    for i, line in enumerate(rows):
        if i == 500:
            break
        row = json.loads(line)
        print(json.dumps({"id": row["id"], "text": f"[{tag}] {row['text']}"}))
PY
    start=$(date +%s.%N)
    # Exit status 1 says some message failed a validator; 2 is an error.
    status=0
    "${aegis[$build]}" check --file "$out/texts-$tag.jsonl" --json --no-history \
      --prompts "${prompts[$build]}" >"$out/check-$tag.json" 2>"$out/check-$tag.err" || status=$?
    if [ "$status" -gt 1 ]; then
      echo "speed-side-by-side: check failed, see $out/check-$tag.err" >&2
      exit 1
    fi
    end=$(date +%s.%N)
    # The latency table's rows (the first three rows named by length) and check's own count.
    latency=$(awk -F'|' '/^\| (short|medium|long) / && n++ < 3 {
      gsub(/ /, "", $2); gsub(/^ +| +$/, "", $6); printf "%s p50/p95 %s ms; ", $2, $6 }' \
      "$out/bench-$tag.txt")
    printf '%s %s: %scheck --file 500 texts %.2f s wall (%s)\n' "$round" "$build" "$latency" \
      "$(python3 -c "print($end - $start)")" "$(tail -1 "$out/check-$tag.err")" |
      tee -a "$out/summary.txt"
  done
done
