// conv kernels (front declarations).
#pragma once
