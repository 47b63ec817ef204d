#include "model/quantized_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "kernels/quant_matmul.h"
#include "kernels/quant_tiles.h"

namespace gatedlm::model {

namespace k = kernels;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool quantized_tensor(const ParamSpec& spec) {
  const bool weight_kind = spec.kind == ParamKind::embedding || spec.kind == ParamKind::lm_head ||
                           spec.kind == ParamKind::matrix || spec.kind == ParamKind::gate;
  if (!weight_kind || spec.shape.size() < 2 || spec.shape.back() % k::kQuantBlockValues != 0) return false;
  // Routers: few rows that decide which experts run (llama.cpp keeps ffn_gate_inp F32).
  return !ends_with(spec.name, ".mlp.gate.weight") && !ends_with(spec.name, ".mlp.shared_expert_gate.weight");
}

std::optional<k::ElementType> tensor_format(const ParamLayout& layout, const ParamSpec& spec, k::ElementType type) {
  if (!quantized_tensor(spec)) return std::nullopt;
  const bool output = spec.kind == ParamKind::lm_head ||
                      (spec.kind == ParamKind::embedding && !layout.find("lm_head.weight"));
  if (output && type == k::ElementType::q4_0) return k::ElementType::q8_0;
  return spec.shape.back() % k::element_traits(type).block_values == 0 ? type : k::narrow_row_type(type);
}

std::optional<k::ElementType> WeightFormats::of(const ParamSpec& spec) const {
  const auto it = tensors.find(spec.name);
  return it == tensors.end() ? std::nullopt : std::optional(it->second);
}

WeightFormats uniform_formats(const ParamLayout& layout, k::ElementType type) {
  WeightFormats formats{k::element_name(type), {}};
  for (const ParamSpec& spec : layout.specs())
    if (const std::optional<k::ElementType> f = tensor_format(layout, spec, type)) formats.tensors.emplace(spec.name, *f);
  return formats;
}

namespace {

// Each tensor `formats` names is one the products may read as blocks of its type.
void check_formats(const ParamLayout& layout, const WeightFormats& formats) {
  for (const auto& [name, type] : formats.tensors) {
    const ParamSpec* spec = layout.find(name);
    if (!spec) fail("quantised weights (", formats.name, "): the model has no tensor ", name);
    if (!quantized_tensor(*spec))
      fail("quantised weights (", formats.name, "): tensor ", name, " stays F32 (not a weight matrix whose rows are "
           "whole 32-value blocks, or a router)");
    const k::ElementTraits& t = k::element_traits(type);
    if (!t.products)
      fail("quantised weights (", formats.name, "): tensor ", name, " is ", t.name, ", a type the products do not read");
    if (spec->shape.back() % t.block_values != 0)
      fail("quantised weights (", formats.name, "): tensor ", name, "'s rows of ", spec->shape.back(),
           " values are not whole ", t.name, " blocks of ", t.block_values);
  }
}

}  // namespace

QuantizedWeights::QuantizedWeights(const ParamLayout& layout, k::ElementType type)
    : QuantizedWeights(layout, uniform_formats(layout, type)) {}

QuantizedWeights::QuantizedWeights(const ParamLayout& layout, WeightFormats formats)
    : layout_(layout), formats_(std::move(formats)), total_(layout.total()) {
  check_formats(layout_, formats_);
  for (const ParamSpec& spec : layout.specs()) {
    const std::optional<k::ElementType> format = formats_.of(spec);
    if (!format) continue;
    const int64_t cols = spec.shape.back(), rows = spec.numel / cols;
    Segment* last = segments_.empty() ? nullptr : &segments_.back();
    if (last && last->cols == cols && last->format == *format && last->begin + last->rows * last->cols == spec.offset)
      last->rows += rows;
    else
      segments_.push_back(Segment{spec.offset, rows, cols, *format, {}});
  }
  for (Segment& seg : segments_)
    seg.blocks.resize(static_cast<size_t>(seg.rows * k::element_row_bytes(seg.format, seg.cols)));
}

QuantizedWeights::~QuantizedWeights() { detach(); }

const QuantizedWeights::Segment* QuantizedWeights::segment_at(int64_t offset) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), offset,
                             [](int64_t o, const Segment& s) { return o < s.begin; });
  if (it == segments_.begin()) return nullptr;
  --it;
  return offset < it->begin + it->rows * it->cols ? &*it : nullptr;
}

std::span<const uint8_t> QuantizedWeights::tensor_bytes(const ParamSpec& spec) const {
  const Segment* seg = quantized_tensor(spec) ? segment_at(spec.offset) : nullptr;
  if (!seg) fail("quantised weights: tensor ", spec.name, " is kept in F32");
  if (seg->tiled_rows > 0)
    fail("quantised weights: tensor ", spec.name, "'s blocks are arranged in tiles for the kernels (attached)");
  const int64_t row_bytes = k::element_row_bytes(seg->format, seg->cols);
  const int64_t first_row = (spec.offset - seg->begin) / seg->cols;
  return {seg->blocks.data() + first_row * row_bytes, static_cast<size_t>(spec.numel / seg->cols * row_bytes)};
}

std::span<uint8_t> QuantizedWeights::tensor_bytes(const ParamSpec& spec) {
  const std::span<const uint8_t> held = std::as_const(*this).tensor_bytes(spec);
  return {const_cast<uint8_t*>(held.data()), held.size()};
}

