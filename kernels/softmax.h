// softmax kernels (front declarations).
#pragma once
