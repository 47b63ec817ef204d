#include "kernels/matmul.h"

#include <cstddef>
#include <cstring>
#include <dnnl.hpp>
#include <omp.h>
#include <vector>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "core/thread_governor.h"
#include "kernels/bf16_support.h"
#include "kernels/float_control.h"
#include "kernels/product_tiles.h"

namespace gatedlm::kernels {
namespace {

thread_local bool t_bf16 = false;
thread_local PackedWeights* t_packed = nullptr;

// oneDNN primitives cost far more to create than to run on our shapes, so each
// distinct shape is created once and kept for the life of the process.
struct OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  // The thread count is part of the key: a primitive splits its work for the count it was
  // created under and would run that many threads whatever the count is now.
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool, bool, int, bool>;
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  std::map<Key, Entry> cache;

  static OneDnn& get() {
    static OneDnn instance;
    return instance;
  }

  // packed_b: B in the layout oneDNN picks (format `any`), for PackedWeights.
  const Entry& primitive(const MatmulShape& s, bool bf16, bool packed_b = false) {
    Key key{s.M, s.N, s.K, s.trans_a, s.trans_b, s.lda, s.ldb, s.ldc, s.accumulate, bf16, omp_get_max_threads(), packed_b};
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    using dt = dnnl::memory::data_type;
    // A transposed is stored K x M: logical [M,K] with strides {1, lda}.
    const dt in_type = bf16 ? dt::bf16 : dt::f32;
    using dims = dnnl::memory::dims;
    const dnnl::memory::desc a_md({s.M, s.K}, in_type, s.trans_a ? dims{1, s.lda} : dims{s.lda, 1});
    const dnnl::memory::desc b_md = packed_b ? dnnl::memory::desc({s.K, s.N}, in_type, dnnl::memory::format_tag::any)
                                             : dnnl::memory::desc({s.K, s.N}, in_type, s.trans_b ? dims{1, s.ldb} : dims{s.ldb, 1});
    const dnnl::memory::desc c_md({s.M, s.N}, dt::f32, dims{s.ldc, 1});
    dnnl::primitive_attr attr;
    // Our own scratchpad per thread (run): threads run the same one-thread primitive at once.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    return cache.emplace(key, Entry{pd, dnnl::matmul(pd)}).first->second;
  }

  // Runs a cached primitive on A and C (as its descriptors say) and weights b, and waits.
  // Safe on several threads at once: each brings its own stream and scratchpad.
  void run(const Entry& e, const void* A, const dnnl::memory& b, float* C) {
    thread_local dnnl::stream thread_stream{engine};
    thread_local std::vector<std::byte> scratch;
    const dnnl::memory::desc scratch_md = e.pd.scratchpad_desc();
    const size_t need = scratch_md.get_size() + 64;
    if (scratch.size() < need) scratch.resize(need);
    void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    dnnl::memory a_mem(e.pd.src_desc(), engine, const_cast<void*>(A));
    dnnl::memory c_mem(e.pd.dst_desc(), engine, C);
    dnnl::memory scratch_mem(scratch_md, engine, aligned);
    e.prim.execute(thread_stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c_mem},
                                   {DNNL_ARG_SCRATCHPAD, scratch_mem}});
    thread_stream.wait();
  }
  void run(const Entry& e, const void* A, const void* B, float* C) {
    run(e, A, dnnl::memory(e.pd.weights_desc(), engine, const_cast<void*>(B)), C);
  }

  // C = A B over the tiles of product_tiles.h, each a one-thread product, shared among the
  // threads: the bits do not depend on the thread count. A and B hold `elem`-byte values
  // (4: f32, 2: bf16); batch.batch > 1 repeats it for the items of a batched product.
  void run_tiled(const MatmulShape& s, bool bf16, const BatchStrides& batch, const void* A, const void* B, float* C) {
    const ProductTiles t = plan_product_tiles(s.M, s.N, s.K, batch.batch);
    // The (up to four) tile shapes: full, last row of tiles, last column, last corner.
    const Entry* kinds[2][2];
    {
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);  // created for one thread: oneDNN then never splits the K sum
      for (int last_row = 0; last_row < 2; ++last_row)
        for (int last_col = 0; last_col < 2; ++last_col) {
          MatmulShape tile = s;
          tile.M = last_row ? s.M - (t.row_tiles - 1) * t.tile_rows : t.tile_rows;
          tile.N = last_col ? s.N - (t.col_tiles - 1) * t.tile_cols : t.tile_cols;
          kinds[last_row][last_col] = &primitive(tile, bf16);
        }
      omp_set_num_threads(threads);
    }
    const int64_t elem = bf16 ? 2 : 4, tasks = batch.batch * t.tiles();
    const auto* a_bytes = static_cast<const std::byte*>(A);
    const auto* b_bytes = static_cast<const std::byte*>(B);
    // One tile runs on this thread alone as well: outside an active parallel region some
    // implementations (the jit sgemm of AVX2 machines) take their thread count when they
    // run, not when they were created, and would split the K sum among them.
    const int threads = omp_get_max_threads();
    if (tasks == 1) omp_set_num_threads(1);
    // Each tile in the caller's floating-point mode (float_control.h), whichever thread runs it.
    const FloatControl mode = float_control();
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const FloatControlScope callers_mode(mode);
      const int64_t item = task / t.tiles(), i = task % t.tiles() / t.col_tiles, j = task % t.col_tiles;
      const int64_t r0 = i * t.tile_rows, c0 = j * t.tile_cols;
      const int64_t a_at = item * batch.a + (s.trans_a ? r0 : r0 * s.lda);
      const int64_t b_at = item * batch.b + (s.trans_b ? c0 * s.ldb : c0);
      run(*kinds[i == t.row_tiles - 1][j == t.col_tiles - 1], a_bytes + a_at * elem, b_bytes + b_at * elem,
          C + item * batch.c + r0 * s.ldc + c0);
    }
    if (tasks == 1) omp_set_num_threads(threads);
  }
};

