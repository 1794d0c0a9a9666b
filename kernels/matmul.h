// matmul kernels (front declarations).
#pragma once
