// The decode attention kernel (kernels/attention_decode.h) against the portable loop it
// replaced for float (attention_decode_portable: one task per query head, baseline target,
// libm exp), in one run: microseconds per call and the ratio, for each kernel set this
// CPU runs. Random caches, one per layer and query, several layers in turn so that the
// rows come from beyond L2 as in a decode step (whose weights pass through the caches
// between two attention calls). A second table times the kernel sets on the KV cache's two
// orders (kernels/attention_decode.h's KvLayout): row-major [rows, n_kv, head_dim], the
// order before d3ceec8, and head-major [n_kv, rows, head_dim], infer/kv_cache.h's today. A
// third times each set on the same head-major caches kept as f32, F16 and Q8_0 rows (infer's
// --kv-type), the three taking turns run by run.
//
//   build-x/attention_decode_speed [--reps 7] [--calls 200] [--shape N (one row of kShapes, from 1)]
//                                  [--capacity ROWS (head-major caches' capacity; default each one's rows)]
// Prints three markdown tables.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/attention_decode.h"
#include "kernels/element_types.h"
#include "kernels/kernel_set.h"

namespace k = gatedlm::kernels;

namespace {

struct Shape {
  const char* name;
  int64_t n_q, n_kv, head_dim, batch, min_rows, max_rows;
};

// The profile's: the 100M Qwen3-shaped model (bench/configs/qwen3_100m.json) at batch 8
// and 1 with caches of 16-80 positions; longer caches; a 1B-shaped model's heads.
constexpr Shape kShapes[] = {
    {"100M b8, 16-80 rows", 12, 4, 64, 8, 16, 80},   {"100M b1, 16-80 rows", 12, 4, 64, 1, 16, 80},
    {"100M b8, 1000 rows", 12, 4, 64, 8, 1000, 1000}, {"1B b8, 200-300 rows", 16, 8, 128, 8, 200, 300},
    {"1B b1, 1900 rows", 16, 8, 128, 1, 1900, 1900},
};
constexpr int kLayers = 12;
constexpr const char* kUsage = "attention_decode_speed [--reps 7] [--calls 200] [--shape N] [--capacity ROWS]";

double now_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// One layer's decode step: per query its cache, its q row and its outputs.
struct Layer {
  std::vector<std::vector<float>> keys, values;
  std::vector<float> q, out;
  std::vector<k::DecodeQuery<float>> queries;
};

// head_major: each cache as [n_kv, capacity, head_dim] (KvLayout{head_dim, capacity * head_dim})
// instead of row-major [rows, n_kv, head_dim]; capacity 0 means the cache's own rows. The
// real cache's head stride is its capacity times head_dim, and the time depends on it.
std::vector<Layer> make_layers(const Shape& s, gatedlm::Rng& rng, bool head_major = false, int64_t capacity = 0) {
  const int64_t width = s.n_q * s.head_dim, kv = s.n_kv * s.head_dim;
  std::vector<Layer> layers(kLayers);
  for (Layer& l : layers) {
    l.q.resize(s.batch * width);
    l.out.resize(s.batch * width);
    for (float& x : l.q) x = static_cast<float>(rng.normal());
    for (int64_t i = 0; i < s.batch; ++i) {
      const int64_t rows = s.min_rows + static_cast<int64_t>(rng.uniform() * double(s.max_rows - s.min_rows + 1));
      const int64_t cap = head_major ? std::max(rows, capacity) : rows;
      std::vector<float> kc(cap * kv), vc(cap * kv);
      for (float& x : kc) x = static_cast<float>(rng.normal());
      for (float& x : vc) x = static_cast<float>(rng.normal());
      l.keys.push_back(std::move(kc));
      l.values.push_back(std::move(vc));
      const k::KvLayout layout = head_major ? k::KvLayout{s.head_dim, cap * s.head_dim} : k::KvLayout{};
      l.queries.push_back({l.q.data() + i * width, l.out.data() + i * width, nullptr, nullptr,
                           {{l.keys.back().data(), l.values.back().data(), rows, layout, layout}}});
    }
  }
  return layers;
}

// Microseconds per call of each variant: the fastest of `reps` runs of `calls` calls
// (each call the next layer's), the variants taking turns run by run so that a load on the
// shared machine falls on all of them alike; one warm-up run each first.
std::vector<double> best_us_per_call(int reps, int calls, const std::vector<std::function<void(int)>>& variants) {
  auto run = [&](const std::function<void(int)>& call) {
    const double start = now_seconds();
    for (int c = 0; c < calls; ++c) call(c % kLayers);
    return now_seconds() - start;
  };
  std::vector<double> best(variants.size(), 1e30);
  for (const auto& v : variants) run(v);
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < variants.size(); ++i) best[i] = std::min(best[i], run(variants[i]));
  for (double& b : best) b *= 1e6 / calls;
  return best;
}

