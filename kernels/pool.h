// pool kernels (front declarations).
#pragma once
