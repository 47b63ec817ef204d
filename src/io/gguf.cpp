#include "io/gguf.h"

#include <cstring>
#include <fstream>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/gguf_tables.h"
#include "io/half_float.h"
#include "io/hf_names.h"
#include "io/tokenizer_json.h"
#include "model/param_layout.h"

namespace gatedlm::io {

namespace {

// ggml's tensor types and GGUF's metadata value types (the values the spec assigns).
enum GgmlType : uint32_t { kGgmlF32 = 0, kGgmlF16 = 1 };
enum GgufType : uint32_t {
  kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10
};
constexpr uint64_t kAlignment = 32;

// "{i}" stands for the layer index on both sides.
struct GgufName {
  const char* ours;
  const char* theirs;
};
const GgufName kQwen3Names[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {"model.layers.{i}.input_layernorm.weight", "blk.{i}.attn_norm.weight"},
    {"model.layers.{i}.self_attn.q_proj.weight", "blk.{i}.attn_q.weight"},
    {"model.layers.{i}.self_attn.k_proj.weight", "blk.{i}.attn_k.weight"},
    {"model.layers.{i}.self_attn.v_proj.weight", "blk.{i}.attn_v.weight"},
    {"model.layers.{i}.self_attn.o_proj.weight", "blk.{i}.attn_output.weight"},
    {"model.layers.{i}.self_attn.q_norm.weight", "blk.{i}.attn_q_norm.weight"},
    {"model.layers.{i}.self_attn.k_norm.weight", "blk.{i}.attn_k_norm.weight"},
    {"model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.ffn_norm.weight"},
    {"model.layers.{i}.mlp.gate_proj.weight", "blk.{i}.ffn_gate.weight"},
    {"model.layers.{i}.mlp.up_proj.weight", "blk.{i}.ffn_up.weight"},
    {"model.layers.{i}.mlp.down_proj.weight", "blk.{i}.ffn_down.weight"},
};

// Little-endian serialisation of the spec's primitive values.
class Bytes {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = s_.size();
    s_.resize(at + sizeof(T));
    std::memcpy(s_.data() + at, &v, sizeof(T));
  }
  void str(const std::string& v) {
    put<uint64_t>(v.size());
    s_ += v;
  }
  void key(const std::string& k, GgufType t) {
    str(k);
    put<uint32_t>(t);
    ++count;
  }
  void kv_u32(const std::string& k, uint32_t v) { key(k, kUint32), put(v); }
  void kv_f32(const std::string& k, float v) { key(k, kFloat32), put(v); }
  void kv_bool(const std::string& k, bool v) { key(k, kBool), put<uint8_t>(v ? 1 : 0); }
  void kv_str(const std::string& k, const std::string& v) { key(k, kString), str(v); }
  void kv_strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, kArray);
    put<uint32_t>(kString);
    put<uint64_t>(v.size());
    for (const std::string& s : v) str(s);
  }
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, kArray);
    put<uint32_t>(kInt32);
    put<uint64_t>(v.size());
    for (int32_t x : v) put(x);
  }
  std::string& data() { return s_; }
  uint64_t count = 0;  // key/value pairs written

 private:
  std::string s_;
};

// A vocabulary as llama.cpp's "gpt2" (byte-level BPE) tokenizer wants it: tokens by id,
// their types (1 normal, 3 control = special, 4 user-defined, 5 unused), merges as
// "left right", the model's vocab_size entries in all (ids past the tokenizer's own become
// "[PAD<id>]", unused).
void add_gpt2_vocabulary(Bytes& kv, TokenizerJsonVocabulary v, int64_t vocab_size, const std::string& source) {
  if (static_cast<int64_t>(v.tokens.size()) > vocab_size)
    fail(source, ": the tokenizer has ids up to ", v.tokens.size() - 1, ", outside the model's vocabulary of ", vocab_size);
  using Kind = TokenizerJsonVocabulary::Kind;
  v.tokens.resize(static_cast<size_t>(vocab_size));
  v.kinds.resize(static_cast<size_t>(vocab_size), Kind::unused);
  std::vector<int32_t> types(static_cast<size_t>(vocab_size));
  for (int64_t i = 0; i < vocab_size; ++i) {
    const Kind k = v.kinds[i];
    types[i] = k == Kind::normal ? 1 : k == Kind::special ? 3 : k == Kind::added ? 4 : 5;
    if (k == Kind::unused) v.tokens[i] = cat("[PAD", i, "]");
  }
  kv.kv_str("tokenizer.ggml.model", "gpt2");
  kv.kv_str("tokenizer.ggml.pre", "qwen2");
  kv.kv_strings("tokenizer.ggml.tokens", v.tokens);
  kv.kv_i32s("tokenizer.ggml.token_type", types);
  kv.kv_strings("tokenizer.ggml.merges", v.merges);  // llama.cpp requires the key, even empty
  if (v.document_id >= 0) {
    kv.kv_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.document_id));
    kv.kv_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.document_id));
  }
  kv.kv_bool("tokenizer.ggml.add_bos_token", false);
}

