// tokenizer.json regexes (Oniguruma's syntax) rewritten for PCRE2 where the engines differ,
// and what the rewrite changes in real encodings.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "../fuzz/fixed_tokenizer_json.h"
#include "io/tokenizer_json.h"
#include "io/tokenizer_regex.h"
#include "test_files.h"

namespace gatedlm {
namespace {

using nlohmann::json;
using testing::contains;
using testing::error_of;

std::string pcre2(const std::string& pattern) { return io::pcre2_pattern_from_oniguruma(pattern, "tok.json"); }

TEST(TokenizerRegex, WhiteSpaceHexDigitsCodePointsAndAnchors) {
  EXPECT_EQ(pcre2(R"(\s+(?!\S)|\s+)"), R"(\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)");
  EXPECT_EQ(pcre2(R"([^\s\p{L}\p{N}]+[\r\n]*)"), R"([^\p{White_Space}\p{L}\p{N}]+[\r\n]*)");
  EXPECT_EQ(pcre2(R"(\h+|[\h_]\H)"), R"([0-9A-Fa-f]+|[0-9A-Fa-f_][^0-9A-Fa-f])");
  EXPECT_EQ(pcre2(R"(\u00e9[\u3000-\u303F])"), R"(\x{00e9}[\x{3000}-\x{303F}])");
  EXPECT_EQ(pcre2(R"(^a$|[$^])"), R"((?m:^)a(?m:$)|[$^])");
  // Escapes PCRE2 reads as Oniguruma does pass through, as do the patterns without any.
  EXPECT_EQ(pcre2(R"(\p{L}\d\w\r\n\t\\s\.)"), R"(\p{L}\d\w\r\n\t\\s\.)");
  EXPECT_EQ(pcre2(R"('s|'t| ?\p{L}+| ?\p{N}+)"), R"('s|'t| ?\p{L}+| ?\p{N}+)");
}

TEST(TokenizerRegex, InlineCaseInsensitiveGroupsFoldAsciiOnly) {
  EXPECT_EQ(pcre2(R"((?i:'s|'ll)|[^\r\n\p{L}\p{N}]?\p{L}+)"), R"((?:'[sS]|'[lL][lL])|[^\r\n\p{L}\p{N}]?\p{L}+)");
  // Classes gain the other case of their letters and letter ranges; escapes, property
  // names, hex digits and group names are no letters to fold; the fold ends with the group.
  EXPECT_EQ(pcre2(R"((?i:[a-cx_0-9]\p{Lu}\x4a\u004B(?<Nm>q))z)"), R"((?:[a-cx_0-9A-CX]\p{Lu}\x4a\x{004B}(?<Nm>[qQ]))z)");
  EXPECT_EQ(pcre2(R"((?i:[^!-~]))"), R"((?:[^!-~A-Za-z]))");
  const std::string qwen35 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(pcre2(qwen35),
            R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)"
            R"( ?[^\p{White_Space}\p{L}\p{M}\p{N}]+[\r\n]*|\p{White_Space}*[\r\n]+|\p{White_Space}+(?!\P{White_Space})|)"
            R"(\p{White_Space}+)");
}

TEST(TokenizerRegex, ConstructsWithoutATranslationAreRefusedNamingThem) {
  for (const auto& [pattern, needle] : std::vector<std::pair<std::string, std::string>>{
           {"[a[b]]", "a character class nested in another"},
           {"[a-z&&[^q]]", "a character class intersection (&&)"},
           {"(?x) a", "an inline option group"},
           {"(?i)a", "an inline option group"},
           {R"(\u12)", "\\u without four"},
           {R"([\H])", "\\H (not a hexadecimal digit) inside"}}) {
    const std::string e = error_of([&] { pcre2(pattern); });
    EXPECT_TRUE(contains(e, "tok.json: the pre-tokenizer regex /" + pattern + "/ has " + needle)) << e;
    EXPECT_TRUE(contains(e, "Oniguruma's syntax to PCRE2's")) << e;
  }
  // POSIX classes inside a class are no nesting.
  EXPECT_EQ(pcre2("[[:alpha:]_]"), "[[:alpha:]_]");
}

// Patterns of regex punctuation, escapes and letters in any order: each is translated or
// refused with an Error (the fuzz target tokenizer_json reaches the same code under ASan),
// and a translation keeps the pattern's other characters.
TEST(TokenizerRegex, AnyPatternIsTranslatedOrRefused) {
  const std::string alphabet = "\\[]()?i:^$-&<>'{}+*|sSuhHpPxkgLMN0123abAB_ \xc5\xbf";
  std::mt19937 rng(7);
  int translated = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string pattern(rng() % 24, ' ');
    for (char& c : pattern) c = alphabet[rng() % alphabet.size()];
    try {
      const std::string out = pcre2(pattern);
      ++translated;
      EXPECT_GE(out.size(), pattern.size() - std::count(pattern.begin(), pattern.end(), 'i')) << pattern;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "tok.json: the pre-tokenizer regex /")) << e.what();
    }
  }
  EXPECT_GT(translated, 1000);
}

