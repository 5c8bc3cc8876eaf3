// photon::Engine: forwards to EngineCore (src/scheduler/engine_core.hpp).
// Engine::open lives in engine_open.cpp.
#include "photon/engine.hpp"

#include "api/engine_impl.hpp"
#include "core/try.hpp"

namespace photon {

const char* finish_reason_name(FinishReason r) noexcept {
  switch (r) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "unknown";
}

Engine::Engine(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Result<RequestId> Engine::submit(Request request) { return impl_->core->submit(std::move(request)); }
Result<void> Engine::cancel(RequestId id) { return impl_->core->cancel(id); }
Result<StepStats> Engine::step() { return impl_->core->step(); }
bool Engine::has_work() const { return impl_->core->has_work(); }

size_t Engine::poll(std::vector<Event>& out) { return impl_->core->poll(out); }
size_t Engine::poll(std::vector<Event>& out, std::chrono::milliseconds timeout) {
  return impl_->core->poll(out, timeout);
}
std::vector<Event> Engine::poll() {
  std::vector<Event> out;
  impl_->core->poll(out);
  return out;
}

Result<std::vector<Completion>> Engine::generate(std::span<const Request> requests) {
  return impl_->core->generate(requests);
}
Result<Completion> Engine::generate(const Request& request) {
  PHOTON_ASSIGN_OR_RETURN(auto all, impl_->core->generate(std::span<const Request>(&request, 1)));
  return std::move(all.front());
}

Result<void> Engine::start_loop() { return impl_->core->start_loop(); }
void Engine::stop_loop() { impl_->core->stop_loop(); }
EngineMetrics Engine::metrics() const { return impl_->core->metrics(); }

int32_t Engine::vocab_size() const noexcept { return impl_->core->config().vocab_size; }
int32_t Engine::max_model_len() const noexcept { return impl_->core->config().max_model_len; }
std::span<const int32_t> Engine::eos_token_ids() const noexcept { return impl_->core->config().eos_token_ids; }
int64_t Engine::kv_capacity_tokens() const noexcept { return impl_->core->kv_capacity_tokens(); }
std::string Engine::backend_name() const { return impl_->backend_name; }
const Tokenizer* Engine::tokenizer() const noexcept { return impl_->core->tokenizer(); }

}  // namespace photon
