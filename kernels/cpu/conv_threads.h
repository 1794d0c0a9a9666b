// How the CPU conv kernels (kernels/cpu/conv_backward.cpp, conv_direct.cpp,
// conv_nhwc.cpp) spread their work items over OpenMP threads. Internal to
// those files.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ember::kernels::cpu::conv_detail {

/// Below this many multiply-adds in total a pass runs on one thread: an
/// OpenMP team costs microseconds.
inline constexpr int64_t kParallelMinWork = int64_t(1) << 18;

/// Threads for `items` pieces of `work` multiply-adds in total (1 inside
/// another parallel region).
inline int team_size(int64_t items, int64_t work) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads <= 1 || items <= 1 || work < kParallelMinWork) return 1;
    return int(std::min<int64_t>(threads, items));
}

/// Calls body(item, thread) for items [0, items) on `team` threads, in
/// static blocks. Inside the team omp_set_num_threads(1) sets the
/// thread-count ICV of the team's own tasks only: Eigen reads it and stays
/// on one thread, also when team is 1.
template <class F>
void for_items(int64_t items, int team, F&& body) {
#pragma omp parallel num_threads(team)
    {
        omp_set_num_threads(1);
        const int t = omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t i = 0; i < items; ++i) body(i, t);
    }
}

/// Images per chunk of a weight gradient summed over the batch: as many as
/// keep a chunk's `bytes_per_image` within `chunk_bytes` (L2), then evened
/// out so that the chunk count is a multiple of 8 (whole rounds for 2, 4 or
/// 8 threads). From the sizes alone, so the partial sums are the same for
/// any thread count.
inline int64_t chunk_images(int64_t n, int64_t bytes_per_image, int64_t chunk_bytes) {
    const int64_t fit = std::max<int64_t>(1, chunk_bytes / std::max<int64_t>(bytes_per_image, 1));
    const int64_t m = std::max<int64_t>(1, std::min(fit, n));
    if (n < 8) return m;
    const int64_t chunks = ((n + m - 1) / m + 7) / 8 * 8;
    return (n + chunks - 1) / chunks;
}

}  // namespace ember::kernels::cpu::conv_detail
