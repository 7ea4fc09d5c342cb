// Clang thread-safety annotations; no-ops for other compilers.
#pragma once

#if defined(__clang__)
#define SV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SV_THREAD_ANNOTATION(x)
#endif

#define SV_GUARDED_BY(x) SV_THREAD_ANNOTATION(guarded_by(x))
#define SV_REQUIRES(...) SV_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SV_EXCLUDES(...) SV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
