#!/usr/bin/env bash
# The main job until the full demo lands: build gatedlm, show its commands, make a
# freshly initialised G1-gated model and score a sentence with it (a fresh model scores
# about ln(vocab) = 5.55 nats per byte token).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BIN=build/gatedlm
WORK=${GATEDLM_WORK:-.cache/quickstart}
mkdir -p "$WORK"
"$BIN" --help
"$BIN" params --config configs/shakespeare-char-gated.json
"$BIN" init --config configs/shakespeare-char-gated.json --out "$WORK/fresh" --force
"$BIN" tokenizer encode --tokenizer byte --bos-eos --text "To be, or not to be, that is the question." > "$WORK/ids.txt"
"$BIN" score --checkpoint "$WORK/fresh" --token-ids "$WORK/ids.txt"
