// The collectives against values every rank can compute for itself: rank r's
// contribution is a seeded random tensor of seed (r, case), so each rank
// knows every other rank's data and the exact result in f64.
#include "support/dist_comm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                             DType::i64};

Tensor contribution(int rank, int64_t n, DType d, uint64_t salt) {
    return random_tensor({n}, d, 1000 * salt + uint64_t(rank), -50, 50);
}

double tol(DType d) { return d == DType::f16 ? 2e-3 : d == DType::bf16 ? 1e-2 : 1e-6; }

}  // namespace

TEST_CASE("all_reduce: sum, average and max of every dtype and odd sizes", "[dist]") {
    dist::Communicator& w = world();
    uint64_t salt = 1;
    for (DType d : kDTypes)
        for (int64_t n : {0, 1, 7, 1000, 4099}) {
            for (dist::ReduceOp op :
                 {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max}) {
                if (op == dist::ReduceOp::average && !is_floating(d)) continue;
                ++salt;
                INFO(dtype_name(d) << " n=" << n << " " << dist::reduce_op_name(op));
                std::vector<double> want(size_t(n), op == dist::ReduceOp::max ? -1e300 : 0.0);
                for (int r = 0; r < w.size(); ++r) {
                    const std::vector<double> v = values(contribution(r, n, d, salt));
                    for (int64_t i = 0; i < n; ++i)
                        want[size_t(i)] = op == dist::ReduceOp::max
                                              ? std::max(want[size_t(i)], v[size_t(i)])
                                              : want[size_t(i)] + v[size_t(i)];
                }
                if (op == dist::ReduceOp::average)
                    for (double& x : want) x /= w.size();
                Tensor t = contribution(w.rank(), n, d, salt);
                w.all_reduce(t, op, "test");
                CHECK(t.dtype() == d);
                check_close(t, want, tol(d), tol(d));
            }
        }
}

TEST_CASE("broadcast, all_gather and reduce_scatter", "[dist]") {
    dist::Communicator& w = world();
    const int root = w.size() - 1;
    uint64_t salt = 100;
    for (DType d : kDTypes) {
        ++salt;
        INFO(dtype_name(d));
        Tensor b = contribution(w.rank(), 33, d, salt);
        w.broadcast(b, root);
        check_close(b, values(contribution(root, 33, d, salt)), 0, 0);

        Tensor in = contribution(w.rank(), 5, d, salt);
        Tensor out = empty({w.size() * 5}, {.dtype = d});
        w.all_gather(out, in);
        std::vector<double> gathered;
        for (int r = 0; r < w.size(); ++r)
            for (double x : values(contribution(r, 5, d, salt))) gathered.push_back(x);
        check_close(out, gathered, 0, 0);

        Tensor whole = contribution(w.rank(), 6 * w.size(), d, salt + 7);
        Tensor mine = empty({6}, {.dtype = d});
        w.reduce_scatter(mine, whole, dist::ReduceOp::sum);
        std::vector<double> want(6, 0.0);
        for (int r = 0; r < w.size(); ++r) {
            const std::vector<double> v = values(contribution(r, 6 * w.size(), d, salt + 7));
            for (int i = 0; i < 6; ++i) want[size_t(i)] += v[size_t(w.rank() * 6 + i)];
        }
        check_close(mine, want, tol(d), tol(d));
    }
    w.barrier("end of broadcast test");
}

TEST_CASE("asynchronous collectives complete in any wait order", "[dist]") {
    dist::Communicator& w = world();
    Tensor a = full({257}, double(w.rank() + 1)), b = full({3}, 2.0 * (w.rank() + 1));
    auto wa = w.all_reduce_async(a, dist::ReduceOp::sum, "a");
    auto wb = w.all_reduce_async(b, dist::ReduceOp::max, "b");
    wb->wait();
    wa->wait();
    CHECK(wa->done());
    const double n = w.size();
    check_close(a, std::vector<double>(257, n * (n + 1) / 2), 0, 0);
    check_close(b, std::vector<double>(3, 2.0 * n), 0, 0);
}

