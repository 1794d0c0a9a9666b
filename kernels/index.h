// index kernels (front declarations).
#pragma once
