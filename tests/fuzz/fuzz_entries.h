#pragma once
// One entry function per untrusted input format: it feeds the bytes through the same code
// path the binary uses (written to a scratch file, then the real loader) and returns
// normally when the input is accepted or refused with a gatedlm::Error. Anything else (a
// crash, a sanitizer report, another exception) is a bug. Used by the libFuzzer harnesses
// (fuzz_main.cpp, built with clang by scripts/fuzz.sh) and by the corpus regression test
// that ctest runs with the normal compiler (tests/unit/fuzz/test_fuzz_corpus_replay.cpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gatedlm::fuzz {

using Entry = void (*)(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // also the corpus directory: tests/fuzz/corpus/<name>/
  Entry entry;
};

const std::vector<Target>& targets();
Entry find_target(const std::string& name);  // nullptr when unknown

}  // namespace gatedlm::fuzz
