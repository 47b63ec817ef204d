// The fuzzing corpora as regression inputs: every file under tests/fuzz/corpus/<target>/
// goes through the same entry function the libFuzzer harness calls (tests/fuzz), built
// here with the normal compiler, so CI checks the inputs that once found bugs without a
// fuzzer. An input must be accepted or refused with a gatedlm::Error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../fuzz/fuzz_entries.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryInputIsAcceptedOrRefusedCleanly) {
  const fs::path root = fs::path(GATEDLM_SOURCE_DIR) / "tests" / "fuzz" / "corpus";
  ASSERT_TRUE(fs::is_directory(root)) << root;
  size_t inputs = 0;
  for (const fuzz::Target& t : fuzz::targets()) {
    const fs::path dir = root / t.name;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(e.path().string());
      EXPECT_NO_THROW(t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      ++inputs;
    }
  }
  EXPECT_GT(inputs, 0u) << "no corpus files under " << root;
}

}  // namespace
}  // namespace gatedlm