// gatedlm's byte tokenizer (io/tokenizer.h) in the same terms: ids 0..255 are the bytes,
// each a byte-level symbol, with no merges; 256 BOS and 257 EOS are control tokens.
TokenizerJsonVocabulary byte_tokenizer_vocabulary() {
  using Kind = TokenizerJsonVocabulary::Kind;
  TokenizerJsonVocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level_symbol(static_cast<unsigned char>(b)));
  v.kinds.assign(256, Kind::normal);
  v.tokens.insert(v.tokens.end(), {"<|bos|>", "<|eos|>"});
  v.kinds.insert(v.kinds.end(), {Kind::special, Kind::special});
  v.document_id = 257;
  return v;
}

// An MoE layer's tensors under llama.cpp's qwen3moe names: the router as ffn_gate_inp
// [E, d], each kind of expert matrix stacked over the experts as ffn_{gate,up,down}_exps
// [E, rows, cols]. Returns false for a name that is not an MoE tensor.
bool add_moe_tensor(std::vector<GgufTensor>& out, std::map<std::string, size_t>& stacked, const model::ParamSpec& s) {
  const auto [generic, layer] = generic_name(s.name);
  const std::string mlp = "model.layers.{i}.mlp.", blk = "blk." + layer + ".";
  if (generic.rfind(mlp, 0) != 0) return false;
  const std::string rest = generic.substr(mlp.size());
  if (rest == "gate.weight") {
    out.push_back({blk + "ffn_gate_inp.weight", s.shape, {&s}});
    return true;
  }
  if (rest.rfind("experts.", 0) != 0) return false;
  const std::string kind = rest.substr(rest.find('.', 8) + 1);  // "gate_proj.weight", ...
  const std::string name = blk + "ffn_" + kind.substr(0, kind.find('_')) + "_exps.weight";
  auto [it, fresh] = stacked.try_emplace(name, out.size());
  if (fresh) out.push_back({name, {0, s.shape[0], s.shape[1]}, {}});
  GgufTensor& t = out[it->second];
  t.parts.push_back(&s);
  t.shape[0] = static_cast<int64_t>(t.parts.size());
  return true;
}

}  // namespace

std::vector<GgufTensor> gguf_tensors(const model::ParamLayout& layout) {
  std::vector<GgufTensor> out;
  std::map<std::string, size_t> stacked;
  for (const model::ParamSpec& s : layout.specs())
    if (!add_moe_tensor(out, stacked, s)) out.push_back({gguf_tensor_name(s.name), s.shape, {&s}});
  return out;
}

std::string gguf_architecture(const model::ModelConfig& c) { return c.moe.enabled() ? "qwen3moe" : "qwen3"; }

const std::vector<GgufIntKey>& gguf_int_keys() {
  using C = model::ModelConfig;
  using M = model::MoeConfig;
  static const std::vector<GgufIntKey> keys{
      {"context_length", &C::max_seq_len, nullptr},
      {"embedding_length", &C::d_model, nullptr},
      {"block_count", &C::n_layers, nullptr},
      {"feed_forward_length", &C::ffn_hidden, nullptr},
      {"attention.head_count", &C::n_heads, nullptr},
      {"attention.head_count_kv", &C::n_kv_heads, nullptr},
      {"attention.key_length", &C::head_dim, nullptr},
      {"attention.value_length", &C::head_dim, nullptr},
      {"expert_count", nullptr, &M::n_experts},
      {"expert_used_count", nullptr, &M::top_k},
      {"expert_feed_forward_length", nullptr, &M::expert_hidden},
      {"vocab_size", &C::vocab_size, nullptr},
  };
  return keys;
}

