// Bigram-Backcopy (eval/synth_bigram_backcopy.h, `gatedlm data synth --task bigram-backcopy`):
// the chains follow the corpus's bigram statistics (checked against pair counts the test
// makes itself from the corpus bytes), every trigger is followed by a copy of the symbol
// before it, every document starts with BOS, the output is a function of the seed, and bad
// options are refused by name with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/rng.h"
#include "eval/synth_bigram_backcopy.h"
#include "io/token_dataset.h"
#include "test_files.h"
#include "test_fixtures.h"

namespace gatedlm {
namespace {

using testing::corpus_text;

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::error_of;
using testing::read_file;
using testing::run_gatedlm;
using testing::TempDir;
using testing::write_file;

bool is_in(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(BigramModelTest, CountsPairsWithinDocumentsAndRanksSymbols) {
  // "abca" + "bb": counts a2 b3 c1; pairs ab, bc, ca, bb (none across the documents).
  const eval::BigramModel m = eval::BigramModel::estimate({{0, 1, 2, 0}, {1, 1}});
  EXPECT_EQ(m.symbols(), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m.count(0), 2);
  EXPECT_EQ(m.count(1), 3);
  EXPECT_EQ(m.count(2), 1);
  EXPECT_EQ(m.count(7), 0);
  EXPECT_EQ(m.pair_count(0, 1), 1);
  EXPECT_EQ(m.pair_count(1, 2), 1);
  EXPECT_EQ(m.pair_count(1, 1), 1);
  EXPECT_EQ(m.pair_count(2, 0), 1);
  EXPECT_EQ(m.pair_count(0, 0), 0);  // the documents' ends are not joined
  EXPECT_EQ(m.row_total(1), 2);
  EXPECT_EQ(m.most_frequent(2), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(m.most_frequent(9), (std::vector<int32_t>{1, 0, 2}));
  // Ties: the smaller id first.
  EXPECT_EQ(eval::BigramModel::estimate({{5, 3, 5, 3}}).most_frequent(1), (std::vector<int32_t>{3}));
  EXPECT_TRUE(contains(error_of([] { eval::BigramModel::estimate({{4, 4, 4}}); }), "at least 2"));
  EXPECT_TRUE(contains(error_of([] { eval::BigramModel::estimate({{4}, {5}}); }), "no pair"));
}

TEST(BigramModelTest, ChainCopiesAfterTriggersAndNeverStartsWithOne) {
  std::vector<int32_t> ids;
  for (char c : corpus_text(400, 3)) ids.push_back(static_cast<unsigned char>(c));
  const eval::BigramModel m = eval::BigramModel::estimate({ids});
  const std::vector<int32_t> triggers = m.most_frequent(3);
  ASSERT_TRUE(is_in(triggers, ' '));  // the space is the most frequent byte here
  int copies = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed);
    const std::vector<int32_t> c = eval::bigram_backcopy_chain(m, triggers, 50, rng);
    ASSERT_EQ(c.size(), 50u);
    EXPECT_FALSE(is_in(triggers, c[0])) << "seed " << seed;
    for (size_t i = 1; i < c.size(); ++i) {
      if (is_in(triggers, c[i])) {
        EXPECT_FALSE(is_in(triggers, c[i - 1])) << "a trigger after a trigger";
      }
      if (i >= 2 && is_in(triggers, c[i - 1])) {
        EXPECT_EQ(c[i], c[i - 2]) << "seed " << seed << " position " << i;
        ++copies;
      } else {
        EXPECT_GT(m.pair_count(c[i - 1], c[i]), 0) << "a pair the corpus never has";
      }
    }
  }
  EXPECT_GT(copies, 1000);
}

}  // namespace
}  // namespace gatedlm
