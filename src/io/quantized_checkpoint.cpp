#include "io/quantized_checkpoint.h"

#include <filesystem>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace gatedlm::io {

namespace fs = std::filesystem;
namespace k = kernels;

kernels::ElementType parse_quant_format(const std::string& text, const std::string& flag) {
  std::vector<k::ElementType> multiplied;  // the types the products read as they are stored
  for (const k::ElementTraits& t : k::element_types())
    if (t.products) multiplied.push_back(t.type);
  return k::parse_element_type(text, flag, multiplied);
}

std::optional<std::string> checkpoint_quant_format(const std::string& path) {
  const fs::path weights = fs::path(resolve_checkpoint_dir(path)) / "model.safetensors";
  if (!fs::exists(weights)) return std::nullopt;
  const SafetensorsReader reader(weights.string());
  const auto it = reader.metadata().find(kQuantizedKey);
  if (it == reader.metadata().end()) return std::nullopt;
  const bool plain = !it->second.empty() && it->second.size() <= 32 &&
                     it->second.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
  if (!plain) fail(weights.string(), ": metadata ", kQuantizedKey, " is not a weight format's name (a-z, 0-9, _)");
  return it->second;
}

namespace {

// How a tensor is stored in a quantised checkpoint: dtype, shape and bytes.
HeaderEntry stored_entry(const model::ParamSpec& spec, std::optional<k::ElementType> format) {
  if (!format) return {spec.name, "F32", spec.shape, static_cast<uint64_t>(spec.numel) * 4};
  const int64_t cols = spec.shape.back(), rows = spec.numel / cols;
  const auto bytes = static_cast<uint64_t>(rows * k::element_row_bytes(*format, cols));
  if (*format == k::ElementType::bf16) return {spec.name, "BF16", spec.shape, bytes};
  return {spec.name, "U8", {rows, k::element_row_bytes(*format, cols)}, bytes};
}


bool is_weight_matrix(const model::ParamSpec& spec) {
  return spec.shape.size() >= 2 && (spec.kind == model::ParamKind::matrix || spec.kind == model::ParamKind::gate ||
                                    spec.kind == model::ParamKind::embedding || spec.kind == model::ParamKind::lm_head);
}

}  // namespace

QuantizeSummary save_quantized_checkpoint(const std::string& out_dir, const model::ModelConfig& config,
                                          std::span<const float> params, const model::WeightFormats& formats) {
  const model::ParamLayout layout(config);
  if (static_cast<int64_t>(params.size()) != layout.total())
    fail("save_quantized_checkpoint: ", params.size(), " parameters given, the config needs ", layout.total());
  model::QuantizedWeights blocks(layout, formats);
  blocks.quantize_from(params);
  return save_quantized_checkpoint(out_dir, config, params, blocks);
}

QuantizeSummary save_quantized_checkpoint(const std::string& out_dir, const model::ModelConfig& config,
                                          std::span<const float> params, const model::QuantizedWeights& blocks) {
  const model::ParamLayout layout(config);
  if (static_cast<int64_t>(params.size()) != layout.total())
    fail("save_quantized_checkpoint: ", params.size(), " parameters given, the config needs ", layout.total());
  QuantizeSummary summary;
  std::vector<HeaderEntry> entries;
  nlohmann::ordered_json recorded = nlohmann::ordered_json::object();
  for (const model::ParamSpec& spec : layout.specs()) {
    const std::optional<k::ElementType> f = blocks.formats().of(spec);
    entries.push_back(stored_entry(spec, f));
    summary.f32_bytes += spec.numel * 4;
    summary.written_bytes += static_cast<int64_t>(entries.back().bytes);
    if (f) recorded[spec.name] = k::element_name(*f);
    (f ? summary.quantized_tensors : summary.f32_tensors) += 1;
    if (!f && is_weight_matrix(spec) && spec.shape.back() % k::kQuantBlockValues != 0)
      summary.narrow_matrices.push_back(spec.name);
  }
  const bool created = !fs::exists(out_dir);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(out_dir, ": cannot create the checkpoint directory (", ec.message(), ")");
  try {
    const std::string weights_path = (fs::path(out_dir) / "model.safetensors").string();
    AtomicFile weights(weights_path);
    write_safetensors_header(weights, weights_path, entries,
                             {{"format", "pt"}, {kQuantizedKey, blocks.formats().name},
                              {kTensorFormatsKey, recorded.dump()}});
    for (const model::ParamSpec& spec : layout.specs()) {
      if (blocks.formats().of(spec)) {
        const std::span<const uint8_t> b = blocks.tensor_bytes(spec);
        weights.write(b.data(), b.size());
      } else {
        weights.write(params.data() + spec.offset, static_cast<size_t>(spec.numel) * 4);
      }
    }
    AtomicFile config_file((fs::path(out_dir) / "config.json").string());
    config_file.write(model::config_to_json(config).dump(2) + "\n");
    weights.commit();
    config_file.commit();
  } catch (...) {
    if (created) fs::remove_all(out_dir, ec);
    throw;
  }
  return summary;
}

