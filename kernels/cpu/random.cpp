// CPU random fills following the Philox stream contract (kernels/random_math.h).
// Every element is computed independently, so the loop splits across threads
// freely and gives the same values for any thread count.
#include "kernels/random.h"

#include <omp.h>

#include "kernels/cpu/loop.h"
#include "kernels/random_math.h"

namespace ember::kernels::cpu {

namespace {
template <class F>
void parallel_index(int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > 4096)
    for (int64_t i = 0; i < n; ++i) f(i);
}
}  // namespace

void uniform(const View& out, uint64_t seed, uint64_t first, double low, double high) {
    visit_floating(out.dtype, "rand", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        T* o = out.ptr<T>();
        const A lo = A(low), span = A(high - low);
        const bool unit = low == 0.0 && high == 1.0;
        parallel_index(out.numel(), [&](int64_t i) {
            const A u = math::uniform_at<T>(seed, first, i);
            o[i] = math::cast<T>(unit ? u : lo + span * u);
        });
    });
}

void normal(const View& out, uint64_t seed, uint64_t first, double mean, double std) {
    visit_floating(out.dtype, "randn", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        T* o = out.ptr<T>();
        const A m = A(mean), s = A(std);
        const bool standard = mean == 0.0 && std == 1.0;
        parallel_index(out.numel(), [&](int64_t i) {
            const A z = math::normal_at<T>(seed, first, i);
            o[i] = math::cast<T>(standard ? z : m + s * z);
        });
    });
}

void randint(const View& out, uint64_t seed, uint64_t first, int64_t low, uint64_t range) {
    visit_dtype(out.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = out.ptr<T>();
        parallel_index(out.numel(), [&](int64_t i) {
            const int64_t v = int64_t(uint64_t(low) + math::randint_at(seed, first, i, range));
            o[i] = math::cast<T>(v);
        });
    });
}

}  // namespace ember::kernels::cpu
