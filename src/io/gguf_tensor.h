#pragma once
// One GGUF tensor as GGUF export writes it and import reads it back (io/gguf_tables.h,
// io/gguf_linear.h): a name, a shape, and its values as runs of gatedlm parameters, with the
// value map between them.
#include <cstdint>
#include <string>
#include <vector>

#include "model/param_layout.h"

namespace gatedlm::io {

// A gatedlm parameter's generic name ("{i}": the layer) and its GGUF name.
struct GgufName {
  const char* ours;
  const char* theirs;
};

// A run of `count` consecutive values of one gatedlm parameter, from its element `begin`
// on; or, spec null, `count` zeros (values the model does not have, such as qwen35moe's zero
// shared expert). A row may span runs (ssm_out's value heads are reordered within rows).
struct GgufRun {
  const model::ParamSpec* spec;
  int64_t begin, count;
};
// One GGUF tensor: its name, shape (outermost first; GGUF stores the dims innermost first)
// and its values as runs one after another: one whole parameter; for qwen3moe's stacked
// expert tensors ffn_{gate,up,down}_exps [E, rows, cols] one per expert, in order; for
// qwen35's attn_q a head's q_proj rows, then its gate rows, head after head. Import copies
// each run back into its parameter.
// How the stored values follow from the parameters' (import applies the inverse): as they
// are; plus one (a zero-centred norm, x_hat * (1 + w), stored as llama.cpp's x_hat * w'); or
// minus exp (A_log stored as llama.cpp's ssm_a = -exp(A_log)).
enum class GgufValues { as_is, plus_one, minus_exp };
struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<GgufRun> runs;
  GgufValues values = GgufValues::as_is;
  int64_t numel() const {
    int64_t n = 0;
    for (const GgufRun& r : runs) n += r.count;
    return n;
  }
};
}  // namespace gatedlm::io
