#include "kernels/activation_kernels.h"
#include "kernels/cpu/activations_impl.h"

namespace ll3::kernels::avx2 {

void swiglu(float* gate, const float* up, int64_t n) { swiglu_impl<F32x8>(gate, up, n); }
double exp_sub(float* x, int64_t n, float shift) { return exp_sub_impl<F32x8>(x, n, shift); }

}  // namespace ll3::kernels::avx2
