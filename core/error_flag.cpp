// The host side of the kernel error flag: tickets and the error message.
// Note [Device error flag] in core/error_flag.h.
#include "core/error_flag.h"

#include <optional>
#include <utility>

#include "core/error.h"

namespace ember {

ErrorFlag::ErrorFlag(ErrorFlagState* state, std::string where,
                     std::function<void(ErrorFlagState*)> release)
    : state_(state), where_(std::move(where)), release_(std::move(release)) {
    EMBER_INTERNAL_ASSERT(state_ != nullptr);
}

ErrorFlag::~ErrorFlag() {
    if (release_) release_(state_);
}

ErrorFlagRef ErrorFlag::arm(const char* op, const char* what, int64_t bound) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int32_t ticket = next_ticket_;
    next_ticket_ = next_ticket_ == INT32_MAX ? 1 : next_ticket_ + 1;  // 0 means "not raised"
    if (armed_.size() == kRemembered) armed_.pop_front();
    armed_.push_back({ticket, op, what, bound});
    return {state_, ticket};
}

void ErrorFlag::check() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int32_t ticket = __atomic_load_n(&state_->ready, __ATOMIC_ACQUIRE);
    if (ticket == 0) return;  // nothing raised, or a raise still being written
    const int64_t index = state_->index, value = state_->value;
    std::optional<Armed> found;
    for (const Armed& a : armed_)
        if (a.ticket == ticket) found = a;
    // Clear for later raises: the value first, the claim last.
    __atomic_store_n(&state_->ready, 0, __ATOMIC_RELAXED);
    state_->index = state_->value = 0;
    __atomic_store_n(&state_->ticket, 0, __ATOMIC_RELEASE);
    if (!found)
        EMBER_FAIL("a kernel on ", where_, " found a bad value ", value, " at position ", index,
                   " (launch ", ticket, ", too long ago to say which op; set_sync_debug(true) "
                   "reports such errors at once)");
    EMBER_FAIL(found->op, ": ", found->what, " ", value, " at position ", index,
               " is out of range [0, ", found->bound, ") (found by a kernel on ", where_,
               "; reported at the next synchronization, or at once in sync-debug mode)");
}

}  // namespace ember
