// reduce kernels (front declarations).
#pragma once