const std::vector<GgufFloatKey>& gguf_float_keys() {
  using C = model::ModelConfig;
  static const std::vector<GgufFloatKey> keys{{"rope.freq_base", &C::rope_base},
                                              {"attention.layer_norm_rms_epsilon", &C::norm_eps}};
  return keys;
}

std::string gguf_tensor_name(const std::string& name) {
  const auto [generic, layer] = generic_name(name);
  for (const GgufName& n : kQwen3Names)
    if (generic == n.ours) {
      std::string out = n.theirs;
      const size_t at = out.find("{i}");
      if (at != std::string::npos) out.replace(at, 3, layer);
      return out;
    }
  fail("gguf (qwen3): no GGUF tensor for gatedlm parameter ", name);
}

namespace {

// Refuses, by config key, what llama.cpp's qwen3 / qwen3moe architectures cannot run.
void check_exportable(const model::ModelConfig& c) {
  auto refuse = [](const std::string& key, const std::string& why) {
    fail("export --format gguf: model config key \"", key, "\" ", why);
  };
  if (c.has_gate())
    refuse("gate", "must be none: llama.cpp's qwen3 architecture has no gate on the attention output, so a gated "
                   "model cannot run there (use --format paper)");
  if (c.attn_qkv_bias || c.attn_o_bias) refuse("attn_qkv_bias", "must be false (llama.cpp's qwen3 has no attention biases)");
  if (!c.qk_norm) refuse("qk_norm", "must be true (qwen3 normalises q and k)");
  if (c.rope_dims != c.head_dim) refuse("rope_dims", "must equal head_dim");
  if (c.rope_scaling.type != model::RopeScalingType::none) refuse("rope_scaling", "must be none");
  if (c.sdpa_transform != model::SdpaTransform::none) refuse("sdpa_transform", "must be none");
  if (c.sandwich_norm) refuse("sandwich_norm", "must be false");
  if (c.residual_clip != 0.0) refuse("residual_clip", "must be 0");
  if (c.switch_heads.on()) refuse("switch_heads", "must be absent (llama.cpp's qwen3 has no switch heads)");
  if (c.moe.enabled()) {
    if (c.moe.every != 1) refuse("moe.every", "must be 1 (llama.cpp's qwen3moe makes every layer sparse)");
    if (c.moe.n_shared > 0) refuse("moe.n_shared", "must be 0 (llama.cpp's qwen3moe has no shared expert)");
    if (!c.moe.norm_topk_prob)
      refuse("moe.norm_topk_prob", "must be true (llama.cpp's qwen3moe renormalises the chosen experts' weights)");
  }
}

// The key/value metadata: qwen3, or qwen3moe for MoE models (the same keys under the
// architecture's prefix), and the vocabulary.
Bytes gguf_metadata(const model::ModelConfig& c, GgufDtype dtype, const std::string& tokenizer) {
  const std::string arch = gguf_architecture(c);
  const auto key = [&](const char* k) { return arch + "." + k; };
  Bytes kv;
  kv.kv_str("general.architecture", arch);
  kv.kv_str("general.name", "gatedlm export");
  kv.kv_u32("general.alignment", kAlignment);
  kv.kv_u32("general.file_type", dtype == GgufDtype::f32 ? 0 : 1);  // all F32 / mostly F16
  for (const GgufIntKey& k : gguf_int_keys())  // the config's numbers (io/gguf_tables.h)
    if (k.field || c.moe.enabled()) kv.kv_u32(key(k.key), static_cast<uint32_t>(gguf_field(c, k)));
  for (const GgufFloatKey& k : gguf_float_keys()) kv.kv_f32(key(k.key), static_cast<float>(c.*k.field));
  if (tokenizer == kByteVocabulary) {
    add_gpt2_vocabulary(kv, byte_tokenizer_vocabulary(), c.vocab_size, "the byte tokenizer");
    kv.kv_u32("tokenizer.ggml.bos_token_id", 256);
  } else {
    add_gpt2_vocabulary(kv, read_tokenizer_json_vocabulary(tokenizer), c.vocab_size, tokenizer);
  }
  return kv;
}

// A tensor and where its data starts, relative to the data section.
struct PlacedTensor {
  const GgufTensor* tensor;
  bool f16;
  uint64_t offset;
};

// The tensor infos (matrices in the chosen type, 1-D tensors such as norms always F32),
// appending each tensor's place to `placed`.
Bytes gguf_tensor_infos(const std::vector<GgufTensor>& tensors, GgufDtype dtype, std::vector<PlacedTensor>& placed) {
  Bytes infos;
  uint64_t offset = 0;
  for (const GgufTensor& t : tensors) {
    const bool f16 = dtype == GgufDtype::f16 && t.shape.size() >= 2;
    int64_t numel = 0;
    for (const model::ParamSpec* part : t.parts) numel += part->numel;
    infos.str(t.name);
    infos.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) infos.put<uint64_t>(static_cast<uint64_t>(*it));
    infos.put<uint32_t>(f16 ? kGgmlF16 : kGgmlF32);
    infos.put<uint64_t>(offset);
    placed.push_back({&t, f16, offset});
    offset += (static_cast<uint64_t>(numel) * (f16 ? 2 : 4) + kAlignment - 1) / kAlignment * kAlignment;
  }
  return infos;
}