// Converts the rows x cols values of a matrix stored with row stride ld into buf (same
// strides) with convert(out, in, n) per row, in parallel; returns buf's data. The caller
// passes a thread_local buffer: inside the parallel region a thread_local name would mean
// each worker's own (empty) buffer, so the workers get plain pointers. Unlike the tiles, the
// rows need not run in the caller's floating-point mode (float_control.h): both conversions
// are integer rounding of the bits, or AVX512-BF16's instruction, which flushes subnormal
// inputs in every mode, so no value depends on the thread that converted it.
template <typename Out, typename Convert>
Out* convert_stored_rows(std::vector<Out>& buf, const float* in, int64_t rows, int64_t cols, int64_t ld,
                         Convert convert) {
  buf.resize(rows * ld);
  Out* out = buf.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) convert(out + r * ld, in + r * ld, cols);
  return out;
}

}  // namespace

// The packed copies of one PackedWeights: per matrix (its address and stored shape) one
// copy per layout a primitive asked for (the layout may depend on M).
struct PackedWeights::Store {
  using Key = std::tuple<const float*, int64_t, int64_t, int64_t>;  // B, N, K, ldb
  struct Copy {
    dnnl::memory::desc layout;
    dnnl::memory memory;
  };
  std::mutex mutex;
  std::map<Key, std::vector<Copy>> copies;
  std::map<Key, std::vector<float>> panels;  // pack_panels's copies
  int64_t matrices = 0, bytes = 0;
};

struct PackedWeightsAccess {
  // B[N, K] (row stride ldb) lies inside the region of w.
  static bool covers(const PackedWeights& w, const float* B, const MatmulShape& s) {
    const float* begin = w.region_.data();
    const float* end = begin + w.region_.size();
    return B >= begin && B < end && (s.N - 1) * s.ldb + s.K <= end - B;
  }

