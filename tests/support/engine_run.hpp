// Drives an Engine through a staggered arrival pattern, as a host program
// would: request i is submitted right before step arrival[i], then the test
// steps until nothing is left and collects every request's events.
// Used by the engine tests of the CPU (tests/scheduler) and CUDA (tests/cuda)
// backends.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "photon/engine.hpp"

namespace photon::test {

// What one request produced, in event order.
struct RequestRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, when Request::logprobs > 0
  FinishReason finish = FinishReason::none;
};

// REQUIREs that every submit and step succeeds; returns one RequestRun per request, in input order.
inline std::vector<RequestRun> run_staggered(Engine& engine, const std::vector<Request>& reqs,
                                             const std::vector<int32_t>& arrival) {
  REQUIRE(arrival.size() == reqs.size());
  std::vector<RequestId> ids(reqs.size(), 0);
  std::map<RequestId, RequestRun> runs;
  size_t submitted = 0;
  std::vector<Event> events;
  for (int32_t t = 0; submitted < reqs.size() || engine.has_work(); ++t) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (arrival[i] != t) continue;
      auto id = engine.submit(reqs[i]);
      REQUIRE(id.has_value());
      ids[i] = *id;
      ++submitted;
    }
    auto st = engine.step();
    REQUIRE(st.has_value());
    events.clear();
    engine.poll(events);
    for (Event& e : events) {
      RequestRun& r = runs[e.request];
      if (e.token >= 0) {
        r.tokens.push_back(e.token);
        r.top_logprobs.push_back(std::move(e.top_logprobs));
      }
      if (e.finish != FinishReason::none) r.finish = e.finish;
    }
  }
  std::vector<RequestRun> out;
  for (RequestId id : ids) out.push_back(std::move(runs[id]));
  return out;
}

// The generated tokens alone, CHECKing that every request ended by length.
inline std::vector<std::vector<int32_t>> tokens_of_length_runs(const std::vector<RequestRun>& runs) {
  std::vector<std::vector<int32_t>> out;
  for (const RequestRun& r : runs) {
    CHECK(r.finish == FinishReason::length);
    out.push_back(r.tokens);
  }
  return out;
}

}  // namespace photon::test
