#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/gguf_format.h"
#include "io/gguf_tables.h"
#include "io/gguf_tokenizer.h"
#include "io/tokenizer_json.h"
#include "model/param_layout.h"

namespace gatedlm::io {

namespace {

constexpr uint64_t kAlignment = kGgufDefaultAlignment;  // what the files it writes declare

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
  void key(const std::string& k, GgufValueType t) {
    str(k);
    put<uint32_t>(t);
    ++count;
  }
  void kv_u32(const std::string& k, uint32_t v) { key(k, kGgufUint32), put(v); }
  void kv_f32(const std::string& k, float v) { key(k, kGgufFloat32), put(v); }
  void kv_bool(const std::string& k, bool v) { key(k, kGgufBool), put<uint8_t>(v ? 1 : 0); }
  void kv_str(const std::string& k, const std::string& v) { key(k, kGgufString), str(v); }
  void kv_strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, kGgufArray);
    put<uint32_t>(kGgufString);
    put<uint64_t>(v.size());
    for (const std::string& s : v) str(s);
  }
  void kv_bools(const std::string& k, const std::vector<bool>& v) {
    key(k, kGgufArray);
    put<uint32_t>(kGgufBool);
    put<uint64_t>(v.size());
    for (bool x : v) put<uint8_t>(x ? 1 : 0);
  }
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, kGgufArray);
    put<uint32_t>(kGgufInt32);
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
  kv.kv_str("tokenizer.ggml.pre", llama_pre_tokenizer_name(v, source));  // as llama.cpp must split the text
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

[[noreturn]] void refuse(const std::string& key, const std::string& why) {
  fail("export --format gguf: model config key \"", key, "\" ", why);
}

// The registered architectures (io/model_family.h) that fit: all, or those of one gate.
std::vector<std::string> architecture_names(std::optional<bool> gated = std::nullopt,
                                            std::optional<bool> moe = std::nullopt) {
  std::vector<std::string> names;
  for (const GgufArchitecture* a : gguf_architectures())
    if ((!gated || a->gated == *gated) && (!moe || a->moe == *moe)) names.push_back(a->name);
  return names;
}

