#!/usr/bin/env bash
# A miniature of the paper's Table 5 (issue 7): does SDPA output gating help context
# extension? Trains a baseline and a G1 (SDPA, elementwise sigmoid) model at sequence 256 on
# text mixed with synthetic retrieval examples (`gatedlm data synth`), then evaluates both
# with `gatedlm longctx` at 256, 512, 1024 and 2048 tokens:
#   1. as trained (RoPE base 1e4, no scaling),
#   2. with YaRN, factor = length / 256 (per length),
#   3. after a short continued training at 512 with a raised RoPE base (train --init-from),
#   4. the continued model with YaRN, factor = length / 512,
# prints Table 5-style tables and appends them, with the exact command, to bench/RESULTS.md
# under "Context extension (issue 7)".
#
# Usage: bench/longctx_table5.sh [--gatedlm PATH] [--work DIR] [--text FILE]
#            [--steps N] [--cont-steps N] [--samples N] [--cont-base B] [--threads N] [--no-results]
# Defaults take about 30 minutes on 2 shared cores (see bench/RESULTS.md for measured times).
set -euo pipefail
cd "$(dirname "$0")/.."
COMMAND="bench/longctx_table5.sh $*"

G=build/gatedlm
WORK=runs/longctx_table5
TEXT=/work/shared/data/tinyshakespeare.txt
STEPS=400          # training steps at 256 (batch 16: 4096 tokens a step)
CONT_STEPS=100     # continued training steps at 512 (batch 8)
SAMPLES=12         # longctx examples per task and length
CONT_BASE=100000   # the raised RoPE base of the continued training
THREADS=${OMP_NUM_THREADS:-2}
RESULTS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gatedlm) G=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --text) TEXT=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --cont-steps) CONT_STEPS=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --cont-base) CONT_BASE=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --no-results) RESULTS=0; shift ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=$THREADS
[[ -x $G ]] || { echo "no gatedlm binary at $G (build it, or pass --gatedlm PATH)" >&2; exit 1; }
[[ -f $TEXT ]] || { echo "no text at $TEXT (pass --text FILE)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed for the tables" >&2; exit 1; }
mkdir -p "$WORK"
START=$(date +%s)
LENGTHS=256,512,1024,2048
log() { echo "[$(( $(date +%s) - START ))s] $*"; }

# --- tokenizer: BPE on the text plus the task templates (so their words are tokens) -----
if [[ ! -f $WORK/tok.model ]]; then
  T=$WORK/templates.txt
  : > "$T"
  for i in $(seq 300); do
    cat >> "$T" <<'EOF'
The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.
There is a pass key hidden in this text. Remember it.
The pass key is 12345. Remember it. 12345 is the pass key.
What is the pass key? The pass key is 31415
Some special magic numbers are hidden in this text. Remember them.
One of the special magic numbers for calm-lantern is: 1234567.
What is the special magic number for calm-lantern? The special magic number for calm-lantern is 7654321
What are all the special magic numbers for calm-lantern? The special magic numbers for calm-lantern are 1, 2, 3
EOF
  done
  "$G" tokenizer train --input "$TEXT" "$T" --vocab-size 1024 --out "$WORK/tok.model"
fi

# --- data: text mixed with passkey + needle examples (half the training tokens) ---------
for L in 256 512; do
  [[ -f $WORK/data$L/manifest.json ]] ||
    "$G" data synth --task all --tokenizer "$WORK/tok.model" --out "$WORK/data$L" --seq-len $L \
      --mix-text "$TEXT" --ratio 0.5 --seed $((7 + L))
done

# --- models ------------------------------------------------------------------------------
SHAPE='"vocab_size": 1024, "d_model": 128, "n_layers": 2, "n_heads": 4, "n_kv_heads": 4, "head_dim": 32, "ffn_hidden": 352'
echo "{$SHAPE, \"max_seq_len\": 256}" > "$WORK/baseline.json"
echo "{$SHAPE, \"max_seq_len\": 256, \"gate\": {\"position\": \"sdpa\"}}" > "$WORK/gated.json"
echo "{$SHAPE, \"max_seq_len\": 512, \"rope_base\": $CONT_BASE}" > "$WORK/baseline_cont.json"
echo "{$SHAPE, \"max_seq_len\": 512, \"rope_base\": $CONT_BASE, \"gate\": {\"position\": \"sdpa\"}}" > "$WORK/gated_cont.json"

for M in baseline gated; do
  if [[ ! -f $WORK/$M/summary.json ]]; then
    rm -rf "$WORK/$M"
    log "training $M at 256 for $STEPS steps"
    "$G" train --config "$WORK/$M.json" --data "$WORK/data256" --out "$WORK/$M" --batch-size 16 --seq-len 256 \
      --steps "$STEPS" --lr 2e-3 --min-lr 2e-4 --warmup 40 --eval-every 0 --eval-tokens 16384 --save-every 0 \
      --seed 1234 2>&1 | grep -v '^train \[' || true
  fi
  if [[ ! -f $WORK/${M}_cont/summary.json ]]; then
    rm -rf "$WORK/${M}_cont"
    log "continued training of $M at 512 with RoPE base $CONT_BASE for $CONT_STEPS steps"
    "$G" train --init-from "$WORK/$M" --config "$WORK/${M}_cont.json" --data "$WORK/data512" --out "$WORK/${M}_cont" \
      --batch-size 8 --seq-len 512 --steps "$CONT_STEPS" --lr 1e-3 --min-lr 1e-4 --warmup 10 --eval-every 0 \
      --eval-tokens 16384 --save-every 0 --seed 99 2>&1 | grep -v '^train \[' || true
  fi