TEST_CASE("broadcast, all_gather and reduce_scatter of zero elements", "[dist]") {
    dist::Communicator& w = world();
    for (DType d : kDTypes) {
        INFO(dtype_name(d));
        Tensor b = empty({0}, {.dtype = d});
        w.broadcast(b, w.size() - 1, "empty");
        CHECK(b.numel() == 0);
        Tensor out = empty({0}, {.dtype = d});
        w.all_gather(out, empty({0}, {.dtype = d}), "empty");
        CHECK(out.numel() == 0);
        Tensor mine = empty({0}, {.dtype = d});
        w.reduce_scatter(mine, empty({0}, {.dtype = d}), dist::ReduceOp::sum, "empty");
        CHECK(mine.numel() == 0);
    }
    // Every rank still issues the same collectives: one with data agrees.
    Tensor t = full({3}, double(w.rank() + 1));
    w.all_reduce(t, dist::ReduceOp::sum, "after the empty ones");
    const double n = w.size();
    check_close(t, std::vector<double>(3, n * (n + 1) / 2), 0, 0);
}

TEST_CASE("asynchronous broadcast, all_gather, reduce_scatter and barrier, waited out of order",
          "[dist]") {
    dist::Communicator& w = world();
    const int root = w.size() - 1, n = w.size();
    uint64_t salt = 200;
    for (DType d : {DType::f64, DType::bf16, DType::i32}) {  // bf16: converted back on wait
        salt += 10;
        INFO(dtype_name(d));
        Tensor b = contribution(w.rank(), 9, d, salt);
        Tensor gathered = full({4 * n}, 7, {.dtype = d});
        Tensor block = full({3}, 7, {.dtype = d});
        Tensor a = contribution(w.rank(), 11, d, salt + 3);
        std::vector<std::unique_ptr<dist::Work>> works;
        works.push_back(w.broadcast_async(b, root, "b"));
        works.push_back(w.all_gather_async(gathered, contribution(w.rank(), 4, d, salt + 1), "g"));
        works.push_back(w.barrier_async("between"));
        works.push_back(w.reduce_scatter_async(block, contribution(w.rank(), 3 * n, d, salt + 2),
                                               dist::ReduceOp::sum, "r"));
        works.push_back(w.all_reduce_async(a, dist::ReduceOp::max, "a"));
        // Each rank waits in an order of its own, none of them the issue order.
        const size_t orders[2][5] = {{4, 2, 0, 3, 1}, {1, 3, 4, 0, 2}};
        for (size_t k : orders[w.rank() % 2]) works[k]->wait();
        for (auto& work : works) CHECK(work->done());

        check_close(b, values(contribution(root, 9, d, salt)), 0, 0);
        std::vector<double> want_g, want_r(3, 0.0), want_a(11, -1e300);
        for (int r = 0; r < n; ++r) {
            for (double x : values(contribution(r, 4, d, salt + 1))) want_g.push_back(x);
            const std::vector<double> v = values(contribution(r, 3 * n, d, salt + 2));
            for (int i = 0; i < 3; ++i) want_r[size_t(i)] += v[size_t(w.rank() * 3 + i)];
            const std::vector<double> m = values(contribution(r, 11, d, salt + 3));
            for (size_t i = 0; i < 11; ++i) want_a[i] = std::max(want_a[i], m[i]);
        }
        check_close(gathered, want_g, 0, 0);
        check_close(block, want_r, tol(d), tol(d));
        check_close(a, want_a, 0, 0);
    }
}

TEST_CASE("bad collective arguments are errors on every rank, before any exchange", "[dist]") {
    dist::Communicator& w = world();
    Tensor m = zeros({4, 4});
    REQUIRE_THROWS_WITH_MSG(w.all_reduce(m.transpose(0, 1)), "all_reduce: the tensor of shape");
    REQUIRE_THROWS_WITH_MSG(w.all_reduce(zeros({3}, {.dtype = DType::i64}), dist::ReduceOp::average),
                            "average of i64");
    REQUIRE_THROWS_WITH_MSG(w.all_reduce(zeros({3}, {.dtype = DType::boolean})),
                            "dtype bool is not carried");
    REQUIRE_THROWS_WITH_MSG(w.broadcast(zeros({3}), w.size()), "is not a rank of");
    REQUIRE_THROWS_WITH_MSG(w.all_gather(zeros({3}), zeros({2})), "are not");
    REQUIRE_THROWS_WITH_MSG(w.all_reduce(Tensor()), "undefined");
    // Still usable afterwards.
    Tensor t = ones({2});
    w.all_reduce(t);
    check_close(t, std::vector<double>(2, w.size()), 0, 0);
}

TEST_CASE("launch_info_from_env reads the launcher's variables", "[dist]") {
    const dist::LaunchInfo info = dist::launch_info_from_env();
    CHECK(info.size == world().size());
    CHECK(info.rank == world().rank());
    CHECK(world().local_rank() == info.local_rank);
    CHECK(info.local_rank < info.size);
    CHECK(world().backend() == (info.size > 1 ? "mpi" : "single"));
}
