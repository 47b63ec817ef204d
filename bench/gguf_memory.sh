#!/bin/sh
# What a Q4_K_M GGUF file costs in memory when gatedlm runs it on its blocks, at Qwen3.5-2B's
# shape (bench/make_random_hf.py --arch qwen3_5 --shape 2b: 1.88 B parameters, a 248320-token
# vocabulary, tied embeddings): the random checkpoint is imported, exported as Q4_K_M by
# gatedlm (the types llama-quantize picks, byte for byte its blocks), then, each under
# /usr/bin/time -v (peak RSS):
#   - gatedlm score of 64 token ids straight from the file (--checkpoint FILE.gguf);
#   - gatedlm import of the file (keeping its types) and score from that checkpoint;
#   - llama.cpp (tests/llama/llama_probe, npm's libllama) evaluating 8 tokens of the same file.
# Usage: bench/gguf_memory.sh [WORK_DIR [SHAPE]]   (build/ with gatedlm and llama_probe)
#   SHAPE: 2b (the default; ~20 GB of disk) or 4b (Qwen3.5-4B's shape, 32 value heads to 16 key
#   heads, so ssm_out's columns are tiled in the file; ~35 GB of disk and 18 GB of memory for
#   the F32 checkpoint it is exported from).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${GATEDLM_BIN:-$ROOT/build/gatedlm}
PROBE=${GATEDLM_PROBE:-$ROOT/build/tests/llama_probe}
LIBDIR=${GATEDLM_LLAMA_LIBS:-$HOME/.cache/gatedlm/llama/package/bins/linux-x64}
WORK=${1:-/tmp/gatedlm_gguf_memory}
SHAPE=${2:-2b}
mkdir -p "$WORK"
measure() {  # label, command...
  label=$1; shift
  /usr/bin/time -v "$@" 2> "$WORK/$label.time" > "$WORK/$label.out" || { tail -20 "$WORK/$label.time"; exit 1; }
  wall=$(grep "Elapsed (wall clock)" "$WORK/$label.time" | awk '{print $NF}')
  rss=$(grep "Maximum resident set size" "$WORK/$label.time" | awk '{print $NF}')
  echo "$label: wall $wall, peak RSS $(awk "BEGIN {printf \"%.2f\", $rss / 1048576}") GiB"
}
[ -d "$WORK/hf" ] || /usr/bin/python3 "$ROOT/bench/make_random_hf.py" --arch qwen3_5 --shape "$SHAPE" --out "$WORK/hf"
if [ ! -d "$WORK/ckpt" ]; then
  "$BIN" import "$WORK/hf" --out "$WORK/ckpt" > "$WORK/import_hf.log" 2>&1 || { tail "$WORK/import_hf.log"; exit 1; }
  # A byte-level vocabulary of the model's size, so that the GGUF file has one (llama.cpp needs it).
  /usr/bin/python3 - "$WORK/ckpt/tokenizer.json" "$ROOT/tests/reference" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[2])
from test_gguf_llama import byte_level_tokenizer
with open(sys.argv[1], "w") as f:
    json.dump(byte_level_tokenizer(248320), f)
EOF
fi
[ -f "$WORK/gguf/model.gguf" ] || measure export "$BIN" export "$WORK/ckpt" --format gguf --dtype q4_k_m --out "$WORK/gguf"
FILE=$WORK/gguf/model.gguf
echo "file: $(du -h "$FILE" | cut -f1) ($(stat -c %s "$FILE") bytes)"
awk 'BEGIN { srand(1); for (i = 0; i < 64; ++i) printf "%d ", int(rand() * 248000); print "" }' > "$WORK/ids.txt"
measure gatedlm_file "$BIN" score --checkpoint "$FILE" --token-ids "$WORK/ids.txt" --json
rm -rf "$WORK/imported"
measure gatedlm_import "$BIN" import "$FILE" --out "$WORK/imported"
measure gatedlm_imported "$BIN" score --checkpoint "$WORK/imported" --token-ids "$WORK/ids.txt" --json
measure llama_cpp "$PROBE" "$LIBDIR" "$FILE" 0 1 2 3 4 5 6 7 8
grep -h "mean_loss" "$WORK/gatedlm_file.out" "$WORK/gatedlm_imported.out" | cut -c1-120
