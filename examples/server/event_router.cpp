#include "event_router.hpp"

#include <string>
#include <utility>

namespace photon::server {

namespace {

// How long the dispatcher sleeps in Engine::poll before re-checking whether it
// should stop; events wake it at once.
constexpr std::chrono::milliseconds kPollWait{50};

}  // namespace

// ---- RequestStream ---------------------------------------------------------

RequestStream::RequestStream(RequestStream&& other) noexcept
    : router_(std::exchange(other.router_, nullptr)), id_(other.id_) {}

RequestStream& RequestStream::operator=(RequestStream&& other) noexcept {
  if (this != &other) {
    release();
    router_ = std::exchange(other.router_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

RequestStream::~RequestStream() { release(); }

void RequestStream::release() noexcept {
  if (router_ != nullptr) std::exchange(router_, nullptr)->release(id_);
}

RequestStream::Wait RequestStream::wait(std::vector<Event>& out, std::chrono::milliseconds timeout) {
  if (router_ == nullptr) return Wait::closed;
  return router_->wait(id_, out, timeout);
}

void RequestStream::cancel() {
  // unknown_request cannot happen: the id came from the engine.
  if (router_ != nullptr) (void)router_->engine_.cancel(id_);
}

// ---- EventRouter -----------------------------------------------------------

EventRouter::EventRouter(Engine& engine, int32_t max_open)
    : engine_(engine), max_open_(max_open), dispatcher_([this] { dispatch(); }) {}

EventRouter::~EventRouter() {
  close();
  dispatcher_.join();
}

Result<RequestStream> EventRouter::submit(Request request) {
  {
    std::lock_guard lk(mutex_);
    if (closed_) return fail(Errc::cancelled, "the server is shutting down");
    if (open_ >= max_open_)
      return fail(Errc::queue_full, "the server already serves " + std::to_string(max_open_) +
                                        " requests, its limit (--max-pending); retry later");
    ++open_;
    ++in_flight_;  // before the engine knows the request, so its finish never finds in_flight_ == 0
  }
  Result<RequestId> id = engine_.submit(std::move(request));
  bool cancel_now = false;
  {
    std::lock_guard lk(mutex_);
    if (!id) {
      --open_;
      --in_flight_;
      return fail(std::move(id).error());
    }
    Mailbox& box = mailbox(*id);
    box.attached = true;
    cancel_now = closed_;  // closed while submitting: close() did not see this request
  }
  work_cv_.notify_one();
  if (cancel_now) (void)engine_.cancel(*id);
  return RequestStream(this, *id);
}

void EventRouter::close() {
  std::vector<RequestId> to_cancel;
  {
    std::lock_guard lk(mutex_);
    if (closed_) return;
    closed_ = true;
    for (auto& [id, box] : boxes_) {
      if (box->attached && !box->released && !box->finished) to_cancel.push_back(id);
      box->cv.notify_all();
    }
  }
  work_cv_.notify_all();
  for (RequestId id : to_cancel) (void)engine_.cancel(id);
}

int32_t EventRouter::open_requests() const {
  std::lock_guard lk(mutex_);
  return open_;
}

EventRouter::Mailbox& EventRouter::mailbox(RequestId id) {
  std::unique_ptr<Mailbox>& slot = boxes_[id];
  if (!slot) slot = std::make_unique<Mailbox>();
  return *slot;
}

void EventRouter::dispatch() {
  std::vector<Event> batch;
  for (;;) {
    {
      std::unique_lock lk(mutex_);
      work_cv_.wait(lk, [this] { return closed_ || in_flight_ > 0; });
      if (closed_) return;
    }
    batch.clear();
    if (engine_.poll(batch, kPollWait) > 0) route(batch);
  }
}

void EventRouter::route(std::vector<Event>& batch) {
  std::lock_guard lk(mutex_);
  for (Event& e : batch) {
    const RequestId id = e.request;
    const bool finish = e.finish != FinishReason::none;
    Mailbox& box = mailbox(id);
    if (finish) {
      box.finished = true;
      --in_flight_;
    }
    if (box.released) {
      if (finish) boxes_.erase(id);
      continue;
    }
    box.events.push_back(std::move(e));
    box.cv.notify_one();
  }
}

RequestStream::Wait EventRouter::wait(RequestId id, std::vector<Event>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mutex_);
  auto it = boxes_.find(id);
  if (it == boxes_.end()) return RequestStream::Wait::closed;  // not reachable while the stream lives
  Mailbox& box = *it->second;
  box.cv.wait_for(lk, timeout, [&] { return !box.events.empty() || closed_; });
  if (!box.events.empty()) {
    for (Event& e : box.events) out.push_back(std::move(e));
    box.events.clear();
    return RequestStream::Wait::events;
  }
  return closed_ ? RequestStream::Wait::closed : RequestStream::Wait::timeout;
}

void EventRouter::release(RequestId id) {
  bool cancel = false;
  {
    std::lock_guard lk(mutex_);
    --open_;
    auto it = boxes_.find(id);
    if (it != boxes_.end()) {
      Mailbox& box = *it->second;
      if (box.finished || closed_) {
        boxes_.erase(it);
      } else {
        box.released = true;  // the finish event erases it
        box.events.clear();
        cancel = true;
      }
    }
  }
  if (cancel) (void)engine_.cancel(id);
}

}  // namespace photon::server