done

# --- evaluation ----------------------------------------------------------------------------
EVAL=(--data "$WORK/data256" --lengths $LENGTHS --samples "$SAMPLES" --depths 4 --ppl-windows 8 --seed 1)
for M in baseline gated; do
  for V in none yarn; do
    ck=$WORK/$M
    [[ $V == yarn ]] && extra=(--rope-scaling yarn) || extra=()
    if [[ ! -f $WORK/eval_${M}_$V.json ]]; then
      log "longctx $M $V"
      "$G" longctx --checkpoint "$ck" "${EVAL[@]}" "${extra[@]}" --out "$WORK/eval_${M}_$V.json" >/dev/null
    fi
    if [[ ! -f $WORK/eval_${M}_cont_$V.json ]]; then
      log "longctx ${M}_cont $V"
      "$G" longctx --checkpoint "$WORK/${M}_cont" "${EVAL[@]}" "${extra[@]}" --train-len 512 \
        --out "$WORK/eval_${M}_cont_$V.json" >/dev/null
    fi
  done
done
ELAPSED=$(( $(date +%s) - START ))

# --- tables ----------------------------------------------------------------------------------
TABLE=$(python3 - "$WORK" "$CONT_BASE" <<'EOF'
import json, math, sys
work, base = sys.argv[1], sys.argv[2]
def load(name):
    with open(f"{work}/eval_{name}.json") as f:
        return {L["length"]: L for L in json.load(f)["lengths"]}
def retrieval(L):
    ts = [t for t in L["tasks"].values() if "score" in t]
    return 100 * sum(t["score"] for t in ts) / len(ts) if ts else None, len(ts) < len(L["tasks"])
def passkey(L):
    t = L["tasks"].get("passkey", {})
    return 100 * t["digit_accuracy"] if "digit_accuracy" in t else None
def ppl(L):
    return L.get("perplexity", {}).get("ppl")
def ppl_beyond(L):
    v = L.get("perplexity", {}).get("loss_beyond_train_len")
    return math.exp(v) if v is not None else None
rows = [("Baseline", "baseline_none"), ("SDPA-Gate", "gated_none"),
        ("YaRN (factor len/256)", None), ("Baseline", "baseline_yarn"), ("SDPA-Gate", "gated_yarn"),
        (f"Base {base} + 512 training", None), ("Baseline", "baseline_cont_none"), ("SDPA-Gate", "gated_cont_none"),
        ("  + YaRN (factor len/512)", None), ("Baseline", "baseline_cont_yarn"), ("SDPA-Gate", "gated_cont_yarn")]
ref = {"baseline_yarn": "baseline_none", "gated_yarn": "gated_none",
       "baseline_cont_yarn": "baseline_cont_none", "gated_cont_yarn": "gated_cont_none"}
lengths = [256, 512, 1024, 2048]
out = []
for title, metric, fmt in [("Retrieval score, % (mean over passkey and the three NIAH tasks of the share of values "
                             "recovered, teacher-forced; * = some tasks too long for this length)", retrieval, "{:.1f}"),
                            ("Passkey digit accuracy, % (teacher-forced)", passkey, "{:.1f}"),
                            ("Held-out perplexity (whole window)", ppl, "{:.2f}"),
                            ("Held-out perplexity of the positions past the training length (256; 512 for the "
                             "continued models)", ppl_beyond, "{:.2f}")]:
    out.append(title)
    out.append("")
    out.append("| Method | " + " | ".join(str(L) for L in lengths) + " |")
    out.append("| --- |" + " --- |" * len(lengths))
    for label, name in rows:
        if name is None:
            out.append(f"| *{label}* |" + " |" * len(lengths))
            continue
        data = load(name)
        base_data = load(ref[name]) if name in ref else None
        cells = []
        for L in lengths:
            v = metric(data[L])
            star = ""
            if isinstance(v, tuple):
                v, partial = v
                star = "*" if partial else ""
            if v is None:
                cells.append("-")
                continue
            cell = fmt.format(v) + star
            if base_data is not None:
                b = metric(base_data[L])
                b = b[0] if isinstance(b, tuple) else b
                if b is not None:
                    cell += f" ({v - b:+.2f})" if metric in (ppl, ppl_beyond) else f" ({v - b:+.1f})"
            cells.append(cell)
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
print("\n".join(out))
EOF
)
echo
echo "$TABLE"
echo "elapsed ${ELAPSED}s"

if [[ $RESULTS == 1 ]]; then
  {
    echo
    echo "## Context extension (issue 7)"
    echo
    echo "\`$COMMAND\` ($(date -u +%Y-%m-%d), $(nproc) cores, OMP_NUM_THREADS=$THREADS, ${ELAPSED} s in all;"
    echo "gatedlm $("$G" --version 2>/dev/null | tail -1), git $(git rev-parse --short HEAD 2>/dev/null || echo '?'))."
    echo
    echo "Two 2-layer models (d_model 128, 4 heads of 32, RoPE base 1e4, vocabulary 1024 BPE), baseline and"
    echo "SDPA-gated (G1 elementwise sigmoid), $STEPS steps of 16 x 256 tokens on $(basename "$TEXT") mixed 1:1"
    echo "with \`data synth --task all\` examples; continued: $CONT_STEPS steps of 8 x 512 at RoPE base $CONT_BASE."
    echo "Evaluation: \`gatedlm longctx\` on the held-out text with $SAMPLES examples per task and length,"
    echo "neutral filler; (+/-x) = change from the same model without YaRN."
    echo
    echo "$TABLE"
  } >> bench/RESULTS.md
  log "appended to bench/RESULTS.md"
fi
