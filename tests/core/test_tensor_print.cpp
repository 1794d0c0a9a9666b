// Printing tensors and shapes as a libtorch user expects: every value up to
// 1000 elements, summarized around "..." beyond, nested by dimension.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "autograd/ops.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "kernels/factories.h"

using namespace ember;

namespace {
std::string printed(const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
}
}  // namespace

TEST_CASE("print: small tensors show every value, aligned, nested by dimension", "[tensor][print]") {
    CHECK(printed(arange(3)) == "Tensor(f32, cpu, [3])\n[0., 1., 2.]");
    Tensor x = from_vector<float>({0.5f, -1.25f, 3.0f, 10.125f, 0.0f, -2.0f}, {2, 3});
    CHECK(printed(x) == "Tensor(f32, cpu, [2, 3])\n"
                        "[[ 0.5000, -1.2500,  3.0000],\n"
                        " [10.1250,  0.0000, -2.0000]]");
    CHECK(printed(arange(8).view({2, 2, 2}).to(DType::i64)) == "Tensor(i64, cpu, [2, 2, 2])\n"
                                                                "[[[0, 1],\n"
                                                                "  [2, 3]],\n"
                                                                "\n"
                                                                " [[4, 5],\n"
                                                                "  [6, 7]]]");
    CHECK(printed(gt(arange(4), 1.5)) == "Tensor(bool, cpu, [4])\n[false, false,  true,  true]");
    CHECK(printed(full({}, 3.14159)) == "Tensor(f32, cpu, []) 3.1416");
    CHECK(printed(empty({0, 3})) == "Tensor(f32, cpu, [0, 3]) []");
    CHECK(printed(Tensor()) == "Tensor(undefined)");
    // A range too wide for 4 decimals: scientific; non-finite values by name.
    CHECK(printed(from_vector<double>({1e-6, 2.5, NAN, -INFINITY}, {4})) ==
          "Tensor(f64, cpu, [4])\n[1.0000e-06, 2.5000e+00,        nan,       -inf]");
}

TEST_CASE("print: 300 elements print in full, wrapped at 80 columns", "[tensor][print]") {
    const std::string s = printed(arange(300));
    for (int v : {0, 1, 150, 298, 299}) CHECK(s.find(" " + std::to_string(v) + ".") != std::string::npos);
    CHECK(s.find("...") == std::string::npos);
    // Cells of every width from 1 to 11 characters, each wrapped within 80.
    manual_seed(5);
    for (const Tensor& t : {arange(300), randn({300}), mul(randn({300}), 1e5), randn({30, 40})}) {
        std::istringstream lines(printed(t));
        for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 80);
    }
}

TEST_CASE("print: past 1000 elements, 3 at each end of every dimension", "[tensor][print]") {
    CHECK(printed(arange(2000)) ==
          "Tensor(f32, cpu, [2000])\n[   0.,    1.,    2., ..., 1997., 1998., 1999.]");
    CHECK(printed(arange(2000).view({40, 50}).to(DType::i32)) ==
          "Tensor(i32, cpu, [40, 50])\n"
          "[[   0,    1,    2, ...,   47,   48,   49],\n"
          " [  50,   51,   52, ...,   97,   98,   99],\n"
          " [ 100,  101,  102, ...,  147,  148,  149],\n"
          " ...,\n"
          " [1850, 1851, 1852, ..., 1897, 1898, 1899],\n"
          " [1900, 1901, 1902, ..., 1947, 1948, 1949],\n"
          " [1950, 1951, 1952, ..., 1997, 1998, 1999]]");
    // A large random tensor: 6·6·6 values shown, each a value of the tensor.
    manual_seed(0);
    const Tensor r = randn({20, 30, 40});
    const std::string s = printed(r);
    CHECK(s.size() < 4000);
    REQUIRE(s.size() > 3);
    CHECK(s.substr(s.size() - 3) == "]]]");
    const size_t start = s.find_last_of(' ', s.size() - 4) + 1;
    CHECK(std::stod(s.substr(start, s.size() - 3 - start)) ==
          Approx(r.at({19, 29, 39})).epsilon(1e-3).margin(1e-4));
}

TEST_CASE("print: a shape prints as in messages", "[tensor][print]") {
    std::ostringstream os;
    os << Shape{2, 3, 4} << " " << zeros({5, 1}).shape();
    CHECK(os.str() == "[2, 3, 4] [5, 1]");
}
