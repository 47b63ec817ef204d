#pragma once
// SHA-256 (FIPS 180-4), for content hashes in dataset manifests. Incremental: feed any
// number of update() calls, then hex() (or digest()) once.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gatedlm {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex();  // 64 lowercase hex digits

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

std::string sha256_hex(std::string_view data);
// Hash of a whole file, read in blocks; throws gatedlm::Error naming the path.
std::string sha256_file_hex(const std::string& path);

}  // namespace gatedlm
