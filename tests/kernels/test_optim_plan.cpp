// The CUDA multi-tensor launch plan (kernels/cuda/optim_plan.h), on the CPU:
// the launches' blocks, looked up as the kernels do (find_entry, chunk_range),
// walk exactly the chunks of kernels::chunk_table in its order, every element
// once; limits on tensors and chunks per launch split where they should; with
// step counts every tensor, empty ones included, has exactly one block that
// writes its next count.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/cuda/optim_plan.h"
#include "kernels/optim.h"

using namespace ember;
using namespace ember::kernels;
using namespace ember::kernels::cuda;

namespace {

// Every block of every launch as (tensor, begin, count), via the kernels' lookup.
std::vector<Chunk> walk_plan(const std::vector<UpdateLaunch>& ls,
                             const std::vector<int64_t>& numels, int64_t chunk,
                             bool empty_block = false) {
    std::vector<Chunk> out;
    int64_t expected_offset = 0;
    for (const UpdateLaunch& l : ls) {
        REQUIRE(l.chunk_offset == expected_offset);
        REQUIRE(!l.entries.empty());
        REQUIRE(l.chunks > 0);
        REQUIRE(l.entries[0].first == 0);
        for (size_t k = 1; k < l.entries.size(); ++k)
            REQUIRE(l.entries[k].first > l.entries[k - 1].first);
        const int n = int(l.entries.size());
        for (int64_t b = 0; b < l.chunks; ++b) {
            const int e = find_entry(n, b, [&](int k) { return l.entries[size_t(k)].first; });
            const LaunchEntry& le = l.entries[size_t(e)];
            const ChunkRange r =
                chunk_range(b, le.first, le.chunk0, numels[size_t(le.tensor)], chunk);
            if (empty_block && numels[size_t(le.tensor)] == 0) {  // its one block, empty
                REQUIRE(r.begin == r.end);
                continue;
            }
            REQUIRE(r.begin < r.end);
            out.push_back({le.tensor, r.begin, r.end - r.begin});
        }
        expected_offset += l.chunks;
    }
    return out;
}

void check_same(const std::vector<Chunk>& got, const std::vector<Chunk>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("chunk " << i);
        CHECK(got[i].tensor == want[i].tensor);
        CHECK(got[i].begin == want[i].begin);
        CHECK(got[i].count == want[i].count);
    }
}

}  // namespace

TEST_CASE("optim plan: the launches walk chunk_table's chunks in order", "[optim][plan]") {
    const std::vector<int64_t> numels = {1, 0, 16384, 16385, 0, 0, 7, 100000, 3, 0};
    const auto ls = update_launches(numels);
    REQUIRE(ls.size() == 1);
    check_same(walk_plan(ls, numels, kCudaChunk), chunk_table(numels, kCudaChunk));
    // Empty tensors get no entry.
    for (const LaunchEntry& e : ls[0].entries) CHECK(numels[size_t(e.tensor)] > 0);
}

TEST_CASE("optim plan: tensor and chunk limits split launches", "[optim][plan]") {
    std::vector<int64_t> numels;
    for (int i = 0; i < 23; ++i) numels.push_back(int64_t(i % 5) * 7 + (i % 3 == 0 ? 0 : 3));
    for (int max_tensors : {1, 2, 5, 64})
        for (int64_t max_chunks : {int64_t(1), int64_t(3), int64_t(1000)}) {
            INFO("max_tensors " << max_tensors << ", max_chunks " << max_chunks);
            const auto ls = update_launches(numels, 4, max_tensors, max_chunks);
            for (const UpdateLaunch& l : ls) {
                CHECK(int(l.entries.size()) <= max_tensors);
                CHECK(l.chunks <= max_chunks);
            }
            check_same(walk_plan(ls, numels, 4), chunk_table(numels, 4));
        }
    // 256 one-chunk tensors fill one launch; the 257th starts another.
    const std::vector<int64_t> many(257, 10);
    const auto ls = update_launches(many);
    REQUIRE(ls.size() == 2);
    CHECK(ls[0].entries.size() == size_t(kMaxLaunchTensors));
    CHECK(ls[1].entries.size() == 1);
    CHECK(ls[1].chunk_offset == 256);
}

