// The libFuzzer harness of one target, chosen at compile time (GATEDLM_FUZZ_TARGET, one
// executable per target: fuzz_safetensors, fuzz_config_json, ...). Built by scripts/fuzz.sh.
#include <cstdio>
#include <cstdlib>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gatedlm::fuzz::Entry entry = [] {
    const gatedlm::fuzz::Entry e = gatedlm::fuzz::find_target(GATEDLM_FUZZ_TARGET);
    if (!e) {
      std::fprintf(stderr, "unknown fuzz target %s\n", GATEDLM_FUZZ_TARGET);
      std::abort();
    }
    return e;
  }();
  entry(data, size);
  return 0;
}