// "qwen35, qwen35moe, qwen3next": the G1-gated hybrid architectures.
std::string hybrid_architectures() {
  const std::vector<std::string> names = architecture_names(true);
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The paper's G1 gate as llama.cpp's qwen35 computes it: attn * sigmoid(h W_gate^T), one
// score per element of the SDPA output, W_gate reading all of the normed hidden state h.
// Every other variant is refused by the key that makes it differ, naming the variant.
void check_qwen35_gate(const model::ModelConfig& c) {
  const model::GateConfig& g = c.gate;
  const std::string why = "is part of the gate " + model::describe_gate(c) +
                          ", which has no llama.cpp form: llama.cpp's qwen35 computes only G1 (sdpa, elementwise, "
                          "sigmoid, multiply, reading all of d_model)";
  if (g.position != model::GatePosition::sdpa) refuse("gate.position", why);
  if (g.granularity != model::GateGranularity::elementwise) refuse("gate.granularity", why);
  if (g.head_shared) refuse("gate.head_shared", why);
  if (g.activation != kernels::Activation::sigmoid) refuse("gate.activation", why);
  if (g.combine != model::GateCombine::multiply) refuse("gate.combine", why);
  if (g.input != model::GateInput::hidden) refuse("gate.input", why);
  if (c.gate_in() != c.d_model) refuse("gate.input_dims", why);
}

// Set to write a G1-gated model whose layers are all full attention as qwen35 anyway, to
// re-check a newer llama.cpp (tests/reference/test_gguf_llama.py does, expecting the abort
// below while the pinned llama.cpp has it).
constexpr const char* kForceAllFullQwen35 = "GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35";

// Set to write qwen3next's linear layers in the older fused form (ssm_in), which llama.cpp
// still reads and gatedlm imports: tests/reference/test_gguf_llama.py checks both readings.
constexpr const char* kQwen3NextSsmIn = "GATEDLM_GGUF_QWEN3NEXT_SSM_IN";

// llama.cpp computes the G1 gate only in qwen35 / qwen35moe / qwen3next, hybrid
// architectures whose graph reads a recurrent state even when no layer is recurrent.
void check_llama_runs_all_full_attention(const model::ModelConfig& c) {
  if (c.has_linear() || std::getenv(kForceAllFullQwen35)) return;
  refuse("gate", "is " + model::describe_gate(c) + " in a model whose layers are all full attention: llama.cpp has "
         "this gate only in its hybrid architectures (" + hybrid_architectures() + "), and these cannot run a model "
         "without Gated DeltaNet layers: llama.cpp (node-llama-cpp 3.22.1, commit 0ad4a86) aborts in llama_decode "
         "with GGML_ASSERT(buffer) in llm_graph_input_mem_hybrid::set_input, the recurrent-state input being left "
         "unallocated (bench/RESULTS.md, \"GGUF export of gated models\"). Export it with --format paper instead");
}

// Refuses, by config key, what llama.cpp's qwen3 / qwen3moe (ungated) and qwen35 /
// qwen35moe / qwen3next (G1-gated) architectures cannot run.
void check_exportable(const model::ModelConfig& c, const std::string& arch) {
  if (c.has_gate()) {
    check_qwen35_gate(c);
    check_llama_runs_all_full_attention(c);
  } else if (c.has_linear()) {
    refuse("gate", "is none in a model with Gated DeltaNet layers: llama.cpp's hybrid architectures (" +
                       hybrid_architectures() + ") gate every full-attention layer with G1 (sdpa, elementwise, sigmoid)");
  }
  if (c.has_linear() && c.linear_attention.k_head_dim != c.linear_attention.v_head_dim)
    refuse("linear_attention.v_head_dim", "must equal k_head_dim (llama.cpp's " + arch + " sizes both by ssm.state_size)");
  if (c.attn_qkv_bias || c.attn_o_bias)
    refuse(c.attn_qkv_bias ? "attn_qkv_bias" : "attn_o_bias", "must be false (llama.cpp's " + arch + " has no attention biases)");
  if (!c.qk_norm) refuse("qk_norm", "must be true (llama.cpp's " + arch + " normalises q and k)");
  if (c.rope_dims != c.head_dim && !c.has_gate())
    refuse("rope_dims", "must equal head_dim (llama.cpp's " + arch + " rotates whole heads)");
  if (c.rope_scaling.type != model::RopeScalingType::none) refuse("rope_scaling", "must be none");
  if (c.sdpa_transform != model::SdpaTransform::none) refuse("sdpa_transform", "must be none");
  if (c.sandwich_norm) refuse("sandwich_norm", "must be false");
  if (c.residual_clip != 0.0) refuse("residual_clip", "must be 0");
  if (c.sliding_layers() > 0)
    refuse("layer_types", "has sliding_attention layers (llama.cpp's " + arch + " has no sliding windows)");
  if (c.attention_normalizer != model::AttentionNormalizer::softmax)
    refuse("attention_normalizer", "must be softmax (llama.cpp's " + arch + " has no other)");
  if (c.attention_sinks)  // llama.cpp reads attn_sinks for gpt-oss only
    refuse("attention_sinks", "must be false (llama.cpp's " + arch + " has no learned sink logits)");
  if (c.switch_heads.on()) refuse("switch_heads", "must be absent (llama.cpp's " + arch + " has no switch heads)");
  if (c.moe.enabled()) {
    if (c.moe.every != 1) refuse("moe.every", "must be 1 (llama.cpp's " + arch + " makes every layer sparse)");
    if (c.moe.n_shared > 0 && !c.has_gate())
      refuse("moe.n_shared", "must be 0 (llama.cpp's " + arch + " has no shared expert)");
    if (!c.moe.norm_topk_prob)
      refuse("moe.norm_topk_prob", "must be true (llama.cpp's " + arch + " renormalises the chosen experts' weights)");
  }
}

// The key/value metadata: the config's numbers under the architecture's prefix
// (io/gguf_tables.h), the vocabulary and the chat template (none when empty).
Bytes gguf_metadata(const model::ModelConfig& c, const std::string& arch, const model::WeightRecipe& recipe,
                    const std::string& tokenizer, const std::string& chat_template) {
  const auto key = [&](const char* k) { return arch + "." + k; };
  Bytes kv;
  kv.kv_str("general.architecture", arch);
  kv.kv_str("general.name", "gatedlm export");
  kv.kv_u32("general.alignment", kAlignment);
  kv.kv_u32("general.file_type", recipe.llama_ftype);  // llama.cpp's LLAMA_FTYPE
  kv.kv_bool(kGgufNormZeroCenteredKey, c.norm_zero_centered);  // llama.cpp's norms are plain either way
  for (const GgufIntKey& k : gguf_int_keys())  // the config's numbers (io/gguf_tables.h)
    if (k.field || c.moe.enabled()) kv.kv_u32(key(k.key), static_cast<uint32_t>(gguf_field(c, k)));
  for (const GgufFloatKey& k : gguf_float_keys()) kv.kv_f32(key(k.key), static_cast<float>(c.*k.field));
  for (const GgufArchKey& k : gguf_arch_keys(c, arch)) {
    if (const auto* v = std::get_if<uint32_t>(&k.value)) kv.kv_u32(key(k.key.c_str()), *v);
    if (const auto* v = std::get_if<std::vector<int32_t>>(&k.value)) kv.kv_i32s(key(k.key.c_str()), *v);
    if (const auto* v = std::get_if<std::vector<bool>>(&k.value)) kv.kv_bools(key(k.key.c_str()), *v);
  }
  if (tokenizer == kByteVocabulary) {
    add_gpt2_vocabulary(kv, byte_tokenizer_vocabulary(), c.vocab_size, "the byte tokenizer");
    kv.kv_u32("tokenizer.ggml.bos_token_id", 256);
  } else {
    add_gpt2_vocabulary(kv, read_tokenizer_json_vocabulary(tokenizer), c.vocab_size, tokenizer);
  }
  if (!chat_template.empty()) kv.kv_str(kGgufChatTemplateKey, chat_template);
  return kv;
}

// A tensor, the ggml type its values are stored in, and where its data starts, relative to
// the data section.
struct PlacedTensor {
  const GgufTensor* tensor;
  kernels::ElementType type;
  uint64_t offset;
};

// The tensor infos, each tensor in its type (`types`, io/gguf_encode.h), appending each
// tensor's place to `placed`.
Bytes gguf_tensor_infos(const std::vector<GgufTensor>& tensors, const std::vector<kernels::ElementType>& types,
                        std::vector<PlacedTensor>& placed) {
  Bytes infos;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensor& t = tensors[i];
    const kernels::ElementType type = types[i];
    const int64_t numel = t.numel();
    infos.str(t.name);
    infos.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) infos.put<uint64_t>(static_cast<uint64_t>(*it));
    infos.put<uint32_t>(static_cast<uint32_t>(type));
    infos.put<uint64_t>(offset);
    placed.push_back({&t, type, offset});
    const auto bytes = static_cast<uint64_t>(numel / t.shape.back() * kernels::element_row_bytes(type, t.shape.back()));
    offset += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  return infos;
}