  // B's copy in the layout `layout`, made on first use (a handle: the vector may grow).
  static dnnl::memory copy_of(PackedWeights& w, const float* B, const MatmulShape& s,
                                     const dnnl::memory::desc& layout) {
    PackedWeights::Store& store = *w.store_;
    std::lock_guard<std::mutex> lock(store.mutex);
    std::vector<PackedWeights::Store::Copy>& copies = store.copies[{B, s.N, s.K, s.ldb}];
    for (const auto& c : copies)
      if (c.layout == layout) return c.memory;
    OneDnn& dnn = OneDnn::get();
    // B^T as oneDNN's weights [K, N]: B stored [N, K] with row stride ldb.
    dnnl::memory plain(dnnl::memory::desc({s.K, s.N}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, s.ldb}),
                       dnn.engine, const_cast<float*>(B));
    dnnl::memory packed(layout, dnn.engine);
    dnnl::reorder(plain, packed).execute(dnn.stream, plain, packed);
    dnn.stream.wait();
    store.matrices += 1;
    store.bytes += static_cast<int64_t>(layout.get_size());
    return copies.emplace_back(PackedWeights::Store::Copy{layout, packed}).memory;
  }

  // B's copy in panels (pack_panels), made on first use.
  static const float* panels_of(PackedWeights& w, const float* B, const MatmulShape& s) {
    PackedWeights::Store& store = *w.store_;
    std::lock_guard<std::mutex> lock(store.mutex);
    std::vector<float>& panels = store.panels[{B, s.N, s.K, s.ldb}];
    if (panels.empty()) {
      panels.resize(static_cast<size_t>(panel_floats(s.N, s.K)));
      pack_panels(panels.data(), B, s.ldb, s.N, s.K);
      store.matrices += 1;
      store.bytes += static_cast<int64_t>(panels.size() * sizeof(float));
    }
    return panels.data();
  }
};

void pack_panels(float* out, const float* B, int64_t ldb, int64_t N, int64_t K) {
  const int64_t count = (N + kPanelColumns - 1) / kPanelColumns;
#pragma omp parallel for schedule(static) if (N * K >= (int64_t{1} << 18))
  for (int64_t p = 0; p < count; ++p)
    for (int64_t j = 0; j < kPanelColumns; ++j) {
      const int64_t row = p * kPanelColumns + j;
      float* column = out + p * K * kPanelColumns + j;
      for (int64_t k = 0; k < K; ++k) column[k * kPanelColumns] = row < N ? B[row * ldb + k] : 0.0f;
    }
}

PackedWeights::PackedWeights(std::span<const float> region) : region_(region), store_(std::make_unique<Store>()) {}
PackedWeights::~PackedWeights() = default;
int64_t PackedWeights::matrices() const {
  std::lock_guard<std::mutex> lock(store_->mutex);
  return store_->matrices;
}
int64_t PackedWeights::bytes() const {
  std::lock_guard<std::mutex> lock(store_->mutex);
  return store_->bytes;
}
void PackedWeights::clear() {
  std::lock_guard<std::mutex> lock(store_->mutex);
  store_->copies.clear();
  store_->panels.clear();
  store_->matrices = store_->bytes = 0;
}

PackedWeightsScope::PackedWeightsScope(PackedWeights* weights) : previous_(t_packed) { t_packed = weights; }
PackedWeightsScope::~PackedWeightsScope() { t_packed = previous_; }

template <typename T>
void matmul_reference(T* C, const T* A, const T* B, MatmulShape s) {
  resolve_strides(s);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.M; ++i) {
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < s.K; ++k) {
        double a = s.trans_a ? A[k * s.lda + i] : A[i * s.lda + k];
        double b = s.trans_b ? B[j * s.ldb + k] : B[k * s.ldb + j];
        acc += a * b;
      }
      T& c = C[i * s.ldc + j];
      c = static_cast<T>(s.accumulate ? c + acc : acc);
    }
  }
}

template <>
void matmul<double>(double* C, const double* A, const double* B, MatmulShape s) {
  matmul_reference(C, A, B, s);
}

