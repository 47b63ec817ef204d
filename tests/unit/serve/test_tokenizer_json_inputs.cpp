// Hostile tokenizer.json files and texts (what the tokenizer_json fuzz targets look for),
// and the server's request bodies that reach the tokenizer: refused with messages, never
// a crash, a hang or memory sized from a number in the file.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "../fuzz/fixed_tokenizer_json.h"
#include "core/json_file.h"
#include "io/tokenizer.h"
#include "io/tokenizer_json.h"
#include "serve/completion_request.h"
#include "test_files.h"

namespace gatedlm {
namespace {

using nlohmann::json;
using testing::error_of;

class TokenizerJsonInputs : public ::testing::Test {
 protected:
  TokenizerJsonInputs() : dir_("tokjson") {}
  // The fuzz targets' fixed tokenizer, changed by `edit`, written and loaded.
  template <typename F>
  std::string write_edited(F&& edit) {
    json j = json::parse(fuzz::kFixedTokenizerJson);
    edit(j);
    const std::string path = (dir_.path() / "tokenizer.json").string();
    testing::write_file(path, j.dump());
    return path;
  }
  std::string fixed() {
    return write_edited([](json&) {});
  }
  testing::TempDir dir_;
};

TEST_F(TokenizerJsonInputs, MalformedFilesAreRefusedNamingTheFile) {
  // A key of the wrong type (was nlohmann's type_error, an "internal error").
  std::string path = write_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = 5; });
  EXPECT_TRUE(testing::contains(error_of([&] { io::load_tokenizer_json(path); }), "tokenizer.json: malformed"));
  // An id far past the tokens listed would size the id table from the file: refused.
  path = write_edited([](json& j) { j["added_tokens"][0]["id"] = 2000000000; });
  std::string e = error_of([&] { io::load_tokenizer_json(path); });
  EXPECT_TRUE(testing::contains(e, "added token id is 2000000000, out of range [0, ")) << e;
  path = write_edited([](json& j) { j["model"]["vocab"]["!"] = -1; });
  e = error_of([&] { io::load_tokenizer_json(path); });
  EXPECT_TRUE(testing::contains(e, "vocab id of \"!\" is -1")) << e;
  // An empty added token matched everywhere and the encoder never moved on.
  path = write_edited([](json& j) { j["added_tokens"][1]["content"] = ""; });
  e = error_of([&] { io::load_tokenizer_json(path); });
  EXPECT_TRUE(testing::contains(e, "added token 265 is empty")) << e;
  // A directory in the file's place.
  const auto dir = dir_.path() / "dir.json";
  std::filesystem::create_directories(dir);
  e = error_of([&] { io::load_tokenizer_json(dir.string()); });
  EXPECT_TRUE(testing::contains(e, "dir.json: is a directory")) << e;
}

TEST_F(TokenizerJsonInputs, TextThatIsNotUtf8IsRefusedAndUtf8RoundTrips) {
  const auto t = io::load_tokenizer_json(fixed());
  for (const std::string bad : {"ab\xff", "\xc3(", "\xed\xa0\x80", "\xf4\x90\x80\x80", "end\xe2\x82", "\xc0\xaf"}) {
    const std::string e = error_of([&] { t->encode(bad); });
    EXPECT_TRUE(testing::contains(e, "not valid UTF-8")) << e;
  }
  const std::string good = "Gr\xc3\xbc\xc3\x9f" "e \xf0\x9f\x98\x80 \xe4\xbd\xa0<|im_start|>the  \t\n x";
  EXPECT_EQ(t->decode(t->encode(good)), good);
}

// Many added tokens in a long text: each token's search moves forward only (it was one
// search of the rest of the text per token per occurrence: minutes for this text).
TEST_F(TokenizerJsonInputs, ManyAddedTokensInALongTextEncodeInLinearTime) {
  const auto t = io::load_tokenizer_json(write_edited([](json& j) {
    for (int k = 0; k < 30; ++k)
      j["added_tokens"].push_back({{"id", 266 + k}, {"content", "<|extra_" + std::to_string(k) + "|>"}});
  }));
  std::string text;
  for (int i = 0; i < 50000; ++i) text += i % 2 ? "<|endoftext|>" : "<|extra_29|>";
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = t->encode(text);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(ids.size(), 50000u);
  EXPECT_EQ(ids[0], 295);
  EXPECT_EQ(ids[1], 264);
  EXPECT_LT(took, 10.0);
}

