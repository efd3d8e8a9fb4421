#pragma once
// GEN3D_VECTOR_CLONES: compile a hot loop for AVX-512 and AVX2 as well as the x86-64 baseline the
// binary targets; the loader picks the widest this CPU runs (an ifunc). Sanitizer builds get the
// baseline only: an ifunc resolver runs before the sanitizer's runtime is ready.

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define GEN3D_NO_VECTOR_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || !defined(__x86_64__)
#define GEN3D_NO_VECTOR_CLONES 1
#endif

#ifdef GEN3D_NO_VECTOR_CLONES
#define GEN3D_VECTOR_CLONES
#else
#define GEN3D_VECTOR_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
