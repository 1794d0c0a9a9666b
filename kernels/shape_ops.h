// shape_ops kernels (front declarations).
#pragma once