// The first table: the portable loop against each kernel set, row-major caches.
void time_kernel_sets(const Shape& s, gatedlm::Rng& rng, int reps, int calls) {
  std::vector<Layer> layers = make_layers(s, rng);
  const k::DecodeShape ds{s.n_q, s.n_kv, s.head_dim, 1.0 / 8.0};
  std::vector<std::function<void(int)>> variants = {
      [&](int l) { k::attention_decode_portable<float>(layers[l].queries, ds); }};
  const std::vector<k::KernelSet> sets = k::runnable_kernel_sets();
  for (k::KernelSet set : sets)
    variants.push_back([&, set](int l) {
      k::use_kernel_set(set);
      k::attention_decode<float>(layers[l].queries, ds);
    });
  const std::vector<double> us = best_us_per_call(reps, calls, variants);
  for (size_t i = 0; i < sets.size(); ++i)
    std::printf("| %s | %.2f | %s | %.2f | %.2fx |\n", s.name, us[0], k::kernel_set_name(sets[i]), us[i + 1],
                us[0] / us[i + 1]);
}

// The second table: each kernel set on row-major and on head-major caches of the shape,
// the two orders taking turns run by run.
void time_layouts(const Shape& s, gatedlm::Rng& rng, int reps, int calls, int64_t capacity) {
  std::vector<Layer> rows = make_layers(s, rng), heads = make_layers(s, rng, true, capacity);
  const k::DecodeShape ds{s.n_q, s.n_kv, s.head_dim, 1.0 / 8.0};
  for (k::KernelSet set : k::runnable_kernel_sets()) {
    k::use_kernel_set(set);
    const std::vector<double> us = best_us_per_call(
        reps, calls, {[&](int l) { k::attention_decode<float>(rows[l].queries, ds); },
                      [&](int l) { k::attention_decode<float>(heads[l].queries, ds); }});
    std::printf("| %s | %s | %.2f | %.2f | %.2fx |\n", s.name, k::kernel_set_name(set), us[0], us[1], us[0] / us[1]);
  }
}

// A layer's caches kept as rows of S (F16 bits or Q8_0 blocks), `per` values a unit of S:
// the same queries over copies rounded by element_types' conversions, layouts in units of S.
template <typename S>
struct StoredLayer {
  std::vector<std::vector<S>> keys, values;
  std::vector<float> out;
  std::vector<k::DecodeQuery<float, S>> queries;
};

template <typename S>
std::vector<StoredLayer<S>> stored_copies(const std::vector<Layer>& layers, k::ElementType type, int64_t per) {
  std::vector<StoredLayer<S>> out(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    StoredLayer<S>& c = out[l];
    c.out.resize(layers[l].out.size());
    for (size_t i = 0; i < layers[l].queries.size(); ++i) {
      const std::vector<float>& kf = layers[l].keys[i];
      const std::vector<float>& vf = layers[l].values[i];
      c.keys.emplace_back(kf.size() / static_cast<size_t>(per));
      c.values.emplace_back(vf.size() / static_cast<size_t>(per));
      k::element_from_f32(type, c.keys.back().data(), kf.data(), static_cast<int64_t>(kf.size()));
      k::element_from_f32(type, c.values.back().data(), vf.data(), static_cast<int64_t>(vf.size()));
    }
    for (size_t i = 0; i < layers[l].queries.size(); ++i) {
      const k::DecodeQuery<float>& f = layers[l].queries[i];
      const k::KvLayout in_units{f.spans[0].k_layout.row_stride / per, f.spans[0].k_layout.head_stride / per};
      c.queries.push_back({f.q, c.out.data() + (f.out - layers[l].out.data()), nullptr, nullptr,
                           {{c.keys[i].data(), c.values[i].data(), f.spans[0].len, in_units, in_units}}});
    }
  }
  return out;
}

