#pragma once
// Row-major matrix products. Every product in the model goes through here: float uses
// oneDNN (about 200 GFLOP/s on two Zen 4 cores) except a few rows times a transposed
// matrix (decoding), which streams the matrix by hand; double uses the naive reference, which
// exists for the fp64 finite-difference gradient checks and as the test oracle.
#include <cstdint>
#include <memory>
#include <span>

namespace gatedlm::kernels {

// Describes C[M,N] (+)= op(A)[M,K] * op(B)[K,N]. op(X) = X^T when trans_X; lda/ldb/ldc
// are the row strides of A, B, C as they are stored (so a transposed A is stored K x M
// with lda >= M). accumulate=true adds into C, false overwrites it.
struct MatmulShape {
  int64_t M, N, K;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (the natural stride)
  bool accumulate = false;
};

// The strides a 0 stands for, filled in.
inline void resolve_strides(MatmulShape& s) {
  if (s.lda == 0) s.lda = s.trans_a ? s.M : s.K;
  if (s.ldb == 0) s.ldb = s.trans_b ? s.K : s.N;
  if (s.ldc == 0) s.ldc = s.N;
}

template <typename T>
void matmul(T* C, const T* A, const T* B, MatmulShape shape);

// Autocast for float products, like torch.autocast(dtype=bfloat16): while a scope with
// bf16=true is alive on the calling thread, matmul<float> rounds A and B to bf16 (round
// to nearest even) and multiplies them on the bf16 units (AVX512-BF16 or AMX through
// oneDNN), accumulating and writing C in fp32; on CPUs without them it runs the emulated
// path of bf16_support.h (same numerics, slower). Master weights, gradients and
// optimizer state stay fp32. Scopes nest; the double path ignores them.
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(bool bf16);
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;
  static bool bf16_active();

 private:
  bool previous_;
};

// Weights that stay fixed while they are used, kept a second time in the blocked layout
// oneDNN's kernels read (its `any` weights format). oneDNN re-lays out a plain row-major
// matrix on every call; for a decode batch (a few rows times each weight matrix) that
// copy costs about as much as the product itself (measured on Zen 4: 8 rows x the
// 100M-parameter model, 27 ms plain against 18 ms packed per step). A PackedWeights
// covers one region of memory (a model's parameters): while a PackedWeightsScope names
// it, float products C = A B^T (A not transposed, B transposed) with kSkinnyRows < M <=
// kPackedRows and B inside the region use a packed copy of B, made on first use and kept
// until clear() or destruction. The copies cost as much memory as the matrices they pack.
// The region's values must not change while copies exist (clear() after changing them).
// Where the kernel set has the panel kernel (panel_matmul_pays: the avx2 set), products of
// kSkinnyRows < M <= kPanelRows rows use a copy in panels instead (pack_panels), read once
// per product: oneDNN's AVX2 kernels on their packed copy ran 8 rows at 28 GFMA/s and 14
// GB/s here, near neither bound; the panels 1.3-2.1x faster (bench/RESULTS.md, "Decode
// batches of F32 weights on AVX2"). Products of more rows keep oneDNN's copy, so a run
// that multiplies both 5-8 and 9-64 rows holds both copies.
inline constexpr int64_t kPackedRows = 64;
class PackedWeights {
 public:
  explicit PackedWeights(std::span<const float> region);
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;
  int64_t matrices() const;  // packed copies held
  int64_t bytes() const;     // their memory
  void clear();
  struct Store;  // matmul.cpp's: the copies, keyed by matrix and layout

 private:
  std::span<const float> region_;
  std::unique_ptr<Store> store_;
  friend class PackedWeightsScope;
  friend struct PackedWeightsAccess;
};

// Names the PackedWeights that products on the calling thread may use (none: nullptr),
// for the scope's life; scopes nest. bf16 products never use packed copies.
class PackedWeightsScope {
 public:
  explicit PackedWeightsScope(PackedWeights* weights);
  ~PackedWeightsScope();
  PackedWeightsScope(const PackedWeightsScope&) = delete;
  PackedWeightsScope& operator=(const PackedWeightsScope&) = delete;

 private:
  PackedWeights* previous_;
};

// fp32 -> bf16 with round-to-nearest-even (NaN kept quiet); the bits of a bf16 value.
// Where the build targets AVX512-BF16, denormal inputs become signed zeros.
void to_bf16(uint16_t* out, const float* in, int64_t n);

// C[M,N] (+)= A[M,K] B[N,K]^T with row strides lda, ldb, ldc, streaming B once: the
// product of decoding (M = the batch, B a weight matrix stored [out, in]), which
// matmul<float> takes for M <= kSkinnyRows outside a bf16 scope. Exposed for the tests.
inline constexpr int64_t kSkinnyRows = 4;  // measured: oneDNN wins from about 5 rows on Zen 4
// B[N, K] (row stride ldb) as panels of kPanelColumns rows: panel p holds, k by k, the
// values of B's rows 8p..8p+7 at column k, out[(p * K + k) * 8 + j] = B[(8p + j) * ldb + k]
// (rows past N are zeros): the operand of panel_matmul_f32. out has panel_floats(N, K) floats.
inline constexpr int64_t kPanelColumns = 8, kPanelRows = 8;
inline int64_t panel_floats(int64_t N, int64_t K) { return (N + kPanelColumns - 1) / kPanelColumns * kPanelColumns * K; }
void pack_panels(float* out, const float* B, int64_t ldb, int64_t N, int64_t K);
// C[M,N] (+)= A[M,K] B^T for kSkinnyRows < M <= kPanelRows with B as pack_panels wrote it;
// every output summed over k in order by one thread. Only where panel_matmul_pays().
bool panel_matmul_pays();
void panel_matmul_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* panels, int64_t M, int64_t N,
                      int64_t K, bool accumulate);
void skinny_matmul_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                       int64_t N, int64_t K, bool accumulate);

// The naive triple loop with a double accumulator: the oracle for tests.
template <typename T>
void matmul_reference(T* C, const T* A, const T* B, MatmulShape shape);

// Linear layer helpers in the nn.Linear convention, W stored [out, in].
// y[n,out] = x[n,in] W^T
template <typename T>
void linear_forward(T* y, const T* x, const T* W, int64_t n, int64_t in, int64_t out);
// dx[n,in] += dy[n,out] W (or = when accumulate_dx is false); dW[out,in] += dy^T x.
// dx may be null (input needs no grad).
template <typename T>
void linear_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int64_t n, int64_t in,
                     int64_t out, bool accumulate_dx = true);

// A batch of equally shaped matrix products in one call, for the mixture-of-experts block
// (model/moe.h): item b multiplies the operands at A + b * stride_a and B + b * stride_b
// into C + b * stride_c, each as matmul() would (MatmulShape's transposes, row strides and
// accumulate). One oneDNN batched product replaces a loop of small ones, whose thread
// start-up and synchronisation dominate when each product is small.
struct BatchStrides {
  int64_t batch;
  int64_t a, b, c;  // elements between consecutive items of A, B and C
};

// Beside matmul (its oneDNN primitive cache). float: one oneDNN product (a
// loop of matmul() under a bf16 MatmulPrecisionScope);
// double: a loop of the naive reference.
template <typename T>
void batched_matmul(T* C, const T* A, const T* B, MatmulShape shape, BatchStrides batch);

}  // namespace gatedlm::kernels
