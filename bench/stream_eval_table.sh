#!/usr/bin/env bash
# The streaming-window table of issue 13 (bench/RESULTS.md): perplexity of the demo's
# baseline and G1-gated models through a rolling KV cache of the last W tokens plus
# 0, 1 or 4 sink tokens (StreamingLLM), and through the full cache, over a text many
# times longer than the training length. A model that relies on attention sinks blows up
# at 0 sinks; the paper says a gated one should not.
#
# Usage: bench/stream_eval_table.sh DEMO_DIR TEXT_FILE [WINDOW] [TOKENS]
#   DEMO_DIR   the output of `gatedlm demo` (runs/baseline, runs/gated-sdpa, tokenizer.model)
#   TEXT_FILE  held-out text (e.g. the demo's Moby-Dick from its npm cache)
#   WINDOW     recent tokens kept (default: half the models' max_seq_len)
#   TOKENS     predictions scored (default: 8 x max_seq_len)
# Env: GATEDLM (default build/gatedlm), TOKENIZER (when the runs record none), OMP_NUM_THREADS.
# Prints a markdown table and saves each model's result as DEMO_DIR/runs/RUN/stream_eval.json,
# which `gatedlm report DEMO_DIR/runs/*` shows in its "Streaming windows" section.
set -euo pipefail
demo=${1:?usage: $0 DEMO_DIR TEXT_FILE [WINDOW] [TOKENS]}
text=${2:?usage: $0 DEMO_DIR TEXT_FILE [WINDOW] [TOKENS]}
bin=${GATEDLM:-$(dirname "$0")/../build/gatedlm}
max_len=$(/usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['max_seq_len'])" \
  "$demo/runs/baseline/config.json")
window=${3:-$((max_len / 2))}
tokens=${4:-$((8 * max_len))}
echo "| model | full cache ppl | window $window, 0 sinks | 1 sink | 4 sinks |"
echo "| --- | ---: | ---: | ---: | ---: |"
for run in baseline gated-sdpa; do
  [[ -d "$demo/runs/$run" ]] || { echo "missing $demo/runs/$run" >&2; exit 1; }
  json=$("$bin" stream-eval --checkpoint "$demo/runs/$run" ${TOKENIZER:+--tokenizer "$TOKENIZER"} --text "$text" \
    --window "$window" --sinks 0,1,4 \
    --tokens "$tokens" --json)
  printf '%s\n' "$json" > "$demo/runs/$run/stream_eval.json"  # `gatedlm report` shows it
  /usr/bin/python3 - "$run" "$json" <<'PY'
import json, sys
run, j = sys.argv[1], json.loads(sys.argv[2])
by = {(r["cache"], r["sinks"]): r for r in j["results"]}
cell = lambda r: f"{r['ppl']:.2f} ({r['ppl_after_fill']:.2f} after fill)" if r["ppl_after_fill"] else f"{r['ppl']:.2f}"
print(f"| {run} | {by[('full', 0)]['ppl']:.2f} | {cell(by[('window', 0)])} | {cell(by[('window', 1)])} | "
      f"{cell(by[('window', 4)])} |")
PY
done
echo
echo "$tokens tokens of $text (training length $max_len); \`$bin stream-eval --window $window --sinks 0,1,4 --tokens $tokens\`"