// lstrip / rstrip: the added token takes the White_Space beside it (here U+3000 and a tab),
// which no other id then encodes; single_word is refused by name.
TEST_F(TokenizerJsonInputs, AddedTokensTakeTheWhiteSpaceBesideThemWithLstripAndRstrip) {
  const auto plain = io::load_tokenizer_json(fixed());
  const auto t = io::load_tokenizer_json(write_edited([](json& j) {
    j["added_tokens"][1]["lstrip"] = true;  // <|im_start|>
    j["added_tokens"][1]["rstrip"] = true;
  }));
  const std::string text = "a \xe3\x80\x80<|im_start|>\t\n b";
  std::vector<int32_t> want = plain->encode("a");
  want.push_back(265);
  for (int32_t id : plain->encode("b")) want.push_back(id);
  EXPECT_EQ(t->encode(text), want);
  EXPECT_NE(plain->encode(text), want);
  EXPECT_EQ(t->encode("<|im_start|>"), (std::vector<int32_t>{265}));  // nothing beside it
  const std::string e = error_of([&] {
    io::load_tokenizer_json(write_edited([](json& j) { j["added_tokens"][0]["single_word"] = true; }));
  });
  EXPECT_TRUE(testing::contains(e, "added token <|endoftext|>: single_word is not supported")) << e;
}

TEST_F(TokenizerJsonInputs, ServerBodiesTheTokenizerRefusesAre400s) {
  const auto t = io::load_tokenizer_json(fixed());
  // Id 263 is a hole of the fixed tokenizer: /detokenize answered 500 (decode's error
  // escaped the handler); now an InvalidRequest about "tokens" without the server's path.
  try {
    serve::detokenize(R"({"tokens": [72, 263]})", *t);
    ADD_FAILURE() << "a hole in the vocabulary was decoded";
  } catch (const serve::InvalidRequest& e) {
    EXPECT_EQ(e.param, "tokens");
    EXPECT_TRUE(testing::contains(e.what(), "cannot decode id 263")) << e.what();
    EXPECT_FALSE(testing::contains(e.what(), dir_.path().string())) << e.what();
  }
  EXPECT_EQ(serve::detokenize(R"({"tokens": [72, 105]})", *t), "Hi");
  EXPECT_THROW(serve::detokenize(R"({"tokens": [72, 266]})", *t), serve::InvalidRequest);  // past the vocabulary
}

// A deeply nested body (or file) is refused while parsing: its error message used to dump the
// nested value recursively, one stack frame per level (a crash of the whole server).
TEST_F(TokenizerJsonInputs, DeeplyNestedJsonIsRefused) {
  const auto t = io::load_tokenizer_json(fixed());
  const std::string nested = std::string(200000, '[') + std::string(200000, ']');
  for (const std::string& body : {"{\"prompt\": " + nested + "}", "{\"tokens\": [" + nested + "]}"}) {
    try {
      serve::parse_completion(body, *t, t->vocab_size(), 64, 1);
      ADD_FAILURE() << "accepted";
    } catch (const serve::InvalidRequest& e) {
      EXPECT_TRUE(testing::contains(e.what(), "deeper than 32 levels")) << e.what();
    }
    EXPECT_THROW(serve::detokenize(body, *t), serve::InvalidRequest);
  }
  std::string ok = "{\"prompt\": [1, 2, 3], \"stop\": [\"a\"]}";
  EXPECT_EQ(serve::parse_completion(ok, *t, t->vocab_size(), 64, 1).prompt.size(), 3u);
  // Files too (configs, manifests, tokenizer.json, analysis JSON): refused naming the file.
  const std::string e = error_of([&] { parse_json_strict("{\"vocab_size\": " + nested + "}", "deep.json"); });
  EXPECT_TRUE(testing::contains(e, "deep.json: nests arrays or objects deeper than 256 levels")) << e;
}

}  // namespace
}  // namespace gatedlm
