// The opaque handles of photon.h, as libphoton defines them.
#pragma once

#include <memory>
#include <optional>

#include "api/text_session.hpp"
#include "photon/photon.h"
#include "photon/tokenizer.hpp"

// A tokenizer of photon_tokenizer_open (owned) or of an engine (borrowed:
// `owned` empty, `tokenizer` points into the engine's session).
struct photon_tokenizer {
  const photon::Tokenizer* tokenizer = nullptr;
  std::optional<photon::Tokenizer> owned;
};

struct photon_engine {
  std::unique_ptr<photon::TextSession> session;
  photon_tokenizer tokenizer_view;  // borrows session->tokenizer() when there is one
};
