#pragma once
// oneTBB owns the threads (CONVENTIONS 16): BLAS must run single-threaded inside TBB tasks.
// OpenBLAS is asked for one thread through its runtime API when the symbol is present
// (looked up with dlsym, so any CBLAS works); other BLAS builds are left as they are.

namespace gen3d::models {

// Puts BLAS in single-thread mode; idempotent, cheap after the first call. Every kernel that
// calls BLAS calls this first.
void ensure_serial_blas();

// Sets the BLAS thread count (benchmarks only). Returns false if the BLAS has no such API.
bool set_blas_threads(int n);
// Current BLAS thread count, or -1 when unknown.
int blas_threads();

}  // namespace gen3d::models
