// elementwise kernels (front declarations).
#pragma once
