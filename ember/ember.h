// The public API of ember in one include: tensors, devices and streams, the
// differentiable ops and autograd, nn, the data pipeline, and the profiler. The raw kernels
// (no autograd) are a separate, explicit include: ember/kernels.h.
#pragma once

#include "core/cuda_context.h"
#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/host_cache.h"
#include "core/host_sync.h"
#include "core/launch_count.h"
#include "core/tensor.h"
#include "autograd/ops.h"
#include "kernels/factories.h"
#include "kernels/op_types.h"
#include "kernels/profile.h"
#include "kernels/profile_trace.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/mmap_dataset.h"
#include "data/subset.h"
#include "data/text.h"
#include "data/tokenizer.h"
#include "dist/communicator.h"
#include "dist/ddp.h"
#include "data/transforms.h"

namespace ember {
// The profiler (docs/profiling.md): a scope object, as torch.profiler.profile.
using kernels::Profiler;
using kernels::ProfileRange;
using kernels::Trace;
using kernels::take_trace;
using kernels::write_chrome_trace;
using kernels::read_chrome_trace;
using kernels::summarize;
}  // namespace ember
