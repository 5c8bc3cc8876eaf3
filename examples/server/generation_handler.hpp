// POST /v1/completions and POST /v1/chat/completions.
#pragma once

#include <httplib.h>

#include "generation_request.hpp"
#include "server_state.hpp"

namespace photon::server {

// Parses and checks the body, encodes the prompt and submits it; errors are
// answered at once (400, 404 for another model, 503 when full). An accepted
// request is answered 200 by a content provider: SSE chunks ending with
// "data: [DONE]" when streamed, one JSON body otherwise.
void handle_generation(ServerState& state, ApiKind kind, const httplib::Request& req, httplib::Response& res);

}  // namespace photon::server
