// SHA-256 against the FIPS 180-4 / NIST example vectors, fed whole and in pieces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "core/sha256.h"

namespace gatedlm {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                       "mnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex("The quick brown fox jumps over the lazy dog"),
            "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
}

TEST(Sha256Test, IncrementalMatchesWholeAtEveryLengthAndSplit) {
  std::string data;
  for (int i = 0; i < 200; ++i) data += static_cast<char>((i * 37 + 11) & 0xFF);
  for (size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
    const std::string part = data.substr(0, len);
    const std::string whole = sha256_hex(part);
    for (size_t split = 0; split <= len; split += 7) {
      Sha256 h;
      h.update(part.substr(0, split));
      h.update(part.substr(split));
      EXPECT_EQ(h.hex(), whole) << "length " << len << " split " << split;
    }
  }
}

TEST(Sha256Test, FileHashAndErrors) {
  const auto path = std::filesystem::temp_directory_path() / ("gatedlm_sha256_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_EQ(sha256_file_hex(path.string()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::filesystem::remove(path);
  try {
    sha256_file_hex(path.string());
    FAIL() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  Sha256 h;
  h.hex();
  EXPECT_THROW(h.update("x"), Error);
}

}  // namespace
}  // namespace gatedlm
