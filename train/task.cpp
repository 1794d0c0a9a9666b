// A task's forward and loss (or their defaults), and its evaluation.
#include "train/task.h"

#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "data/loader.h"
#include "kernels/factories.h"

namespace ember::train {

Tensor task_forward(const Task& task, const Tensor& input, bool checkpoint) {
    nn::Module& model = *task.model;
    if (task.forward) return task.forward(model, input, checkpoint);
    if (!checkpoint) return model(input);
    return autograd::checkpoint(
        [&model](const std::vector<Tensor>& in) { return model.forward(in[0]); }, {input});
}

Tensor task_loss(const Task& task, const Tensor& output, const Tensor& target,
                 Reduction reduction) {
    if (task.criterion) return task.criterion(output, target, reduction);
    if (output.dim() == 2) return cross_entropy(output, target, {.reduction = reduction});
    // Logits [..., C] against targets [...]: one row per target.
    const int64_t classes = output.size(-1);
    return cross_entropy(output.reshape({-1, classes}), target.reshape({-1}),
                         {.reduction = reduction});
}

Tensor in_format(const Tensor& images, MemoryFormat format) {
    return images.dim() == 4 ? images.contiguous(format) : images;
}

Evaluation evaluate(const Task& task, Device device, const std::string& amp, int workers) {
    nn::Module& model = *task.model;
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    data::Loader loader(task.eval_data,
                        {.batch_size = task.eval_batch_size, .shuffle = false, .workers = workers,
                         .device = device},
                        task.eval_transforms);
    const bool accuracy = task.metric == Metric::accuracy;
    Tensor loss_sum = zeros({}, {DType::f64, device}), correct = zeros({}, {DType::f64, device});
    int64_t targets = 0;
    for (data::Batch& b : loader.epoch(0)) {
        amp::autocast ac(amp == "f16" ? DType::f16 : DType::bf16, amp != "off");
        const Tensor out = task_forward(task, in_format(b.input, task.memory_format), false);
        loss_sum = add(loss_sum, task_loss(task, out, b.target, Reduction::sum).to(DType::f64));
        if (accuracy)
            correct = add(correct, sum(eq(argmax(out, out.dim() - 1), b.target).to(DType::f64)));
        targets += b.target.numel();
    }
    model.train(was_training);
    Evaluation e;
    e.samples = task.eval_data->size();
    e.targets = targets;
    e.loss = targets > 0 ? loss_sum.item() / double(targets) : 0;
    if (accuracy) e.accuracy = targets > 0 ? correct.item() / double(targets) : 0;
    return e;
}

}  // namespace ember::train