// Appends a tensor's values encoded as `type`, run by run (io/gguf_tables.h), in whole rows:
// `pending` holds what has not made a whole row yet.
void encode_tensor(std::string& bytes, const GgufTensor& t, kernels::ElementType type, const std::vector<float>& params) {
  const int64_t k = t.shape.back();
  std::vector<float> pending;
  for (const GgufRun& run : t.runs) {
    const size_t at = pending.size();
    if (run.spec) {
      const float* src = params.data() + run.spec->offset + run.begin;
      pending.insert(pending.end(), src, src + run.count);
    } else {
      pending.resize(at + static_cast<size_t>(run.count), 0.0f);
    }
    for (size_t i = at; i < pending.size(); ++i)
      if (t.values == GgufValues::plus_one) pending[i] += 1.0f;
      else if (t.values == GgufValues::minus_exp) pending[i] = -std::exp(pending[i]);
    const auto rows = static_cast<int64_t>(pending.size()) / k;
    encode_ggml_rows(bytes, pending.data(), rows, k, type);
    pending.erase(pending.begin(), pending.begin() + rows * k);
  }
  if (!pending.empty()) fail("gguf: tensor ", t.name, ": ", pending.size(), " values past its last whole row");
}

// The data section: each tensor at its offset, padded to the alignment.
void write_tensor_data(AtomicFile& file, const std::vector<PlacedTensor>& placed, const std::vector<float>& params) {
  std::string bytes;
  uint64_t written = 0;
  for (const PlacedTensor& p : placed) {
    const auto padding = static_cast<size_t>(p.offset - written);  // the previous tensor's
    bytes.assign(padding, '\0');
    encode_tensor(bytes, *p.tensor, p.type, params);
    written = p.offset + (bytes.size() - padding);
    file.write(bytes);
    bytes.clear();
  }
  const uint64_t end = (written + kAlignment - 1) / kAlignment * kAlignment;
  bytes.assign(static_cast<size_t>(end - written), '\0');
  file.write(bytes);
}

}  // namespace

