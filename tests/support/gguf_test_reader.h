#pragma once
// A minimal GGUF reader for tests of the exporter, written from the format's specification
// independently of the exporter's code: the architecture, the u32 / f32 / string / i32-array
// metadata, and each tensor's dims (innermost first), ggml type and raw bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace gatedlm::testing {

struct GgufTestTensor {
  std::vector<uint64_t> dims;  // innermost first
  uint32_t type = 0;           // ggml type id
  std::string bytes;           // the tensor's data, up to the next tensor's offset
  // The values of an F32 tensor.
  std::vector<float> floats() const {
    EXPECT_EQ(type, 0u);
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    v.resize(n);
    return v;
  }
};

struct GgufTestFile {
  std::string architecture;
  std::map<std::string, std::variant<uint32_t, float, std::string, std::vector<int32_t>>> metadata;
  std::map<std::string, GgufTestTensor> tensors;
};

inline GgufTestFile read_gguf_for_test(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  size_t at = 0;
  auto get = [&](auto& v) {
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    at += sizeof(v);
  };
  auto str = [&] {
    uint64_t n;
    get(n);
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  };
  uint32_t magic, version, type;
  uint64_t n_tensors, n_kv;
  get(magic), get(version), get(n_tensors), get(n_kv);
  EXPECT_EQ(magic, 0x46554747u);
  GgufTestFile r;
  std::function<void(uint32_t)> skip = [&](uint32_t t) {  // one value of GGUF type t
    static const std::map<uint32_t, size_t> width{{0, 1}, {1, 1}, {2, 2}, {3, 2}, {4, 4}, {5, 4},
                                                  {6, 4}, {7, 1}, {10, 8}, {11, 8}, {12, 8}};
    if (t == 8) {
      str();
    } else if (t == 9) {
      uint32_t inner;
      uint64_t n;
      get(inner), get(n);
      for (uint64_t i = 0; i < n; ++i) skip(inner);
    } else {
      at += width.at(t);
    }
  };
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = str();
    get(type);
    const size_t value_at = at;
    if (type == 4) {
      uint32_t v;
      get(v);
      r.metadata[key] = v;
    } else if (type == 6) {
      float v;
      get(v);
      r.metadata[key] = v;
    } else if (type == 8) {
      r.metadata[key] = str();
    } else {
      skip(type);
      uint32_t inner;
      std::memcpy(&inner, bytes.data() + value_at, 4);
      if (type == 9 && inner == 5) {  // an array of int32
        uint64_t n;
        std::memcpy(&n, bytes.data() + value_at + 4, 8);
        std::vector<int32_t> v(n);
        std::memcpy(v.data(), bytes.data() + value_at + 12, n * 4);
        r.metadata[key] = v;
      }
    }
  }
  if (auto* a = std::get_if<std::string>(&r.metadata["general.architecture"])) r.architecture = *a;
  std::vector<std::tuple<std::string, uint64_t>> order;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = str();
    uint32_t n_dims;
    get(n_dims);
    GgufTestTensor& t = r.tensors[name];
    t.dims.resize(n_dims);
    for (auto& d : t.dims) get(d);
    uint64_t offset;
    get(t.type), get(offset);
    order.emplace_back(name, offset);
  }
  const size_t data = (at + 31) / 32 * 32;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [name, offset] = order[i];
    const uint64_t end = i + 1 < order.size() ? std::get<1>(order[i + 1]) : bytes.size() - data;
    r.tensors[name].bytes = bytes.substr(data + offset, end - offset);
  }
  return r;
}

}  // namespace gatedlm::testing
