#pragma once
// The declarative name tables: which tensor of a Hugging Face checkpoint holds each
// gatedlm parameter (model/param_layout.h); each model family (io/model_family.h) names its
// table. gatedlm's names are already transformers' Qwen3 names, so the qwen3 table is the
// identity; the paper's (io/family_paper.cpp) differs in one place: its q_proj holds the gate's rows (and q_proj.bias the gate's bias), grouped
// per KV group. With G = n_heads / n_kv_heads query heads per group and gw = head_dim
// (elementwise) or 1 (headwise) gate rows per head, group g's block of rows is
//   [ query rows of heads gG .. gG+G-1 (G*head_dim) | their gate rows (G*gw) ]
// and the blocks follow each other in group order.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// Which rows of the Hugging Face tensor a gatedlm tensor is.
enum class RowPart {
  all,          // the same tensor, row for row
  paper_query,  // the query rows of the paper's fused q_proj
  paper_gate,   // the gate rows of the paper's fused q_proj
  mapped,       // rows placed by TensorMapping::row (the hybrid formats' fused tensors)
};

struct NameRule {
  const char* ours;    // gatedlm name; "{i}" is the layer index
  const char* theirs;  // Hugging Face name
  RowPart part;
};

// A parameter name with its layer index taken out: "model.layers.7.x" ->
// ("model.layers.{i}.x", "7"); a name outside the layers unchanged, with layer "". The
// name tables (here and GGUF's, io/gguf.cpp) are written in the generic form.
std::pair<std::string, std::string> generic_name(const std::string& name);
// The inverse: the generic name `pattern` with its "{i}" replaced by `layer`.
std::string with_layer(std::string_view pattern, const std::string& layer);

// A name table, in no particular order: Qwen3's (the identity), or the rules a family
// gives plus every name Qwen3 checkpoints share but q_proj's.
const std::vector<NameRule>& qwen3_name_table();
std::vector<NameRule> table_with(std::vector<NameRule> specific);

// One gatedlm parameter and where it lives in the Hugging Face checkpoint. Both tensors are
// seen as rows of the gatedlm tensor's row width (its size over its first dimension): row r
// of ours is row row(r) of theirs. map_parameters leaves their_shape and row empty;
// map_tensors fills them.
struct TensorMapping {
  const model::ParamSpec* spec;  // gatedlm's tensor
  std::string theirs;            // the Hugging Face tensor that holds it
  RowPart part;
  std::vector<int64_t> their_shape;
  std::function<int64_t(int64_t)> row;
};
// The mapping of every parameter of the layout by `table`, in layout order (the MoE FFN's
// tensors keep gatedlm's names, Qwen3-MoE's). Throws naming a parameter the table has no
// name for, and `format`, the family it belongs to.
std::vector<TensorMapping> map_parameters(const model::ParamLayout& layout, const std::vector<NameRule>& table,
                                          const std::string& format);
// The same with the Hugging Face tensors' shapes and row maps (the families of the Qwen3
// layout; the hybrids' are io/hf_hybrid_names.h).
std::vector<TensorMapping> map_table_tensors(const model::ModelConfig& c, const model::ParamLayout& layout,
                                             const std::vector<NameRule>& table, const std::string& format);

// Rows of the Hugging Face tensor `theirs` holding gatedlm tensors of shape `ours_rows`:
// for RowPart::all the same count, for the paper's q_proj the query rows plus the gate's.
int64_t their_rows(const model::ModelConfig& c, RowPart part, int64_t ours_rows);
// The row of the Hugging Face tensor that holds row r of a gatedlm tensor.
int64_t their_row(const model::ModelConfig& c, RowPart part, int64_t r);

}  // namespace gatedlm::io
