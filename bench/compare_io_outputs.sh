#!/usr/bin/env bash
# Byte-identity of import and export between two gatedlm binaries (e.g. before and after a
# refactor of src/io/): random checkpoints of every model family are exported with both, in
# every --format that takes them and every GGUF architecture and dtype, and the files
# compared with cmp; the exports are imported back with both and the checkpoints compared.
# Usage: bench/compare_io_outputs.sh OLD_BINARY NEW_BINARY [WORK_DIR]
set -euo pipefail
old=$1 new=$2 work=${3:-$(mktemp -d)}
mkdir -p "$work"
fails=0 compared=0

same() {  # same FILE_A FILE_B: counts and reports a difference
  compared=$((compared + 1))
  if ! cmp -s "$1" "$2"; then echo "DIFFERENT: $1 $2"; fails=$((fails + 1)); fi
}

# Runs the command with each binary (BIN replaced), outputs under $work/{old,new}/NAME;
# both must succeed or both refuse with the same message.
both() {
  local name=$1; shift
  local out_old="$work/old/$name" out_new="$work/new/$name" rc_old=0 rc_new=0
  mkdir -p "$(dirname "$out_old")" "$(dirname "$out_new")"
  "$old" "${@//OUT/$out_old}" >"$out_old.log" 2>&1 || rc_old=$?
  "$new" "${@//OUT/$out_new}" >"$out_new.log" 2>&1 || rc_new=$?
  if [[ $rc_old != "$rc_new" ]]; then echo "EXIT $rc_old vs $rc_new: $name"; fails=$((fails + 1)); return; fi
  if [[ $rc_old != 0 ]]; then return; fi
  local file
  for file in "$out_old"/*; do same "$file" "$out_new/$(basename "$file")"; done
}

base='"vocab_size": 258, "d_model": 32, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8,
      "max_seq_len": 64, "norm_eps": 1e-6, "rope_base": 500000.0'
hybrid='"gate": {"position": "sdpa", "granularity": "elementwise"}, "rope_dims": 4, "norm_zero_centered": true,
        "full_attention_interval": 2, "linear_attention": {"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 8, "v_head_dim": 8}'
dense='"ffn_hidden": 48'
moe='"moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 16, "norm_topk_prob": true'
declare -A models=(
  [dense]="{$base, $dense}"
  [dense_bias]="{$base, $dense, \"attn_qkv_bias\": true, \"attn_o_bias\": true, \"tie_embeddings\": true}"
  [headwise]="{$base, $dense, \"gate\": {\"position\": \"sdpa\", \"granularity\": \"headwise\"}}"
  [elementwise_yarn]="{$base, $dense, \"gate\": {\"position\": \"sdpa\"}, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, \"original_max_seq_len\": 16}}"
  [moe]="{$base, $dense, $moe, \"every\": 2}}"
  [moe_every]="{$base, $dense, $moe}}"
  [hybrid]="{$base, $dense, $hybrid}"
  [hybrid_moe]="{$base, $hybrid, \"ffn_hidden\": 0, $moe, \"n_shared\": 1, \"shared_hidden\": 24}}"
  [hybrid_moe_noshared]="{$base, $hybrid, \"ffn_hidden\": 0, $moe}}"
)
formats="paper qwen3 qwen3_next qwen3_5 qwen3_5_moe"
for m in "${!models[@]}"; do
  echo "${models[$m]}" >"$work/$m.json"
  "$old" init --config "$work/$m.json" --out "$work/ck_$m" --seed 7 >"$work/init_$m.log" 2>&1 ||
    { echo "init $m failed:"; cat "$work/init_$m.log"; exit 1; }
  for f in $formats; do
    for dt in f32 bf16; do both "hf_${m}_${f}_$dt" export "$work/ck_$m" --format "$f" --dtype "$dt" --out OUT; done
    if [[ -f "$work/old/hf_${m}_${f}_f32/config.json" ]]; then
      both "import_auto_${m}_$f" import "$work/old/hf_${m}_${f}_f32" --out OUT
      both "import_${m}_as_$f" import "$work/old/hf_${m}_${f}_f32" --format "$f" --out OUT
    fi
  done
  for arch in auto qwen3 qwen3moe qwen35 qwen35moe qwen3next; do
    for dt in f32 q8_0; do both "gguf_${m}_${arch}_$dt" export "$work/ck_$m" --format gguf --gguf-arch "$arch" --dtype "$dt" --out OUT; done
    if [[ -f "$work/old/gguf_${m}_${arch}_f32/model.gguf" ]]; then
      both "ggufimport_${m}_$arch" import "$work/old/gguf_${m}_${arch}_f32/model.gguf" --out OUT
    fi
  done
done
# The messages (refusals, import's summary line), paths aside: listed, not counted (wording
# may change where no test greps it; read these).
unpath() { sed -e "s#$work/old#W#g" -e "s#$work/new#W#g" "$1"; }
for log in "$work"/old/*.log; do
  name=$(basename "$log")
  if ! diff -q <(unpath "$log") <(unpath "$work/new/$name") >/dev/null; then
    echo "message differs: $name"
    diff <(unpath "$log") <(unpath "$work/new/$name") | sed 's/^/    /' | head -6 || true
  fi
done
echo "compared $compared files, $fails different (work: $work)"
[[ $fails == 0 ]]
