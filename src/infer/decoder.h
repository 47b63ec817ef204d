#pragma once
// Prefill and decode: runs the model's own blocks (model::Model::forward_tokens) over
// new tokens of several sequences at once, with each block's attention over a KvCache.
// Which layers keep what is the layer kinds' answer (model/layer_kinds.h): KV cache rows for
// the kv_cache kinds (W rows for a kind with a kv_window W), a RecurrentState for the
// recurrent ones, nothing for the others.
//
// A step takes chunks (slot, tokens): a chunk continues its slot's sequence. A chunk of
// several tokens (a prompt, or the rest of one) runs the fused attention kernel of training
// over its rows; every other row (decode, or a streaming window that wraps) runs the decode
// attention over the cache. A chunk that continues a slot in a full cache runs the fused
// kernel over all the slot's rows, earlier queries zero: its rows get the bits of the
// prompt run in one go, which lets serve restore a cached prefix exactly (prefix_cache.h).
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "infer/kv_cache.h"
#include "infer/recurrent_state.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "model/model.h"

namespace gatedlm::infer {

struct Chunk {
  int64_t slot;
  std::span<const int32_t> tokens;
};

struct DecoderOptions {
  int64_t slots = 1;     // sequences at once
  int64_t capacity = 0;  // full cache: tokens per sequence (0 = the model's max_seq_len)
  int64_t window = 0;    // > 0: streaming window of the last `window` tokens ...
  int64_t sinks = 0;     // ... plus the first `sinks`
  // Decode steps of more than kernels::kSkinnyRows sequences multiply by copies of the
  // weight matrices in oneDNN's blocked layout, or on AVX2 in panels of 8 rows up to 8
  // sequences (kernels::PackedWeights: 1.5x faster products at 8 rows, 1.3-2.1x more on
  // AVX2; as much memory again as the weights, made at the first such step; on AVX2 twice
  // that when steps of both 5-8 and more than 8 sequences run, as serve --max-batch > 8 can).
  bool packed_weights = true;
  // The KV cache's rows: f32, f16 (half the memory, half the bytes each decode step reads at
  // long context) or q8_0 (0.27 of f32's bytes; head_dim a multiple of 32); attention
  // computes in fp32 on the rounded rows: infer/kv_cache.h.
  kernels::ElementType kv_type = kernels::ElementType::f32;
};

class Decoder {
 public:
  Decoder(model::Model<float>& model, const DecoderOptions& options);

  const model::ModelConfig& config() const { return model_.config(); }
  // The cache of the layers that see every earlier key (or the options' streaming window).
  const KvCache& cache() const { return caches_.front(); }
  // Decode state per sequence: the KV cache rows of the softmax layers at `tokens` tokens
  // plus the linear layers' constant recurrent state, in bytes.
  int64_t state_bytes_per_sequence(int64_t tokens) const;
  const kernels::PackedWeights& packed_weights() const { return packed_; }
  int64_t slots() const { return cache().geometry().slots; }
  // Tokens each slot holds in a full cache (prompt and generated); unbounded when streaming.
  int64_t capacity() const { return cache().geometry().streaming() ? INT64_MAX : cache().geometry().capacity; }
  int64_t length(int64_t slot) const { return length_[slot]; }
  void reset(int64_t slot) { length_[slot] = 0; }

  // Runs the chunks (distinct slots) and returns logits [rows, vocab]: the last token of
  // each chunk in order, or every token of every chunk with all_rows. Valid until the
  // next step.
  const float* step(std::span<const Chunk> chunks, bool all_rows = false);

  // Prefix reuse (prefix_cache.h). Why a slot's state cannot be saved and restored ("" when
  // it can): the rings of a streaming window or of sliding-window layers are not kept.
  std::string prefix_reuse_refusal() const;
  // Bytes of one token's K and V over the full-cache layers, in the cache's element type
  // (an f16 cache's saved rows take half an f32 one's, a q8_0 cache's 0.27); floats of a
  // recurrent snapshot.
  int64_t kv_bytes_per_token() const;
  int64_t recurrent_floats() const { return recurrent_.floats_per_slot(); }
  // The slot's KV rows [0, tokens) as stored, [layers, 2 (K, V), tokens, row width]; its
  // recurrent state.
  std::vector<std::byte> save_rows(int64_t slot, int64_t tokens) const;
  std::vector<float> save_recurrent(int64_t slot) const;
  // Starts a slot at `tokens` tokens: rows [0, tokens) from kv ([layers, 2, kv_rows, row
  // width], as save_rows wrote them) and, for a hybrid, the recurrent state from snapshot.
  void restore(int64_t slot, int64_t tokens, const std::byte* kv, int64_t kv_rows, const float* snapshot);

 private:
  void attend(const model::AttentionCall<float>& call);
  // The decode kernel for the waved chunks' rows, over cache rows of element type S.
  template <typename S>
  void decode_waves(const model::AttentionCall<float>& call, KvCache& cache, int64_t layer,
                    std::span<const size_t> waved, int64_t waves);
  // A streaming query's sink rows of `slot`, their keys moved on by `shift` positions into
  // the w-th part of sink_keys_ (F16 or Q8_0 rows rounded back to their type in
  // sink_keys_stored_).
  template <typename S>
  kernels::KvSpan<S> moved_sinks(const KvCache& cache, int64_t layer, int64_t slot, int64_t sinks, int64_t shift,
                                 size_t w);
  void fused_rows(const model::AttentionCall<float>& call, const KvCache& cache, int64_t layer, int64_t slot,
                  int64_t first, int64_t len);

  model::Model<float>& model_;
  void make_caches(const DecoderOptions& options);

  // The KV caches of the layers whose kind keeps one: [0] for the kinds without a window
  // (geometry from the options), then one per kind window W (W rows, a ring). cache_layer_
  // maps a model layer to (cache, layer in it), cache -1 for layers without KV rows.
  std::vector<KvCache> caches_;
  std::vector<std::pair<int64_t, int64_t>> cache_layer_;
  std::vector<int64_t> length_;  // [slots] tokens each slot has seen
  RecurrentState recurrent_;  // of the layers whose kind keeps a recurrent state (Gated DeltaNet)
  bool use_packed_;
  kernels::PackedWeights packed_;  // of model_'s parameters, which stay fixed while decoding
  kernels::RopeTable sink_rope_;  // magnitude-1 table for re-rotating sink keys
  // The current step: per row its slot and position; per chunk its first row.
  std::vector<int64_t> row_slot_;
  std::vector<int32_t> row_pos_;
  std::vector<int64_t> chunk_first_, chunk_len_, chunk_slot_;
  std::vector<float> lse_, sink_keys_;
  std::vector<std::byte> sink_keys_stored_;
  std::vector<float> pad_;  // fused_rows of a continuing chunk: queries, outputs, gate scores, gated outputs
  std::vector<float> kv_pad_;  // fused_rows of a continuing chunk: the slot's keys and values, row-major
};

}  // namespace gatedlm::infer
