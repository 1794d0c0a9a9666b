// Module::flatten_grads and GradArena: one buffer per dtype, aligned slots,
// frozen parameters left out, gradients that stay in their slots through
// backward and zero_grad, and to() taking the parameters out again. Expected
// gradients come from a twin model without an arena, one pass at a time.
#include <cstdint>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// f32 layers, an f64 parameter (the output is f64) and a frozen f32 one.
struct Mixed : nn::Module {
    explicit Mixed(uint64_t seed) {
        manual_seed(seed);
        fc1 = register_module("fc1", nn::Linear(5, 3));
        fc2 = register_module("fc2", nn::Linear(3, 2));
        scale = register_parameter("scale", random_tensor({2}, DType::f64, seed + 1));
        frozen = register_parameter("frozen", random_tensor({2}, DType::f32, seed + 2), false);
    }
    Tensor forward(const Tensor& x) override {
        return (fc2->forward(tanh(fc1->forward(x))) + frozen) * scale;
    }
    std::shared_ptr<nn::Linear> fc1, fc2;
    Tensor scale, frozen;
};

struct Batch {
    Tensor x, r;  // input [4, 5] f32; L = Σ model(x) · r, r [4, 2] f64
};

Batch batch(uint64_t seed) {
    return {random_tensor({4, 5}, DType::f32, seed), random_tensor({4, 2}, DType::f64, seed + 1)};
}

void step(nn::Module& m, const Batch& b) { sum(m(b.x) * b.r).backward(); }

// Each trainable parameter's gradient summed over `batches`: one backward per
// batch on a twin with the same weights and no arena, added on the host.
std::vector<std::vector<double>> reference(const Mixed& m, const std::vector<Batch>& batches) {
    Mixed twin(999);
    twin.load_state_dict(m.state_dict());
    std::vector<std::vector<double>> sums;
    for (const Batch& b : batches) {
        twin.zero_grad();
        step(twin, b);
        size_t k = 0;
        for (const Tensor& p : twin.parameters()) {
            if (!p.requires_grad()) continue;
            const std::vector<double> g = values(p.grad());
            if (sums.size() <= k) sums.emplace_back(g.size(), 0.0);
            for (size_t i = 0; i < g.size(); ++i) sums[k][i] += g[i];
            ++k;
        }
    }
    return sums;
}

void check_grads(const Mixed& m, const std::vector<std::vector<double>>& want) {
    size_t k = 0;
    for (const auto& [name, p] : m.named_parameters()) {
        if (!p.requires_grad()) continue;
        INFO(name);
        check_close(p.grad(), want[k++], rtol_for(p.dtype()), 1e-6);
    }
}

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

// Every slot's gradient is its view of the buffer: same address, contiguous.
void check_in_arena(const nn::GradArena& arena) {
    for (const nn::GradGroup& g : arena.groups())
        for (const nn::GradSlot& s : g.slots) {
            INFO(s.name);
            REQUIRE(s.param.grad().defined());
            REQUIRE(address(s.param.grad()) ==
                    address(g.buffer) + uintptr_t(s.offset * dtype_size(g.dtype)));
            REQUIRE(s.param.grad().is_contiguous());
            REQUIRE(autograd::grad_in_slot(s.param));
        }
}

// The padding between and after slots is still zero: nothing wrote outside a slot.
void check_padding_zero(const nn::GradArena& arena) {
    for (const nn::GradGroup& g : arena.groups()) {
        std::vector<double> b = values(g.buffer);
        for (const nn::GradSlot& s : g.slots)
            for (int64_t i = 0; i < s.numel; ++i) b[size_t(s.offset + i)] = 0;
        for (double v : b) REQUIRE(v == 0);
    }
}

}  // namespace