// The fuzz targets' tokenizer (Qwen2's regex, byte vocabulary) with merges that make a
// split visible in the ids: "ĠĠ" exists only if two spaces are one piece, "Å¿t" (U+017F
// LATIN SMALL LETTER LONG S, then t) only if "'ſt" is one piece, "St" only if "'St" is.
class TokenizerRegexEncoding : public ::testing::Test {
 protected:
  TokenizerRegexEncoding() : dir_("tokregex") {
    json j = json::parse(fuzz::kFixedTokenizerJson);
    json& model = j["model"];
    model["vocab"]["ĠĠ"] = 266, model["vocab"]["Å¿"] = 267, model["vocab"]["Å¿t"] = 268, model["vocab"]["St"] = 269;
    for (const char* m : {"Ġ Ġ", "Å ¿", "Å¿ t", "S t"}) model["merges"].push_back(m);
    testing::write_file(dir_ / "tokenizer.json", j.dump());
    tokenizer_ = io::load_tokenizer_json((dir_ / "tokenizer.json").string());
    vocab_ = model["vocab"];
  }
  int32_t id(const std::string& symbol) const { return vocab_.at(symbol).get<int32_t>(); }
  int32_t byte(unsigned char b) const { return id(io::byte_level_symbol(b)); }

  testing::TempDir dir_;
  std::unique_ptr<io::Tokenizer> tokenizer_;
  json vocab_;
};

TEST_F(TokenizerRegexEncoding, MongolianVowelSeparatorIsNoWhiteSpace) {
  // U+180E: PCRE2's \s matched it, so \s+ took "  \u180e" whole (ĠĠ); Oniguruma's and
  // JavaScript's \s do not: " " (space before non-space is left alone), then " \u180e".
  EXPECT_EQ(tokenizer_->encode("  \xe1\xa0\x8e"), (std::vector<int32_t>{id("Ġ"), id("Ġ"), byte(0xe1), byte(0xa0), byte(0x8e)}));
  EXPECT_EQ(tokenizer_->encode("   x"), (std::vector<int32_t>{id("ĠĠ"), id("Ġ"), id("x")}));  // the merge works
}

TEST_F(TokenizerRegexEncoding, ContractionsFoldAsciiOnly) {
  // (?i:'s) under PCRE2's Unicode folding matched "'ſ", leaving "t" a piece of its own.
  EXPECT_EQ(tokenizer_->encode("I'\xc5\xbft"), (std::vector<int32_t>{id("I"), id("'"), id("Å¿t")}));
  // "'S" is still a contraction: a piece of its own, so S and t do not merge.
  EXPECT_EQ(tokenizer_->encode("I'St"), (std::vector<int32_t>{id("I"), id("'"), id("S"), id("t")}));
  EXPECT_EQ(tokenizer_->encode("ASt"), (std::vector<int32_t>{id("A"), id("St")}));  // the merge works
}

}  // namespace
}  // namespace gatedlm
