#pragma once
// Shared by the cuda tests: skip without a GPU, else install the backend.

#include <gtest/gtest.h>

#include "models/cuda/backend.h"

#define GEN3D_REQUIRE_GPU()                                                       \
  do {                                                                            \
    if (!::gen3d::models::cuda::gpu_visible())                                    \
      GTEST_SKIP() << "no CUDA GPU visible: the cuda tests run on a GPU machine " \
                      "(scripts/device_check.sh)";                                \
    ::gen3d::models::cuda::install();                                             \
  } while (0)
