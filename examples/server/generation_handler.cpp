#include "generation_handler.hpp"

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "http_util.hpp"
#include "response_json.hpp"

namespace photon::server {

namespace {

// How often a writer that has no event to send checks that its client is
// still connected.
constexpr std::chrono::milliseconds kClientCheck{100};

// One accepted request being answered; owned by its content provider (shared
// by the provider's copies), so the stream is released, and an unfinished
// request cancelled, whenever httplib drops the response.
class GenerationJob {
 public:
  GenerationJob(ServerState& state, RequestStream stream, ResponseContext ctx, bool include_usage)
      : state_(state),
        stream_(std::move(stream)),
        chat_(ctx.kind == ApiKind::chat),
        include_usage_(include_usage),
        builder_(std::move(ctx)) {}

  // Writes the SSE stream; false aborts the response (the client is gone, or
  // the server is stopping).
  bool write_stream(httplib::DataSink& sink) {
    if (chat_ && !write_sse(sink, dump_json(builder_.role_chunk()))) return client_gone();
    while (!builder_.finished()) {
      const Step s = next_events(sink);
      if (s != Step::events) return s == Step::client_gone ? client_gone() : false;
      if (auto chunk = builder_.take_chunk(); chunk && !write_sse(sink, dump_json(*chunk))) return client_gone();
    }
    count_tokens();
    if (builder_.finish() == FinishReason::error &&
        !write_sse(sink, dump_json(to_json(ApiError{500, "server_error", builder_.error(), {}}))))
      return client_gone();
    if (include_usage_ && !write_sse(sink, dump_json(builder_.usage_chunk()))) return client_gone();
    static constexpr char kDone[] = "data: [DONE]\n\n";
    if (!sink.write(kDone, sizeof(kDone) - 1)) return client_gone();
    sink.done();
    return true;
  }

  // Writes the whole answer once the request finished. An engine failure
  // after the 200 header went out is reported as an error body.
  bool write_whole(httplib::DataSink& sink) {
    while (!builder_.finished()) {
      const Step s = next_events(sink);
      if (s != Step::events) return s == Step::client_gone ? client_gone() : false;
    }
    count_tokens();
    const std::string body = builder_.finish() == FinishReason::error
                                 ? dump_json(to_json(ApiError{500, "server_error", builder_.error(), {}}))
                                 : dump_json(builder_.body());
    if (!sink.write(body.data(), body.size())) return client_gone();
    sink.done();
    return true;
  }

 private:
  enum class Step { events, client_gone, closed };

  // Waits for the request's next events and folds them in; between waits,
  // checks the connection.
  Step next_events(httplib::DataSink& sink) {
    for (;;) {
      events_.clear();
      switch (stream_.wait(events_, kClientCheck)) {
        case RequestStream::Wait::events:
          for (const Event& e : events_) builder_.add(e);
          return Step::events;
        case RequestStream::Wait::closed:
          return Step::closed;
        case RequestStream::Wait::timeout:
          if (!sink.is_writable()) return Step::client_gone;
          break;
      }
    }
  }

  bool client_gone() {
    if (!builder_.finished()) {
      stream_.cancel();
      state_.counters.client_disconnects.fetch_add(1, std::memory_order_relaxed);
    }
    return false;
  }

  void count_tokens() {
    state_.counters.completion_tokens.fetch_add(uint64_t(builder_.completion_tokens()), std::memory_order_relaxed);
  }

  ServerState& state_;
  RequestStream stream_;
  const bool chat_;
  const bool include_usage_;
  ResponseBuilder builder_;
  std::vector<Event> events_;
};

void reject(ServerState& state, httplib::Response& res, const ApiError& e) {
  state.counters.rejected_requests.fetch_add(1, std::memory_order_relaxed);
  send_error(res, e);
}

}  // namespace

void handle_generation(ServerState& state, ApiKind kind, const httplib::Request& req, httplib::Response& res) {
  GenerationRequest gr;
  if (auto err = parse_generation_request(kind, req.body, gr)) return reject(state, res, *err);
  if (!gr.model.empty() && gr.model != state.options.model_name) {
    ApiError e = not_found("the model '" + gr.model + "' is not served here; this server serves '" +
                           state.options.model_name + "' (GET /v1/models)");
    e.param = "model";
    return reject(state, res, e);
  }
  if (auto err = encode_prompt(gr, state.engine.tokenizer())) return reject(state, res, *err);

  ResponseContext ctx;
  ctx.kind = kind;
  ctx.created = unix_seconds();
  ctx.model = state.options.model_name;
  ctx.logprobs = gr.logprobs;
  ctx.return_token_ids = gr.return_token_ids;
  ctx.prompt_tokens = gr.engine.prompt_tokens;
  ctx.tokenizer = state.engine.tokenizer();
  ctx.stop = gr.engine.stop;
  ctx.stop_token_ids = gr.engine.stop_token_ids;
  const size_t prompt_len = ctx.prompt_tokens.size();

  Result<RequestStream> stream = state.router.submit(std::move(gr.engine));
  if (!stream) return reject(state, res, from_photon_error(stream.error(), ""));
  ctx.id = std::string(kind == ApiKind::chat ? "chatcmpl-" : "cmpl-") + state.id_prefix + "-" +
           std::to_string(stream->id());
  state.counters.generation_requests.fetch_add(1, std::memory_order_relaxed);
  state.counters.prompt_tokens.fetch_add(prompt_len, std::memory_order_relaxed);

  auto job = std::make_shared<GenerationJob>(state, std::move(*stream), std::move(ctx), gr.include_usage);
  res.status = 200;
  if (gr.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream",
                                     [job](size_t, httplib::DataSink& sink) { return job->write_stream(sink); });
  } else {
    res.set_chunked_content_provider("application/json",
                                     [job](size_t, httplib::DataSink& sink) { return job->write_whole(sink); });
  }
}

}  // namespace photon::server
