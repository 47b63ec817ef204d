#pragma once
// The kernel sets' entry points, one namespace per set (kernel_set.h says what the sets
// are). The public functions of activations.h, adamw.h, attention.h (float),
// attention_decode.h (float), cross_entropy.h, delta_rule_step.h, rmsnorm.h, rope.h (rope_apply), matmul.h (to_bf16) and
// bf16_support.h (round_to_bf16) and quant_matmul.h forward to the
// active set's (dispatch.cpp); the tests call a set's directly to compare them.
#include <cstdint>

#include "kernels/activations.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/cross_entropy.h"
#include "kernels/quant_matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"

#if defined(__x86_64__) && !defined(GATEDLM_SINGLE_KERNEL_SET)
#define GATEDLM_X86_KERNEL_SETS 1
#else
#define GATEDLM_X86_KERNEL_SETS 0
#endif

namespace gatedlm::kernels::generic {
#include "kernels/kernel_set_entry_points.inc"
}
#if GATEDLM_X86_KERNEL_SETS
namespace gatedlm::kernels::avx2 {
#include "kernels/kernel_set_entry_points.inc"
}
namespace gatedlm::kernels::avx512 {
#include "kernels/kernel_set_entry_points.inc"
}
#endif
