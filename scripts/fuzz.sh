#!/usr/bin/env bash
# Fuzzes every untrusted input format with libFuzzer (clang, ASan + UBSan) for a set time.
#   scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
# Targets: safetensors config_json dataset token_ids tokenizer_model report_analysis
# tokenizer_json tokenizer_json_text serve_request hf_config_json completion_request gguf jinja_template
# chat_request (tests/fuzz/fuzz_entries.cpp). Each
# starts from tests/fuzz/corpus/<target>/ (its seeds and the inputs that once found bugs)
# and grows a working corpus in build-fuzz/corpus/<target>/.
# A crashing input lands in build-fuzz/artifacts/<target>/: once fixed, copy it into
# tests/fuzz/corpus/<target>/ so that ctest (FuzzCorpus) replays it on every build.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(safetensors config_json dataset token_ids tokenizer_model report_analysis tokenizer_json
                                tokenizer_json_text serve_request hf_config_json completion_request gguf jinja_template
                                chat_request)

GATEDLM_WITH_FUZZ_DEPS=1 GATEDLM_SKIP_BUILD=1 scripts/setup.sh
BUILD=${GATEDLM_FUZZ_BUILD_DIR:-build-fuzz}
if [[ ! -f "$BUILD/build.ninja" ]]; then
  CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGATEDLM_FUZZ=ON \
    -DGATEDLM_BUILD_TESTS=OFF -DGATEDLM_NATIVE=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t" artifacts="$BUILD/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s" >&2
  # -max_len: the largest seed (gguf's q4_k_m.gguf, 100 KB: K-quant rows are 256 values).
  # -rss_limit_mb: the entry functions refuse what does not fit long before this.
  # -timeout=60: on a busy shared machine a 1 ms input was once stalled past 20 s (a false
  # hang); a real one still stops the run.
  if ! "$BUILD/tests/fuzz/fuzz_$t" "$corpus" "tests/fuzz/corpus/$t" -max_total_time="$SECONDS_PER_TARGET" \
      -max_len=131072 -rss_limit_mb=4096 -timeout=60 -artifact_prefix="$artifacts/" -print_final_stats=1 \
      2>"$BUILD/fuzz_$t.log"; then
    echo "fuzz: $t FOUND A CRASH: see $BUILD/fuzz_$t.log and $artifacts/" >&2
    failed=1
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$BUILD/fuzz_$t.log" | sed "s/^/fuzz: $t: /" >&2 || true
done
exit $failed
