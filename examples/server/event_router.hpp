// EventRouter: hands the engine's events to the HTTP handler threads that
// wait for them.
//
// Engine::poll drains the events of every request at once, so one dispatcher
// thread owns it: it sleeps in Engine::poll(out, timeout) while requests are
// in flight (on a condition variable while none are) and appends each event
// to the mailbox of its request. A handler submits through the router, gets a
// RequestStream and sleeps on its mailbox's condition variable. No thread
// spins: every wait is on a condition variable, with a timeout only so that
// handlers can check their client's connection.
//
// Thread-safety: submit, close and open_requests from any thread; a
// RequestStream is used by one thread at a time. The router must outlive its
// streams; the engine must outlive the router and be stepped by someone else
// (Engine::start_loop), the router never steps it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "photon/engine.hpp"
#include "photon/result.hpp"

namespace photon::server {

class EventRouter;

// The events of one submitted request. Move-only. Destroying it before the
// request's finish event cancels the request; the router then drops its
// remaining events.
class RequestStream {
 public:
  enum class Wait {
    events,   // `out` received events
    timeout,  // nothing arrived within the timeout
    closed,   // the router closed (server shutdown): nothing more will come
  };

  RequestStream(RequestStream&& other) noexcept;
  RequestStream& operator=(RequestStream&& other) noexcept;
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;
  ~RequestStream();

  RequestId id() const noexcept { return id_; }
  // Appends the request's pending events to `out`, waiting up to `timeout`
  // when there are none. Events come in engine order; the last one has
  // finish != none.
  Wait wait(std::vector<Event>& out, std::chrono::milliseconds timeout);
  // Asks the engine to end the request; a cancelled finish event follows.
  void cancel();

 private:
  friend class EventRouter;
  RequestStream(EventRouter* router, RequestId id) noexcept : router_(router), id_(id) {}
  void release() noexcept;

  EventRouter* router_ = nullptr;  // null once moved from
  RequestId id_ = 0;
};

class EventRouter {
 public:
  // Starts the dispatcher thread. At most `max_open` requests are open (a
  // RequestStream alive) at once; more are refused with queue_full.
  EventRouter(Engine& engine, int32_t max_open);
  ~EventRouter();  // close(), then joins the dispatcher
  EventRouter(const EventRouter&) = delete;
  EventRouter& operator=(const EventRouter&) = delete;

  // Submits `request` to the engine and opens its stream. Errors: queue_full
  // (max_open streams are open), cancelled (closed), and the engine's
  // submit errors unchanged.
  Result<RequestStream> submit(Request request);
  // Cancels every open request in the engine and wakes their handlers, whose
  // waits then return closed; later submits fail. Idempotent.
  void close();
  // Streams alive now.
  int32_t open_requests() const;

 private:
  friend class RequestStream;

  // One request's events. Guarded by mutex_.
  struct Mailbox {
    std::condition_variable cv;
    std::vector<Event> events;
    bool finished = false;  // its finish event was routed
    bool attached = false;  // a RequestStream reads it
    bool released = false;  // that stream is gone: drop further events
  };

  void dispatch();
  void route(std::vector<Event>& batch);
  Mailbox& mailbox(RequestId id);  // under mutex_; creates it when absent
  RequestStream::Wait wait(RequestId id, std::vector<Event>& out, std::chrono::milliseconds timeout);
  void release(RequestId id);

  Engine& engine_;
  const int32_t max_open_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // the dispatcher sleeps here while nothing is in flight
  // Events of a request can be routed before submit() attaches its stream
  // (the loop thread may run the request first), so a mailbox is created by
  // whichever comes first and erased once it is both finished and released.
  std::unordered_map<RequestId, std::unique_ptr<Mailbox>> boxes_;
  int64_t in_flight_ = 0;  // submits in progress plus submitted requests whose finish was not routed
  int32_t open_ = 0;       // open streams plus submits in progress
  bool closed_ = false;

  std::thread dispatcher_;  // last: starts after the state above exists
};

}  // namespace photon::server