std::string resolve_gguf_architecture(const model::ModelConfig& c, const std::string& requested) {
  const std::string chosen = gguf_architecture(c);
  if (requested == "auto" || requested == chosen) return chosen;
  const std::string flag = "export --gguf-arch " + requested + ": ";
  const ModelFamily* family = find_gguf_family(requested);
  if (!family) {
    std::vector<std::string> known = architecture_names();
    known.insert(known.begin(), "auto");
    fail(flag, "unknown architecture (", join_names(known, "or"), ")");
  }
  const GgufArchitecture& a = *family->gguf;
  if (a.gated != c.has_gate())
    fail(flag, "the model's gate is ", model::describe_gate(c), "; llama.cpp's ", requested,
         c.has_gate() ? " has no output gate (use " + join_names(architecture_names(true), "or") + ")"
                      : " gates every full-attention layer with G1");
  if (a.moe && !c.moe.enabled())
    fail(flag, "the model has no \"moe\" FFN; llama.cpp's ", requested, " has MoE FFNs only",
         a.without_moe ? cat(" (", a.without_moe, "): export it as ", chosen) : "");
  if (!a.moe && c.moe.enabled())
    fail(flag, "the model's FFN is MoE; llama.cpp's ", requested, " has dense FFNs only (use ",
         join_names(architecture_names(c.has_gate(), true), "or"), ")");
  return requested;
}

std::string gguf_architecture_help() {
  std::string out = "auto (";
  for (const GgufArchitecture* a : gguf_architectures())
    if (a->chosen_by_auto)
      out += cat(out.back() == '(' ? "" : ", ", a->name, a->gated ? " gated" : " ungated", a->moe ? " MoE" : " dense");
  return out + ") | " + gguf_architecture_names(" | ");
}

void export_gguf(const Checkpoint& ck, kernels::ElementType dtype, const std::string& tokenizer, const std::string& path,
                 const std::string& architecture) {
  export_gguf(ck, model::uniform_recipe(dtype), tokenizer, path, architecture);
}

void export_gguf(const Checkpoint& ck, const model::WeightRecipe& recipe, const std::string& tokenizer,
                 const std::string& path, const std::string& architecture, const std::string& chat_template) {
  const model::ModelConfig& c = ck.config;
  const std::string arch = resolve_gguf_architecture(c, architecture);
  check_exportable(c, arch);
  Bytes kv = gguf_metadata(c, arch, recipe, tokenizer, chat_template);
  const model::ParamLayout layout(c);
  const bool ssm_in = gguf_traits(arch).grouped_linear_inputs && std::getenv(kQwen3NextSsmIn);
  const std::vector<GgufTensor> tensors = gguf_tensors(layout, c, arch, ssm_in);
  std::vector<PlacedTensor> placed;
  Bytes infos = gguf_tensor_infos(tensors, gguf_tensor_types(tensors, c, recipe), placed);

  Bytes head;
  head.put<uint32_t>(kGgufMagic);
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
