#include "io/gguf_blocks.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/weight_recipes.h"

namespace gatedlm::io {

namespace k = kernels;

namespace {

// The tensor's runs with each run that continues the one before (same parameter, the next
// values) joined to it: the tables list a hybrid's value heads one by one, in order when
// there are as many value heads as key heads.
std::vector<GgufRun> joined_runs(const GgufTensor& t) {
  std::vector<GgufRun> runs;
  for (const GgufRun& r : t.runs) {
    GgufRun* last = runs.empty() ? nullptr : &runs.back();
    if (last && last->spec == r.spec && last->begin + last->count == r.begin) last->count += r.count;
    else runs.push_back(r);
  }
  return runs;
}

}  // namespace

bool gguf_keeps_blocks(const GgufReader& f, const GgufTensor& t) {
  const GgufTensorInfo* info = f.find_tensor(t.name);
  if (!info || info->shape.empty() || t.values != GgufValues::as_is) return false;
  const k::ElementTraits* traits = k::find_element_type(info->type);
  if (!traits || !traits->products) return false;
  const int64_t cols = info->shape.back();
  std::map<const model::ParamSpec*, int64_t> covered;  // values of each parameter the runs hold
  for (const GgufRun& run : joined_runs(t)) {
    if (!run.spec) {
      if (run.count % cols != 0) return false;
      continue;
    }
    const model::ParamSpec& s = *run.spec;
    if (s.shape.back() != cols || run.begin % cols != 0 || run.count % cols != 0 || !model::quantized_tensor(s))
      return false;
    covered[&s] += run.count;
  }
  return !covered.empty() && std::all_of(covered.begin(), covered.end(), [](const auto& c) { return c.second == c.first->numel; });
}

model::WeightFormats gguf_block_formats(const GgufReader& f, const std::vector<GgufTensor>& wanted) {
  model::WeightFormats formats{"gguf", {}};
  const auto ftype = f.metadata().find("general.file_type");  // a label: any other value leaves "gguf"
  if (ftype != f.metadata().end() && !ftype->second.is_array() && ftype->second.ints.size() == 1 &&
      ftype->second.ints[0] >= 0 && ftype->second.ints[0] <= UINT32_MAX)
    if (const model::WeightRecipe* r = model::find_recipe_by_ftype(static_cast<uint32_t>(ftype->second.ints[0])))
      formats.name = r->name;
  for (const GgufTensor& t : wanted) {
    if (!gguf_keeps_blocks(f, t)) continue;
    const auto type = static_cast<k::ElementType>(f.find_tensor(t.name)->type);
    for (const GgufRun& run : t.runs)
      if (run.spec) formats.tensors.emplace(run.spec->name, type);
  }
  return formats;
}

void read_gguf_blocks(GgufReader& f, const GgufTensor& t, model::QuantizedWeights& blocks) {
  const GgufTensorInfo& info = *f.find_tensor(t.name);
  const auto type = static_cast<k::ElementType>(info.type);
  const int64_t cols = info.shape.back(), row_bytes = k::element_row_bytes(type, cols);
  int64_t row = 0;  // rows of the tensor read so far
  for (const GgufRun& run : joined_runs(t)) {
    const int64_t rows = run.count / cols;
    if (run.spec) {
      uint8_t* dst = blocks.tensor_bytes(*run.spec).data() + run.begin / cols * row_bytes;
      f.read_bytes(info, static_cast<uint64_t>(row * row_bytes), dst, static_cast<uint64_t>(rows * row_bytes));
      require_finite_rows(type, dst, rows, cols, cat(f.path(), ": tensor ", t.name), row);
    }
    row += rows;
  }
}

}  // namespace gatedlm::io
