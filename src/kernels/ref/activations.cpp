#include <cmath>

#include "kernels/activation_kernels.h"
#include "kernels/exp_arm.h"

namespace ll3::kernels::ref {

void swiglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = exp_arm::swiglu(gate[i], up[i]);
}

double exp_sub(float* x, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

}  // namespace ll3::kernels::ref
