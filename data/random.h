// The Philox streams data/ draws from, and SampleRng: the per-sample random
// stream augmentations use. Ops use stream 0 (docs/rng.md); data/ uses streams
// whose top byte is a tag, so a loader seeded like the default generator can
// never repeat the numbers of a random op (layout: docs/data.md).
#pragma once

#include <cstdint>

#include "../core/error.h"
#include "../core/philox.h"

namespace ember::data {

/// Stream tags (the counter's high 64 bits are `tag | sub`, sub < 2^56).
inline constexpr uint64_t kShuffleStream = uint64_t(1) << 56;  // | epoch: the permutation
inline constexpr uint64_t kAugmentStream = uint64_t(2) << 56;  // | epoch: per-sample draws
inline constexpr uint64_t kSyntheticStream = uint64_t(3)
                                             << 56;  // | 0 labels, 1 noise, 2 prototypes
/// Largest epoch (and sub-stream) the layout can address.
inline constexpr uint64_t kMaxStreamSub = (uint64_t(1) << 56) - 1;
/// Blocks each sample position owns in the augmentation stream (1024 words).
inline constexpr uint64_t kAugmentBlocksPerSample = 256;

/// 32-bit words from consecutive Philox blocks of one (seed, stream), starting
/// at `first_block`: what a random transform draws for one sample. Each
/// transform draws a fixed number of words whatever the data, so the words a
/// later transform sees never depend on pixel values.
class SampleRng {
  public:
    SampleRng(uint64_t seed, uint64_t stream, uint64_t first_block,
              uint64_t max_blocks = ~uint64_t(0))
        : seed_(seed), stream_(stream), block_(first_block), end_(first_block + max_blocks) {}

    /// The next 32-bit word.
    uint32_t next_u32() {
        if (word_ == 4) {
            EMBER_CHECK(block_ != end_, "SampleRng: a sample drew more than ",
                        kAugmentBlocksPerSample * 4, " random words (too many random transforms)");
            buf_ = philox_block(seed_, block_++, stream_);
            word_ = 0;
        }
        return buf_.x[word_++];
    }
    /// Uniform in [0, 1) with 24 bits (like rand in f32).
    float uniform() { return uniform_f32(next_u32()); }
    /// An integer in [0, n), n in [1, 2^32], by multiply-shift (like randint).
    int64_t below(int64_t n) { return int64_t(bounded_u32(next_u32(), uint64_t(n))); }

  private:
    uint64_t seed_, stream_, block_, end_;
    Philox4 buf_{};
    int word_ = 4;
};

/// The rng of sample position `pos` (0-based in the epoch's order) of `epoch`
/// under `seed`: blocks [pos * 256, pos * 256 + 256) of stream kAugmentStream | epoch.
inline SampleRng augment_rng(uint64_t seed, uint64_t epoch, uint64_t pos) {
    return SampleRng(seed, kAugmentStream | epoch, pos * kAugmentBlocksPerSample,
                     kAugmentBlocksPerSample);
}

}  // namespace ember::data
