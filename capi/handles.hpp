// The opaque handles of photon.h, as libphoton defines them.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "photon/engine.hpp"
#include "photon/photon.h"
#include "photon/tokenizer.hpp"

// A tokenizer of photon_tokenizer_open (owned) or of an engine (borrowed:
// `owned` empty, `tokenizer` is the engine's).
struct photon_tokenizer {
  const photon::Tokenizer* tokenizer = nullptr;
  std::optional<photon::Tokenizer> owned;
};

// A finished request of photon_engine_generate_*; immutable once made.
struct photon_completion {
  photon::Completion completion;
};

// An engine, plus the events photon_engine_poll took from it that did not
// fit the caller's buffers yet (delivered first by the next poll).
struct photon_engine {
  explicit photon_engine(photon::Engine e) : engine(std::move(e)) { tokenizer_view.tokenizer = engine.tokenizer(); }
  photon::Engine engine;
  photon_tokenizer tokenizer_view;  // borrows engine.tokenizer() when there is one
  std::mutex poll_mutex;            // serializes polls; guards pending and scratch
  std::deque<photon::Event> pending;
  std::vector<photon::Event> scratch;
};