// Appends one part of a tensor (F32 values) to `bytes` as F16 or F32.
void append_values(std::string& bytes, const float* v, int64_t n, bool f16) {
  if (!f16) {
    bytes.append(reinterpret_cast<const char*>(v), static_cast<size_t>(n) * 4);
    return;
  }
  const size_t at = bytes.size();
  bytes.resize(at + static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t x = f32_to_f16(v[i]);
    std::memcpy(bytes.data() + at + 2 * i, &x, 2);
  }
}

// The data section: each tensor at its offset, padded to the alignment.
void write_tensor_data(AtomicFile& file, const std::vector<PlacedTensor>& placed, const std::vector<float>& params) {
  std::string bytes;
  uint64_t written = 0;
  for (const PlacedTensor& p : placed) {
    bytes.assign(static_cast<size_t>(p.offset - written), '\0');  // the previous tensor's padding
    written = p.offset;
    for (const model::ParamSpec* part : p.tensor->parts) {
      append_values(bytes, params.data() + part->offset, part->numel, p.f16);
      written += static_cast<uint64_t>(part->numel) * (p.f16 ? 2 : 4);
    }
    file.write(bytes);
    bytes.clear();
  }
  const uint64_t end = (written + kAlignment - 1) / kAlignment * kAlignment;
  bytes.assign(static_cast<size_t>(end - written), '\0');
  file.write(bytes);
}

}  // namespace

void export_gguf(const Checkpoint& ck, GgufDtype dtype, const std::string& tokenizer, const std::string& path) {
  const model::ModelConfig& c = ck.config;
  check_exportable(c);
  Bytes kv = gguf_metadata(c, dtype, tokenizer);
  const model::ParamLayout layout(c);
  const std::vector<GgufTensor> tensors = gguf_tensors(layout);
  std::vector<PlacedTensor> placed;
  Bytes infos = gguf_tensor_infos(tensors, dtype, placed);

  Bytes head;
  head.put<uint32_t>(0x46554747);  // "GGUF" read as a little-endian uint32
  head.put<uint32_t>(3);
  head.put<uint64_t>(placed.size());
  head.put<uint64_t>(kv.count);
  std::string& h = head.data();
  h += kv.data();
  h += infos.data();
  h.append((kAlignment - h.size() % kAlignment) % kAlignment, '\0');
  AtomicFile file(path);
  file.write(h);
  write_tensor_data(file, placed, ck.params);
  file.commit();
}

}  // namespace gatedlm::io
