#!/bin/bash
# Regenerates the reference traces listed in traces.tsv from the reference
# implementation (MinAtar v1.0.15, not part of this repository).
#
#   rl/minatar/testdata/make_traces.sh /path/to/folder/holding/minatar
#
# PYTHON (default python3) must have NumPy. Output is gzip'd without a name
# or time stamp, so the same reference gives the same bytes.
set -euo pipefail
minatar_path="${1:?usage: make_traces.sh MINATAR_PATH}"
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
grep -v '^#' "$here/traces.tsv" |
  while IFS=$'\t' read -r file env seed sticky steps policy_seed epsilon; do
    "$python" "$here/reference_trace.py" --minatar_path="$minatar_path" --env="$env" \
      --seed="$seed" --sticky_action_prob="$sticky" --steps="$steps" \
      --policy_seed="$policy_seed" --epsilon="$epsilon" --continue_after_terminal |
      gzip -9n >"$here/$file"
    echo "$file: $(gzip -dc "$here/$file" | wc -l) lines"
  done
