#!/bin/sh
# gatedlm at the paper's 1.7B dense shape: import a random BF16 checkpoint in the paper's
# layout (bench/make_random_hf.py), then score one 256-token sequence and analyze 16
# windows of 256 tokens, each under /usr/bin/time -v (wall time, peak RSS).
# HF_ARCH=qwen3_5: the same (and a 32-token generate) for a random Qwen3.5-2B-shaped BF16
# checkpoint in the released multimodal layout (make_random_hf.py --arch qwen3_5 --shape 2b;
# ~3.8 GB of weights, ~7.5 GB as a gatedlm checkpoint).
# Usage: bench/hf_scale.sh [WORK_DIR]   (needs ~13 GB of disk; build/gatedlm built)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${GATEDLM_BIN:-$ROOT/build/gatedlm}
WORK=${1:-/tmp/gatedlm_hf_scale}
TEXT=${GATEDLM_BENCH_TEXT:-$ROOT/../shared/data/tinyshakespeare.txt}
[ -f "$TEXT" ] || TEXT=$ROOT/../../shared/data/tinyshakespeare.txt  # from a worktree
[ -f "$TEXT" ] || { echo "hf_scale: no text at $TEXT (set GATEDLM_BENCH_TEXT)" >&2; exit 1; }
mkdir -p "$WORK"
ARCH=${HF_ARCH:-paper}  # HF_SHAPE=tiny: a few-MB qwen3_5 smoke of this script
[ -d "$WORK/hf" ] || /usr/bin/python3 "$ROOT/bench/make_random_hf.py" "$WORK/hf" --arch "$ARCH" --shape "${HF_SHAPE:-2b}"
VOCAB=$(/usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("text_config", c)["vocab_size"])' "$WORK/hf/config.json")
rm -rf "$WORK/data"
measure() {  # label, command...
  label=$1; shift
  /usr/bin/time -v "$@" 2> "$WORK/$label.time" > "$WORK/$label.out" || { cat "$WORK/$label.time"; exit 1; }
  wall=$(grep "Elapsed (wall clock)" "$WORK/$label.time" | awk '{print $NF}')
  rss=$(grep "Maximum resident set size" "$WORK/$label.time" | awk '{print $NF}')
  echo "$label: wall $wall, peak RSS $(awk "BEGIN {printf \"%.2f\", $rss / 1048576}") GiB"
}
if [ "${SKIP_IMPORT:-0}" != 1 ]; then
  rm -rf "$WORK/ckpt"
  measure import "$BIN" import "$WORK/hf" --out "$WORK/ckpt"
fi
"$BIN" data prepare --tokenizer byte --input "$TEXT" --out "$WORK/data" > "$WORK/data.log" 2>&1 ||
  { cat "$WORK/data.log"; exit 1; }
awk 'BEGIN { srand(1); for (i = 0; i < 256; ++i) printf "%d ", int(rand() * '"$VOCAB"'); print "" }' > "$WORK/ids.txt"
measure score "$BIN" score --checkpoint "$WORK/ckpt" --token-ids "$WORK/ids.txt" --json
measure analyze "$BIN" analyze --checkpoint "$WORK/ckpt" --data "$WORK/data" --sequences 16 --seq-len 256 \
  --out "$WORK/analysis.json" --quiet
if [ "$ARCH" = qwen3_5 ]; then
  measure generate "$BIN" generate --checkpoint "$WORK/ckpt" --tokenizer byte --prompt "The quick brown fox" \
    --max-tokens 32 --json
fi
du -sh "$WORK/hf" "$WORK/ckpt"
