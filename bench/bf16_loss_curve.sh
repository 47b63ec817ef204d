#!/usr/bin/env bash
# bf16 mixed precision against fp32: the same 500-step character-level TinyShakespeare run
# (nanoGPT's small CPU shape) in both precisions; prints the loss curves' largest relative
# gap (over 50-step means of the training loss) and the final validation losses.
# Usage: bench/bf16_loss_curve.sh [path/to/tinyshakespeare.txt]  (default ../shared/data/...)
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT=${1:-../shared/data/tinyshakespeare.txt}
WORK=${GATEDLM_WORK:-.cache/bf16-curve}
BIN=build/gatedlm
rm -rf "$WORK" && mkdir -p "$WORK"
"$BIN" data prepare --tokenizer byte --input "$TEXT" --out "$WORK/data" >/dev/null
for p in fp32 bf16; do
  "$BIN" train --config configs/shakespeare-char.json --data "$WORK/data" --out "$WORK/$p" --steps 500 \
    --batch-size 12 --seq-len 64 --lr 1e-3 --min-lr 1e-4 --warmup 100 --beta2 0.99 --clip 1.0 \
    --eval-every 0 --eval-tokens 0 --precision "$p" 2>&1 | tail -1
done
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
def curve(p):
    rows = [json.loads(l) for l in open(f"{work}/{p}/metrics.jsonl")]
    loss = [r["loss"] for r in rows if "loss" in r]
    return [sum(loss[i:i + 50]) / 50 for i in range(0, len(loss), 50)], json.load(open(f"{work}/{p}/summary.json"))
a, sa = curve("fp32")
b, sb = curve("bf16")
gap = max(abs(x - y) / x for x, y in zip(a, b))
print("50-step mean training loss, fp32:", " ".join(f"{x:.3f}" for x in a))
print("50-step mean training loss, bf16:", " ".join(f"{x:.3f}" for x in b))
print(f"largest relative gap {gap * 100:.2f} %; final val loss fp32 {sa['val_loss']:.4f}, bf16 {sb['val_loss']:.4f} "
      f"({(sb['val_loss'] / sa['val_loss'] - 1) * 100:+.2f} %); tokens/s fp32 {sa['tokens_per_s']:.0f}, bf16 {sb['tokens_per_s']:.0f}")
PY
