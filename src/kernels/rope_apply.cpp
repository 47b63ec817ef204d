// rope_apply, compiled once per kernel set (kernel_set_begin.h); the tables are built
// once, in rope.cpp.
#include "core/error.h"
#include "kernels/kernel_sets.h"
#include "kernels/parallel_work.h"

#include "kernels/kernel_set_begin.h"

namespace gatedlm::kernels::GATEDLM_KSET {

template <typename T>
void rope_apply(T* x, const RopeTable& table, int64_t batch, int64_t seq, int64_t heads,
                int64_t head_dim, int64_t pos0, bool inverse) {
  const int64_t half = table.half;
  if (pos0 + seq > table.positions)
    fail("rope: position ", pos0 + seq - 1, " is past the table's ", table.positions, " positions");
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for collapse(2) schedule(static) if (rows_in_parallel(batch * seq, heads * 2 * half))
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const double* c = table.cos.data() + (pos0 + t) * half;
      const double* s = table.sin.data() + (pos0 + t) * half;
      for (int64_t h = 0; h < heads; ++h) {
        T* v = x + ((b * seq + t) * heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          T ci = static_cast<T>(c[i]), si = sign * static_cast<T>(s[i]);
          T x1 = v[i], x2 = v[i + half];
          v[i] = x1 * ci - x2 * si;
          v[i + half] = x2 * ci + x1 * si;
        }
      }
    }
}

template void rope_apply<float>(float*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
template void rope_apply<double>(double*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 bool);

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