// The third table: each kernel set over the head-major caches as f32, F16 and Q8_0 rows.
void time_row_types(const Shape& s, gatedlm::Rng& rng, int reps, int calls, int64_t capacity) {
  const std::vector<Layer> f32 = make_layers(s, rng, true, capacity);
  const std::vector<StoredLayer<uint16_t>> f16 = stored_copies<uint16_t>(f32, k::ElementType::f16, 1);
  const std::vector<StoredLayer<k::BlockQ8_0>> q8 = stored_copies<k::BlockQ8_0>(f32, k::ElementType::q8_0, 32);
  const k::DecodeShape ds{s.n_q, s.n_kv, s.head_dim, 1.0 / 8.0};
  for (k::KernelSet set : k::runnable_kernel_sets()) {
    k::use_kernel_set(set);
    const std::vector<double> us = best_us_per_call(
        reps, calls, {[&](int l) { k::attention_decode<float>(f32[l].queries, ds); },
                      [&](int l) { k::attention_decode<float, uint16_t>(f16[l].queries, ds); },
                      [&](int l) { k::attention_decode<float, k::BlockQ8_0>(q8[l].queries, ds); }});
    std::printf("| %s | %s | %.2f | %.2f | %.2f | %.2fx | %.2fx |\n", s.name, k::kernel_set_name(set), us[0], us[1],
                us[2], us[0] / us[2], us[1] / us[2]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7, calls = 200, only = 0, capacity = 0;  // only: 1-based row of kShapes, 0 for all
  constexpr int kShapeCount = static_cast<int>(std::size(kShapes));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--reps" || a == "--calls" || a == "--shape" || a == "--capacity") && i + 1 < argc) {
      const int v = std::atoi(argv[++i]);
      if (v < 1 || (a == "--shape" && v > kShapeCount)) {
        std::fprintf(stderr, "%s %s: expected a count from 1%s\n", a.c_str(), argv[i],
                     a == "--shape" ? " to the number of shapes" : "");
        return 2;
      }
      (a == "--reps" ? reps : a == "--calls" ? calls : a == "--shape" ? only : capacity) = v;
    } else {
      std::fprintf(stderr, "unknown argument %s\nusage: %s\n", a.c_str(), kUsage);
      return 2;
    }
  }
  std::printf("threads %d, kernel sets: %s; us per call (fastest of %d runs of %d calls)\n\n", omp_get_max_threads(),
              k::kernel_set_summary().c_str(), reps, calls);
  gatedlm::Rng rng(1);
  std::printf("| shape | portable (old) | set | new | old / new |\n|---|---|---|---|---|\n");
  for (int row = 1; row <= kShapeCount; ++row)
    if (!only || row == only) time_kernel_sets(kShapes[row - 1], rng, reps, calls);
  std::printf("\n| shape | set | row-major | head-major | row / head |\n|---|---|---|---|---|\n");
  for (int row = 1; row <= kShapeCount; ++row)
    if (!only || row == only) time_layouts(kShapes[row - 1], rng, reps, calls, capacity);
  std::printf("\n| shape | set | f32 | f16 | q8_0 | f32 / q8_0 | f16 / q8_0 |\n|---|---|---|---|---|---|---|\n");
  for (int row = 1; row <= kShapeCount; ++row)
    if (!only || row == only) time_row_types(kShapes[row - 1], rng, reps, calls, capacity);
  return 0;
}