template <>
void matmul<float>(float* C, const float* A, const float* B, MatmulShape s) {
  adapt_openmp_threads();  // products are where a step's threads are spent: fewer while others need the cores
  resolve_strides(s);
  if (s.M == 0 || s.N == 0) return;
  if (s.K == 0) {
    if (!s.accumulate)
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t j = 0; j < s.N; ++j) C[i * s.ldc + j] = 0.0f;
    return;
  }
  if (!t_bf16 && !s.trans_a && s.trans_b && s.M <= kSkinnyRows) {
    skinny_matmul_f32(C, s.ldc, A, s.lda, B, s.ldb, s.M, s.N, s.K, s.accumulate);
    return;
  }
  const bool packable = !t_bf16 && t_packed && !s.trans_a && s.trans_b && PackedWeightsAccess::covers(*t_packed, B, s);
  if (packable && s.M <= kPanelRows && panel_matmul_pays()) {
    panel_matmul_f32(C, s.ldc, A, s.lda, PackedWeightsAccess::panels_of(*t_packed, B, s), s.M, s.N, s.K, s.accumulate);
    return;
  }
  OneDnn& dnn = OneDnn::get();
  if (packable && s.M <= kPackedRows) {
    const OneDnn::Entry& e = dnn.primitive(s, /*bf16=*/false, /*packed_b=*/true);
    dnn.run(e, A, PackedWeightsAccess::copy_of(*t_packed, B, s, e.pd.weights_desc()), C);
    return;
  }
  // bf16 scope: native products take bf16 operands; the emulation rounds the operands to
  // bf16 in fp32 storage and runs the fp32 product (bf16_support.h).
  const bool bf16 = t_bf16 && bf16_path() == Bf16Path::native;
  const bool emulate_bf16 = t_bf16 && !bf16;
  void* a_ptr = const_cast<float*>(A);
  void* b_ptr = const_cast<float*>(B);
  thread_local std::vector<uint16_t> a16, b16;
  thread_local std::vector<float> a_rounded, b_rounded;
  // The stored shapes of A and B (a transposed operand is stored the other way round).
  const int64_t a_rows = s.trans_a ? s.K : s.M, a_cols = s.trans_a ? s.M : s.K;
  const int64_t b_rows = s.trans_b ? s.N : s.K, b_cols = s.trans_b ? s.K : s.N;
  if (bf16) {
    a_ptr = convert_stored_rows(a16, A, a_rows, a_cols, s.lda, to_bf16);
    b_ptr = convert_stored_rows(b16, B, b_rows, b_cols, s.ldb, to_bf16);
  } else if (emulate_bf16) {
    a_ptr = convert_stored_rows(a_rounded, A, a_rows, a_cols, s.lda, round_to_bf16);
    b_ptr = convert_stored_rows(b_rounded, B, b_rows, b_cols, s.ldb, round_to_bf16);
  }
  dnn.run_tiled(s, bf16, {1, 0, 0, 0}, a_ptr, b_ptr, C);
}

template <>
void batched_matmul<double>(double* C, const double* A, const double* B, MatmulShape s, BatchStrides b) {
  for (int64_t i = 0; i < b.batch; ++i) matmul_reference(C + i * b.c, A + i * b.a, B + i * b.b, s);
}

template <>
void batched_matmul<float>(float* C, const float* A, const float* B, MatmulShape s, BatchStrides b) {
  adapt_openmp_threads();
  resolve_strides(s);
  if (b.batch < 1 || s.M == 0 || s.N == 0) return;
  // One item, K == 0 and bf16 products (which convert their operands) go through matmul.
  if (b.batch == 1 || s.K == 0 || t_bf16) {
    for (int64_t i = 0; i < b.batch; ++i) matmul(C + i * b.c, A + i * b.a, B + i * b.b, s);
    return;
  }
  OneDnn::get().run_tiled(s, /*bf16=*/false, b, A, B, C);
}

MatmulPrecisionScope::MatmulPrecisionScope(bool bf16) : previous_(t_bf16) { t_bf16 = bf16; }
MatmulPrecisionScope::~MatmulPrecisionScope() { t_bf16 = previous_; }
bool MatmulPrecisionScope::bf16_active() { return t_bf16; }

template <typename T>
void linear_forward(T* y, const T* x, const T* W, int64_t n, int64_t in, int64_t out) {
  matmul(y, x, W, MatmulShape{.M = n, .N = out, .K = in, .trans_b = true});
}

template <typename T>
void linear_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int64_t n, int64_t in,
                     int64_t out, bool accumulate_dx) {
  if (dx) matmul(dx, dy, W, MatmulShape{.M = n, .N = in, .K = out, .accumulate = accumulate_dx});
  matmul(dW, dy, x, MatmulShape{.M = out, .N = in, .K = n, .trans_a = true, .accumulate = true});
}

template void matmul_reference<float>(float*, const float*, const float*, MatmulShape);
template void matmul_reference<double>(double*, const double*, const double*, MatmulShape);
template void linear_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*, int64_t,
                                     int64_t, int64_t, bool);
template void linear_backward<double>(double*, double*, const double*, const double*, const double*,
                                      int64_t, int64_t, int64_t, bool);

}  // namespace gatedlm::kernels
