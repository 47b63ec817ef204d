#include "kernels/batched_matmul.h"

#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <tuple>

namespace gatedlm::kernels {

namespace {

// Primitives by shape, created once (as matmul.cpp's, for the same reason).
struct BatchedPrimitives {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool, int64_t, int64_t,
                         int64_t, int64_t>;
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  std::map<Key, Entry> cache;

  static BatchedPrimitives& get() {
    static BatchedPrimitives instance;
    return instance;
  }

  const Entry& primitive(const MatmulShape& s, const BatchStrides& b) {
    const Key key{s.M, s.N, s.K, s.trans_a, s.trans_b, s.lda, s.ldb, s.ldc, s.accumulate, b.batch, b.a, b.b, b.c};
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    using dt = dnnl::memory::data_type;
    // A transposed operand is stored the other way round: logical [M, K] with strides {1, lda}.
    dnnl::memory::desc a_md({b.batch, s.M, s.K}, dt::f32,
                            s.trans_a ? dnnl::memory::dims{b.a, 1, s.lda} : dnnl::memory::dims{b.a, s.lda, 1});
    dnnl::memory::desc b_md({b.batch, s.K, s.N}, dt::f32,
                            s.trans_b ? dnnl::memory::dims{b.b, 1, s.ldb} : dnnl::memory::dims{b.b, s.ldb, 1});
    dnnl::memory::desc c_md({b.batch, s.M, s.N}, dt::f32, dnnl::memory::dims{b.c, s.ldc, 1});
    dnnl::primitive_attr attr;
    if (s.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    return cache.emplace(key, Entry{pd, dnnl::matmul(pd)}).first->second;
  }
};

void resolve(MatmulShape& s) {
  if (s.lda == 0) s.lda = s.trans_a ? s.M : s.K;
  if (s.ldb == 0) s.ldb = s.trans_b ? s.K : s.N;
  if (s.ldc == 0) s.ldc = s.N;
}

template <typename T>
void loop(T* C, const T* A, const T* B, const MatmulShape& s, const BatchStrides& b) {
  for (int64_t i = 0; i < b.batch; ++i) matmul(C + i * b.c, A + i * b.a, B + i * b.b, s);
}

}  // namespace

template <>
void batched_matmul<double>(double* C, const double* A, const double* B, MatmulShape s, BatchStrides b) {
  loop(C, A, B, s, b);
}

template <>
void batched_matmul<float>(float* C, const float* A, const float* B, MatmulShape s, BatchStrides b) {
  resolve(s);
  if (b.batch < 1 || s.M == 0 || s.N == 0) return;
  // bf16 products convert their operands (matmul.cpp); K == 0 is matmul's special case.
  if (b.batch == 1 || s.K == 0 || MatmulPrecisionScope::bf16_active()) return loop(C, A, B, s, b);
  BatchedPrimitives& dnn = BatchedPrimitives::get();
  const BatchedPrimitives::Entry& e = dnn.primitive(s, b);
  dnnl::memory a_mem(e.pd.src_desc(), dnn.engine, const_cast<float*>(A));
  dnnl::memory b_mem(e.pd.weights_desc(), dnn.engine, const_cast<float*>(B));
  dnnl::memory c_mem(e.pd.dst_desc(), dnn.engine, C);
  e.prim.execute(dnn.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  dnn.stream.wait();
}

}  // namespace gatedlm::kernels
