// Portability macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__
#define EMBER_INLINE __forceinline__
#else
#define EMBER_HD
#define EMBER_INLINE inline
#endif