namespace {

// The recorded formats {tensor: format} of a quantised checkpoint, named `name`; each a type
// the products read (QuantizedWeights checks them against the layout).
model::WeightFormats recorded_formats(const SafetensorsReader& reader, const std::string& name) {
  const auto it = reader.metadata().find(kTensorFormatsKey);
  if (it == reader.metadata().end()) fail(reader.path(), ": no ", kTensorFormatsKey, " in the header's metadata");
  nlohmann::json recorded;
  try {
    recorded = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    fail(reader.path(), ": metadata ", kTensorFormatsKey, " is not valid JSON (", e.what(), ")");
  }
  if (!recorded.is_object()) fail(reader.path(), ": metadata ", kTensorFormatsKey, " is not a JSON object");
  model::WeightFormats formats{name, {}};
  for (const auto& [tensor, type] : recorded.items()) {
    const std::string where = cat(reader.path(), ": ", kTensorFormatsKey, " of tensor ", tensor);
    if (!type.is_string()) fail(where, " is not a string");
    formats.tensors.emplace(tensor, parse_quant_format(type.get<std::string>(), where));
  }
  if (formats.tensors.empty()) fail(reader.path(), ": ", kTensorFormatsKey, " lists no tensor");
  return formats;
}

// Reads every tensor of a quantised checkpoint: F32 ones into params, the others into the
// blocks (checked finite, a few rows at a time; params is not written there).
void read_quantized_tensors(const SafetensorsReader& reader, const model::ParamLayout& layout,
                            model::QuantizedWeights& blocks, std::span<float> params) {
  for (const auto& [name, entry] : reader.tensors())
    if (!layout.find(name)) fail(reader.path(), ": unexpected tensor ", name, " (the config has no such parameter)");
  for (const model::ParamSpec& spec : layout.specs()) {
    if (!reader.has(spec.name)) fail(reader.path(), ": missing tensor ", spec.name);
    const std::optional<k::ElementType> f = blocks.formats().of(spec);
    const HeaderEntry want = stored_entry(spec, f);
    if (reader.entry(spec.name).shape != want.shape)
      fail(reader.path(), ": tensor ", spec.name, " has the wrong shape for ", f ? k::element_name(*f) : "F32",
           " (", want.bytes, " bytes expected)");
    const std::string where = cat(reader.path(), ": tensor ", spec.name);
    if (f) {
      const std::span<uint8_t> b = blocks.tensor_bytes(spec);
      reader.read_bytes(spec.name, want.dtype, b.data(), b.size());
      require_finite_rows(*f, b.data(), spec.numel / spec.shape.back(), spec.shape.back(), where);
    } else {
      reader.read_f32(spec.name, params.data() + spec.offset, spec.numel);
      require_finite(params.data() + spec.offset, spec.numel, where);
    }
  }
}

}  // namespace

CheckpointModel read_checkpoint_model(const std::string& checkpoint_dir, bool release_f32) {
  CheckpointModel out;
  const model::ModelConfig config = load_checkpoint_config(checkpoint_dir);
  out.model = std::make_unique<model::Model<float>>(config);
  const std::optional<std::string> name = checkpoint_quant_format(checkpoint_dir);
  if (!name) {
    load_checkpoint_weights(checkpoint_dir, config, out.model->params());
    return out;
  }
  const SafetensorsReader reader((fs::path(checkpoint_dir) / "model.safetensors").string());
  const model::ParamLayout& layout = out.model->layout();
  try {
    out.quantized = std::make_unique<model::QuantizedWeights>(layout, recorded_formats(reader, *name));
  } catch (const Error& e) {
    fail(reader.path(), ": ", e.what());
  }
  read_quantized_tensors(reader, layout, *out.quantized, out.model->params());
  if (!release_f32) out.quantized->dequantize_into(out.model->params());
  out.quantized->attach(*out.model);
  if (release_f32) out.quantized->release_f32();
  return out;
}

}  // namespace gatedlm::io
