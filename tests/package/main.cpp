// Uses the installed headers and library: exits 0 when a small computation is right.
#include <ember/ember.h>

#include <cstdio>

int main() {
    ember::Tensor x = ember::arange(0, 6).reshape({2, 3});
    const double v = x.t().contiguous().at({2, 1});  // element [1, 2] of x
    std::printf("ember %s: x.t()[2, 1] = %g\n", "package", v);
    return v == 5.0 ? 0 : 1;
}