int64_t QuantizedWeights::bytes() const {
  int64_t sum = 0;
  for (const Segment& seg : segments_) sum += static_cast<int64_t>(seg.blocks.size());
  return sum;
}

void QuantizedWeights::quantize_from(std::span<const float> params) {
  if (static_cast<int64_t>(params.size()) != total_)
    fail("quantize_from: ", params.size(), " values for a layout of ", total_);
  if (tiled()) fail("quantize_from: the blocks are arranged in tiles for the kernels (attached)");
  for (Segment& seg : segments_) {
    const int64_t row_bytes = k::element_row_bytes(seg.format, seg.cols);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < seg.rows; ++r)
      k::element_from_f32(seg.format, seg.blocks.data() + r * row_bytes, params.data() + seg.begin + r * seg.cols, seg.cols);
  }
}

void QuantizedWeights::dequantize_into(std::span<float> params) const {
  if (static_cast<int64_t>(params.size()) != total_)
    fail("dequantize_into: ", params.size(), " values for a layout of ", total_);
  for (const Segment& seg : segments_) {
    const int64_t row_bytes = k::element_row_bytes(seg.format, seg.cols);
    if (seg.tiled_rows > 0) {  // rows of blocks first
      std::vector<uint8_t> rows(seg.blocks.size());
      k::quant_copy_rows(rows.data(), seg.weights(), 0, seg.rows);
      k::quant_dequantize_rows(params.data() + seg.begin, {seg.format, rows.data(), seg.rows, seg.cols}, 0, seg.rows);
      continue;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < seg.rows; ++r)
      k::element_to_f32(seg.format, params.data() + seg.begin + r * seg.cols, seg.blocks.data() + r * row_bytes, seg.cols);
  }
}

void QuantizedWeights::attach(Model<float>& model) {
  if (model.layout().total() != total_)
    fail("quantised weights: attached to a model of ", model.layout().total(), " values, the layout has ", total_);
  detach();
  model_ = &model;
  base_ = model.params().data();
  arrange_tiles();
  model.attach_weight_store(this);
}

// The whole tiles of each Q8_0 / Q4_0 segment into the tiled layout, where the kernels
// read it (the rows past the last whole tile stay rows of blocks).
void QuantizedWeights::arrange_tiles() {
  for (Segment& seg : segments_) {
    if (seg.tiled_rows > 0 || !k::quant_tiles_pay(seg.format)) continue;
    const int64_t tiles = seg.rows / k::kQuantTileRows;
    k::quant_tile_rows(seg.format, seg.blocks.data(), tiles, seg.cols);
    seg.tiled_rows = tiles * k::kQuantTileRows;
  }
}

bool QuantizedWeights::tiled() const {
  return std::any_of(segments_.begin(), segments_.end(), [](const Segment& s) { return s.tiled_rows > 0; });
}

void QuantizedWeights::detach() {
  if (!model_) return;
  model_->attach_weight_store(nullptr);
  model_ = nullptr;
  base_ = nullptr;
}

int64_t QuantizedWeights::release_f32() {
  if (!base_) fail("release_f32: the quantised weights are not attached to a model");
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  int64_t released = 0;
  for (Segment& seg : segments_) {
    const auto first = reinterpret_cast<uintptr_t>(base_ + seg.begin);
    const auto last = reinterpret_cast<uintptr_t>(base_ + seg.begin + seg.rows * seg.cols);
    const uintptr_t from = (first + page - 1) / page * page, to = last / page * page;
    if (to <= from) continue;
    if (madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED) != 0)
      fail("release_f32: madvise failed for ", to - from, " bytes");
    released += static_cast<int64_t>(to - from);
  }
  return released;
}

k::Weight<float> QuantizedWeights::weight(const float* values) const {
  k::Weight<float> w(values);
  const bool inside = base_ && values >= base_ && values < base_ + total_;
  if (inside) w.store = this;
  const Segment* seg = inside ? segment_at(values - base_) : nullptr;
  if (!seg) return w;
  const int64_t offset = values - base_ - seg->begin;
  if (offset % seg->cols != 0)
    fail("quantised weights: a weight view starts inside a row of ", seg->cols, " values (element ", offset, ")");
  w.stored = {seg->weights(), offset / seg->cols};
  w.store = this;
  return w;
}

int64_t QuantizedWeights::plain_values(const float* values) const {
  const int64_t offset = values - base_;
  auto next = std::upper_bound(segments_.begin(), segments_.end(), offset,
                               [](int64_t o, const Segment& s) { return o < s.begin; });
  return (next == segments_.end() ? total_ : next->begin) - offset;
}

std::unique_ptr<QuantizedWeights> quantize_model(Model<float>& model, k::ElementType format, bool release_f32) {
  return quantize_model(model, uniform_formats(model.layout(), format), release_f32);
}

std::unique_ptr<QuantizedWeights> quantize_model(Model<float>& model, WeightFormats formats, bool release_f32) {
  auto q = std::make_unique<QuantizedWeights>(model.layout(), std::move(formats));
  q->quantize_from(model.params());
  q->dequantize_into(model.params());
  q->attach(model);
  if (release_f32) q->release_f32();
  return q;
}

}  // namespace gatedlm::model
