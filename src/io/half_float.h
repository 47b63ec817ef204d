#pragma once
// The 16-bit float conversions live in kernels/half_float.h (the quantised weight blocks
// need them below io/); io's readers and writers keep calling them by their io:: names.
#include "kernels/half_float.h"

namespace gatedlm::io {

using kernels::bf16_to_f32;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;

}  // namespace gatedlm::io