TEST_CASE("optim plan: a tensor split across launches continues at its next chunk",
          "[optim][plan]") {
    const std::vector<int64_t> numels = {10, 45, 2};  // chunks of 4: 3, 12, 1
    const auto ls = update_launches(numels, 4, 8, 5);
    REQUIRE(ls.size() == 4);  // 16 chunks, 5 per launch
    CHECK(ls[0].entries.size() == 2);
    CHECK(ls[1].entries.size() == 1);
    CHECK(ls[1].entries[0].tensor == 1);
    CHECK(ls[1].entries[0].chunk0 == 2);
    check_same(walk_plan(ls, numels, 4), chunk_table(numels, 4));
}

TEST_CASE("optim plan: sizes past 2^31 elements and no tensors", "[optim][plan]") {
    const int64_t big = (int64_t(1) << 33) + 5;
    const std::vector<int64_t> numels = {3, big};
    const auto ls = update_launches(numels);
    REQUIRE(ls.size() == 1);
    CHECK(ls[0].chunks == 1 + chunk_count(big, kCudaChunk));
    const int64_t last = ls[0].chunks - 1;
    const int e = find_entry(2, last, [&](int k) { return ls[0].entries[size_t(k)].first; });
    CHECK(e == 1);
    const ChunkRange r = chunk_range(last, ls[0].entries[1].first, 0, big, kCudaChunk);
    CHECK(r.end == big);
    CHECK(r.end - r.begin == big % kCudaChunk);
    CHECK(update_launches({}).empty());
    CHECK(update_launches({0, 0}).empty());
}

TEST_CASE("optim plan: with step counts each tensor has one block that writes its count",
          "[optim][plan]") {
    // Empty tensors first, last and in between; tensors split across launches.
    const std::vector<int64_t> numels = {0, 10, 0, 0, 45, 2, 0, 17, 0};
    for (int max_tensors : {1, 2, 3, 64})
        for (int64_t max_chunks : {int64_t(1), int64_t(4), int64_t(1000)}) {
            INFO("max_tensors " << max_tensors << ", max_chunks " << max_chunks);
            const auto ls = update_launches(numels, 4, max_tensors, max_chunks, true);
            // The elements are still walked exactly once, in chunk_table's order.
            check_same(walk_plan(ls, numels, 4, true), chunk_table(numels, 4));
            // Block by block as the kernels find their entries: the writers.
            std::vector<int> writers(numels.size(), 0);
            for (const UpdateLaunch& l : ls) {
                CHECK(int(l.entries.size()) <= max_tensors);
                CHECK(l.chunks <= max_chunks);
                for (int64_t b = 0; b < l.chunks; ++b) {
                    const int e = find_entry(int(l.entries.size()), b,
                                             [&](int k) { return l.entries[size_t(k)].first; });
                    const LaunchEntry& le = l.entries[size_t(e)];
                    if (writes_count(b, le.first, le.chunk0)) ++writers[size_t(le.tensor)];
                }
            }
            CHECK(writers == std::vector<int>(numels.size(), 1));
            int64_t blocks = 0;
            for (const UpdateLaunch& l : ls) blocks += l.chunks;
            CHECK(blocks == 3 + 12 + 1 + 5 + 5);  // 5 empty tensors, one block each
        }
    // Without step counts empty tensors get no block (the gradient passes).
    const auto plain = update_launches(numels, 4);
    int64_t blocks = 0;
    for (const UpdateLaunch& l : plain) blocks += l.chunks;
    CHECK(blocks == 3 + 12 + 1 + 5);
    CHECK(block_count(0, 4, true) == 1);
    CHECK(block_count(0, 4, false) == 0);
    CHECK(block_count(9, 4, true) == 3);
    // Only empty tensors: one launch of one block each.
    const auto empties = update_launches({0, 0}, kCudaChunk, kMaxLaunchTensors, kMaxLaunchChunks, true);
    REQUIRE(empties.size() == 1);
    CHECK(empties[0].chunks == 2);
}
