#pragma once
// The GGUF container's own constants, as the spec (ggml's docs/gguf.md) assigns them, for the
// writer (io/gguf.cpp) and the reader (io/gguf_reader.cpp).
#include <cstdint>

namespace gatedlm::io {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint64_t kGgufDefaultAlignment = 32;

// The metadata value types gatedlm writes or reads by name.
enum GgufValueType : uint32_t {
  kGgufUint32 = 4, kGgufInt32 = 5, kGgufFloat32 = 6, kGgufBool = 7, kGgufString = 8, kGgufArray = 9, kGgufUint64 = 10
};

// llama.cpp's key for the model's chat template (a Jinja string; io/chat_template_source.h).
inline constexpr const char* kGgufChatTemplateKey = "tokenizer.chat_template";

}  // namespace gatedlm::io