TEST_CASE("grad arena: one aligned buffer per dtype, frozen parameters left out",
          "[nn][grad_arena]") {
    Mixed m(1);
    std::shared_ptr<const nn::GradArena> arena = m.flatten_grads();
    REQUIRE(m.grad_arena() == arena);
    REQUIRE(arena->groups().size() == 2);
    const nn::GradGroup* f32 = arena->group(DType::f32, Device::cpu());
    const nn::GradGroup* f64 = arena->group(DType::f64, Device::cpu());
    REQUIRE(f32 != nullptr);
    REQUIRE(f64 != nullptr);
    REQUIRE(arena->group(DType::f16, Device::cpu()) == nullptr);

    std::vector<std::string> names;
    for (const nn::GradSlot& s : f32->slots) names.push_back(s.name);
    REQUIRE(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
    REQUIRE(f64->slots.size() == 1);
    REQUIRE(f64->slots[0].name == "scale");
    REQUIRE_FALSE(autograd::grad_slot(m.frozen).defined());

    for (const nn::GradGroup* g : {f32, f64}) {
        REQUIRE(g->buffer.dim() == 1);
        REQUIRE(g->buffer.is_contiguous());
        REQUIRE(address(g->buffer) % nn::kGradArenaAlignment == 0);
        int64_t end = 0;
        for (const nn::GradSlot& s : g->slots) {
            REQUIRE((s.offset * dtype_size(g->dtype)) % nn::kGradArenaAlignment == 0);
            REQUIRE(s.offset >= end);  // in order, never overlapping
            REQUIRE(s.numel == s.param.numel());
            end = s.offset + s.numel;
        }
        REQUIRE(g->buffer.numel() >= end);
        REQUIRE((g->buffer.numel() * dtype_size(g->dtype)) % nn::kGradArenaAlignment == 0);
        for (double v : values(g->buffer)) REQUIRE(v == 0);
    }
    // fc1.weight holds 15 f32 (60 bytes): fc1.bias starts at the next 64 bytes.
    REQUIRE(f32->slots[1].offset == 16);
    // No parameter had a gradient, and none has one yet.
    for (const Tensor& p : m.parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("grad arena: gradients stay in their slots through backward", "[nn][grad_arena]") {
    Mixed m(2);
    const std::vector<Batch> batches = {batch(20), batch(21), batch(22)};
    std::shared_ptr<const nn::GradArena> arena = m.flatten_grads();
    for (size_t i = 0; i < batches.size(); ++i) {
        step(m, batches[i]);
        check_in_arena(*arena);
        check_grads(
            m, reference(m, std::vector<Batch>(batches.begin(), batches.begin() + int64_t(i) + 1)));
    }
    check_padding_zero(*arena);
    REQUIRE_FALSE(m.frozen.grad().defined());

    // The buffer is the gradients: scaling it (as an all-reduce averages) scales them.
    const std::vector<double> before = values(m.fc2->weight.grad());
    {
        NoGradGuard no_grad;
        mul_(arena->group(DType::f32, Device::cpu())->buffer, 0.5);
    }
    std::vector<double> half = before;
    for (double& v : half) v *= 0.5;
    check_close(m.fc2->weight.grad(), half, 0, 0);
}

TEST_CASE("grad arena: a gradient present before flattening is copied in", "[nn][grad_arena]") {
    Mixed m(3);
    const Batch b = batch(30);
    step(m, b);
    std::vector<std::vector<double>> had;
    for (const Tensor& p : m.parameters())
        if (p.requires_grad()) had.push_back(values(p.grad()));
    std::shared_ptr<const nn::GradArena> arena = m.flatten_grads();
    check_in_arena(*arena);
    check_grads(m, had);
    const Batch b2 = batch(31);
    step(m, b2);
    check_in_arena(*arena);
    check_grads(m, reference(m, {b, b2}));
}

TEST_CASE("grad arena: zero_grad keeps the slots", "[nn][grad_arena]") {
    Mixed m(4);
    const Batch b1 = batch(40), b2 = batch(41);
    std::shared_ptr<const nn::GradArena> arena = m.flatten_grads();
    step(m, b1);
    step(m, b2);

    m.zero_grad(false);  // zeros in place
    check_in_arena(*arena);
    for (const nn::GradGroup& g : arena->groups())
        for (double v : values(g.buffer)) REQUIRE(v == 0);
    step(m, b1);
    check_in_arena(*arena);
    check_grads(m, reference(m, {b1}));

    m.zero_grad();  // to none, PyTorch's default; the buffers read as zeros
    for (const Tensor& p : m.parameters()) REQUIRE_FALSE(p.grad().defined());
    for (const nn::GradGroup& g : arena->groups())
        for (double v : values(g.buffer)) REQUIRE(v == 0);
    step(m, b2);  // the first gradient is copied into its slot again
    check_in_arena(*arena);
    check_grads(m, reference(m, {b2}));
    step(m, b1);
    check_in_arena(*arena);
    check_grads(m, reference(m, {b2, b1}));
    check_padding_zero(*arena);
}

TEST_CASE("grad arena: a held gradient in a slot sees later sums", "[nn][grad_arena]") {
    Mixed m(5);
    const Batch b1 = batch(50), b2 = batch(51);
    std::shared_ptr<const nn::GradArena> arena = m.flatten_grads();
    step(m, b1);
    Tensor held = m.fc1->weight.grad();
    step(m, b2);
    check_in_arena(*arena);  // the slot is kept, the documented exception to "never changed"
    check_close(held, values(m.fc1->weight.grad()), 0, 0);
}

TEST_CASE("grad arena: to() takes the parameters out of it", "[nn][grad_arena]") {
    Mixed m(6);
    const Batch b1 = batch(60), b2 = batch(61);
    std::shared_ptr<const nn::GradArena> old = m.flatten_grads();
    step(m, b1);
    const std::vector<std::vector<double>> want1 = reference(m, {b1});

    SECTION("to(dtype)") {
        m.to(DType::f64);
        REQUIRE(m.grad_arena() == nullptr);
        for (const auto& [name, p] : m.named_parameters()) {
            INFO(name);
            REQUIRE_FALSE(autograd::grad_slot(p).defined());
            if (!p.requires_grad()) continue;
            REQUIRE(p.grad().dtype() == DType::f64);
            REQUIRE_FALSE(old->holds(p.grad()));
        }
        check_grads(m, want1);
        // Later gradients no longer reach the old buffers.
        std::vector<std::vector<double>> old_values;
        for (const nn::GradGroup& g : old->groups()) old_values.push_back(values(g.buffer));
        const Batch b2_f64 = {b2.x.to(DType::f64), b2.r};
        step(m, b2_f64);
        for (size_t i = 0; i < old->groups().size(); ++i)
            check_close(old->groups()[i].buffer, old_values[i], 0, 0);

        std::shared_ptr<const nn::GradArena> again = m.flatten_grads();
        REQUIRE(again->groups().size() == 1);  // everything is f64 now
        REQUIRE(again->groups()[0].dtype == DType::f64);
        check_in_arena(*again);
    }
    SECTION("to(device)") {
        m.to(Device::cpu());  // even where nothing moves, the arena is given up
        REQUIRE(m.grad_arena() == nullptr);
        for (const Tensor& p : m.parameters()) {
            REQUIRE_FALSE(autograd::grad_slot(p).defined());
            if (p.requires_grad()) REQUIRE_FALSE(old->holds(p.grad()));
        }
        check_grads(m, want1);
        step(m, b2);
        check_grads(m, reference(m, {b1, b2}));
    }
}
