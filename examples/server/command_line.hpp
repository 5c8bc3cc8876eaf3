// photon-server's command line (docs/server.md): every flag with its default and its check,
// bound to the engine's and the server's options, so that main() and the tests parse alike.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "photon/engine.hpp"
#include "server.hpp"

namespace photon::server {

struct CommandLine {
  EngineOptions engine;
  ServerOptions server;
  std::string served_name;  // --served-model-name ("": the model folder's name)
  int64_t max_body_mb = 32;
};

// The app's description and every flag, bound to cl's fields (CLI11 checks each value as it parses).
void add_command_line(CLI::App& app, CommandLine& cl);
// After a successful parse: the served model id (--served-model-name, else the model folder's name)
// and the body limit in bytes, into cl.server.
void finish_command_line(CommandLine& cl);

}  // namespace photon::server
