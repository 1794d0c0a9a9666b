// The IDX format (MNIST, Fashion-MNIST): a big-endian header — magic
// 0x00 0x00 <type> <ndims>, then ndims u32 sizes — and the elements, row-major,
// big-endian. Files may be gzip-compressed (`*-ubyte.gz`). Every size is
// validated before anything is allocated: a bad file is an ember::Error that
// names it and says what is wrong, never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <string>

#include "../core/tensor.h"

namespace ember::data {

/// Largest number of dims read_idx accepts.
inline constexpr int kMaxIdxDims = 8;

/// What an IDX header says, validated against the file.
struct IdxInfo {
    int type_code = 0;        // 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
    DType dtype = DType::u8;  // what read_idx returns for it (i8 and i16 widen to i32)
    int element_bytes = 1;    // as stored in the file
    Shape shape;
    int64_t header_bytes = 0;  // where the data starts (4 + 4 * ndims)
    int64_t data_bytes = 0;    // numel * element_bytes
    bool compressed = false;   // gzip
};

/// Reads and checks the header of an IDX file (raw or gzip). For a raw file
/// the data length is checked against the file size too; a gzip file's length
/// is only known once decompressed (read_idx checks it).
IdxInfo read_idx_info(const std::string& path);

/// Reads a whole IDX file, raw or gzip-compressed (told apart by the bytes,
/// not the name), into a new host tensor of the header's shape: u8 stays u8,
/// i8 and i16 widen to i32, i32, f32 and f64 are converted from big-endian.
/// Compressed data is inflated once, straight into the tensor, and never past
/// the header's size: the header must match the decompressed length exactly.
Tensor read_idx(const std::string& path);

}  // namespace ember::data
