// Decode products on quantised weights: GB/s of weights read per second for F32
// (matmul<float>: the skinny kernel up to 4 rows, oneDNN above), BF16, Q8_0, Q4_0, the
// K-quants and IQ4_XS (quant_matmul and each path the active kernel set runs), against the machine's
// streaming read bandwidth. Random weights; the matrices of a decode step of a
// Qwen3-shaped model, enough layers that they do not fit in the caches.
//
//   build-x/quant_matmul_speed [--shape 100m|1b|cached|l2] [--batch 1,8] [--reps 7] [--cpu-time] [--automatic-only]
//                              [--formats f32,bf16,q8_0,q4_0,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_xs]
//   (--reps: runs of each product, the fastest printed; the read bound takes at most 7)
//   GATEDLM_KERNELS=avx2 build-x/quant_matmul_speed ...   (another kernel set)
// Prints a markdown table; bench/RESULTS.md, "Quantised products: the kernels", has the figures.
#include <omp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bandwidth.h"
#include "core/aligned_allocator.h"
#include "kernels/kernel_set.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"
#include "kernels/quant_tiles.h"

namespace k = gatedlm::kernels;

namespace {

struct Matrix {
  int64_t rows, cols;
};

// One layer's products (fused q|k|v, o, gate|up, down) and how many layers.
struct Shape {
  const char* name;
  std::vector<Matrix> layer;
  int layers;
};

Shape shape_named(const std::string& name) {
  if (name == "100m")  // bench/configs/qwen3_100m.json: d 768, 12 q / 4 kv heads of 64, ffn 2048
    return {"100M (d 768, ffn 2048, 12 layers)", {{1280, 768}, {768, 768}, {4096, 768}, {768, 2048}}, 12};
  if (name == "1b")  // d 2048, 16 q / 8 kv heads of 128, ffn 8192
    return {"1B (d 2048, ffn 8192, 4 layers)", {{4096, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192}}, 4};
  if (name == "cached")  // the kernels' arithmetic alone: each product's weights fit in L2
    return {"in-cache (768 x 256 and 256 x 768)", {{768, 256}, {256, 768}}, 1};
  if (name == "l2")  // the same at a 1B row length: 8 super-blocks a row, one product, in L2 (Q4_K 288 KiB)
    return {"in-L2, long rows (256 x 2048)", {{256, 2048}}, 1};
  std::fprintf(stderr, "--shape %s: expected 100m, 1b, cached or l2\n", name.c_str());
  std::exit(2);
}

// Wall-clock seconds, or with --cpu-time (one thread) the thread's CPU seconds: on a
// machine shared with other work that leaves out the time other processes held the core.
bool g_cpu_time = false;
bool g_automatic_only = false;  // --automatic-only: quant_matmul's own choice, not every path
double now_seconds() {
  timespec t{};
  clock_gettime(g_cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The fastest of `reps` runs of f (after one warm-up run).
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const double start = now_seconds();
    f();
    times.push_back(now_seconds() - start);
  }
  std::sort(times.begin(), times.end());
  return times[0];  // the fastest: on a shared machine the others carry its load
}

// The machine's streaming read bound at this thread count, as `gatedlm bench bandwidth`
// measures it (the best pass over 1 GiB of its three read patterns, bench/bandwidth.h). A rep
// reads the GiB once per pattern (about 0.1 s), so at most 7 reps however many --reps the
// products take (thousands over the in-cache shapes would otherwise read for minutes).
double stream_read_gbs(int reps) {
  return gatedlm::bench::measure_read_bandwidth(int64_t{1} << 30, std::min(reps, 7), 0).best_gbs;
}

struct Weights {
  std::vector<std::vector<float>> f32;
  std::vector<gatedlm::CacheLineVector<uint8_t>> blocks;  // aligned as model::QuantizedWeights holds them
  // The same blocks with their whole tiles arranged as an attached model's are
  // (kernels/quant_tiles.h), where the kernel set reads tiles; else empty.
  std::vector<gatedlm::CacheLineVector<uint8_t>> tiled;
};

Weights make_weights(const Shape& shape, k::ElementType format, bool f32) {
  Weights w;
  uint32_t state = 12345;
  for (int l = 0; l < shape.layers; ++l)
    for (const Matrix& m : shape.layer) {
      std::vector<float> values(static_cast<size_t>(m.rows * m.cols));
      for (float& v : values) v = static_cast<float>((state = state * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
      if (f32) {
        w.f32.push_back(std::move(values));
        continue;
      }
      const int64_t row_bytes = k::element_row_bytes(format, m.cols);
      gatedlm::CacheLineVector<uint8_t> bytes(static_cast<size_t>(m.rows * row_bytes));
      for (int64_t r = 0; r < m.rows; ++r)
        k::element_from_f32(format, bytes.data() + r * row_bytes, values.data() + r * m.cols, m.cols);
      if (k::quant_tiles_pay(format)) {
        w.tiled.push_back(bytes);
        k::quant_tile_rows(format, w.tiled.back().data(), m.rows / k::kQuantTileRows, m.cols);
      }
      w.blocks.push_back(std::move(bytes));
    }
  return w;
}

void print_row(const char* format, const char* path, int64_t batch, double bytes, double seconds, double stream) {
  const double gbs = bytes / seconds / 1e9;
  std::printf("| %s | %s | %lld | %.*f | %.1f | %.0f %% |\n", format, path, static_cast<long long>(batch),
              seconds < 1e-3 ? 4 : 3, seconds * 1e3, gbs, 100.0 * gbs / stream);
}

void bench_format(const Shape& shape, const char* label, k::ElementType format, bool f32, int64_t batch, int reps,
                  double stream) {
  const Weights w = make_weights(shape, format, f32);
  int64_t max_cols = 0, max_rows = 0;
  for (const Matrix& m : shape.layer) max_cols = std::max(max_cols, m.cols), max_rows = std::max(max_rows, m.rows);
  std::vector<float> a(static_cast<size_t>(batch * max_cols), 0.25f), c(static_cast<size_t>(batch * max_rows));
  double bytes = 0.0;
  for (const auto& v : w.f32) bytes += v.size() * 4.0;
  for (const auto& v : w.blocks) bytes += v.size();
  const auto step = [&](k::QuantPath path, bool automatic, bool tiles = false) {
    size_t i = 0;
    for (int l = 0; l < shape.layers; ++l)
      for (const Matrix& m : shape.layer) {
        if (f32) {
          k::MatmulShape s{batch, m.rows, m.cols};
          s.trans_b = true;
          k::matmul<float>(c.data(), a.data(), w.f32[i++].data(), s);
          continue;
        }
        const k::QuantWeights W = tiles ? k::QuantWeights{format, w.tiled[i++].data(), m.rows, m.cols,
                                                          m.rows / k::kQuantTileRows * k::kQuantTileRows}
                                        : k::QuantWeights{format, w.blocks[i++].data(), m.rows, m.cols};
        if (automatic) k::quant_matmul(c.data(), a.data(), batch, W);
        else k::quant_matmul_path(path, c.data(), m.rows, a.data(), m.cols, batch, W, false);
      }
  };
  if (f32) return print_row(label, "matmul<float>", batch, bytes, median_seconds(reps, [&] { step({}, true); }), stream);
  // A loaded model's products: on tiles where the set reads them.
  if (!w.tiled.empty())
    print_row(label, "quant_matmul, tiles", batch, bytes, median_seconds(reps, [&] { step({}, true, true); }), stream);
  print_row(label, "quant_matmul", batch, bytes, median_seconds(reps, [&] { step({}, true); }), stream);
  if (g_automatic_only) return;
  for (k::QuantPath path : {k::QuantPath::fp32_expand, k::QuantPath::int8_madd, k::QuantPath::int8_vnni,
                            k::QuantPath::bf16_dot, k::QuantPath::fp32_tiles})
    if (k::quant_path_runnable(path, format))
      print_row(label, k::quant_path_name(path), batch, bytes, median_seconds(reps, [&] { step(path, false); }), stream);
}

constexpr k::ElementType kBenchFormats[] = {k::ElementType::bf16, k::ElementType::q8_0, k::ElementType::q4_0,
                                            k::ElementType::q2_k,  k::ElementType::q3_k, k::ElementType::q4_k,
                                            k::ElementType::q5_k,  k::ElementType::q6_k, k::ElementType::iq4_xs};

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    if (comma > pos) items.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "100m", batches = "1,8", formats = "f32,bf16,q8_0,q4_0,q4_k,q5_k,q6_k,iq4_xs";
  int reps = 7;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--cpu-time") {
      g_cpu_time = true;
      omp_set_num_threads(1);
      --i;
    } else if (flag == "--automatic-only") {
      g_automatic_only = true;
      --i;
    } else if (i + 1 == argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return 2;
    } else if (flag == "--shape") shape_name = argv[i + 1];
    else if (flag == "--batch") batches = argv[i + 1];
    else if (flag == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--formats") formats = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s (--shape 100m|1b|cached|l2, --batch 1,8, --reps N, --cpu-time, --automatic-only, "
                   "--formats f32,q4_k,...)\n", flag.c_str());
      return 2;
    }
  }
  const Shape shape = shape_named(shape_name);
  const double stream = stream_read_gbs(reps);
  std::printf("shape %s, %d threads, %s time, kernel set %s\nstream read: %.1f GB/s\n\n", shape.name, omp_get_max_threads(),
              g_cpu_time ? "thread CPU" : "wall-clock", k::kernel_set_summary().c_str(), stream);
  std::printf("| weights | path | batch | ms per step | GB/s | of stream |\n| --- | --- | ---: | ---: | ---: | ---: |\n");
  for (size_t pos = 0; pos < batches.size();) {
    const size_t comma = std::min(batches.find(',', pos), batches.size());
    const int64_t batch = std::atoll(batches.substr(pos, comma - pos).c_str());
    pos = comma + 1;
    for (const std::string& name : split_list(formats)) {
      if (name == "f32") {
        bench_format(shape, "F32", k::ElementType::bf16, true, batch, reps, stream);
        continue;
      }
      const k::ElementType format = k::parse_element_type(name, "--formats", kBenchFormats);
      bench_format(shape, k::element_name(format), format, false, batch, reps, stream);
    }
  }
  return 0;
}
