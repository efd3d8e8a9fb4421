#pragma once
// Element-wise loops over flat float arrays, in TBB chunks when they are long enough to pay for
// the tasks.

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstdint>

namespace gen3d::models::kernels {

// f(begin, end) over [0, n), in chunks of `grain` on TBB workers when n is large.
template <class F>
void parallel_chunks(std::int64_t n, F&& f, std::int64_t grain = std::int64_t{1} << 15) {
  if (n <= grain) {
    f(std::int64_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::int64_t>& r) { f(r.begin(), r.end()); });
}

// y[i] += x[i]
inline void add_inplace(float* y, const float* x, std::int64_t n) {
  parallel_chunks(n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) y[i] += x[i];
  });
}

}  // namespace gen3d::models::kernels
