// photon: the example command-line front end of libphoton.
#include <fmt/core.h>

#include <algorithm>

#include "commands.hpp"

namespace photon::cli {

std::vector<CliCommand>& registry() {
  static std::vector<CliCommand> commands;
  return commands;
}

void fail(const photon::Error& e) {
  fmt::print(stderr, "error: {} ({})\n", e.message, photon::errc_name(e.code));
  throw CLI::RuntimeError(1);
}

void fail(const std::string& message) {
  fmt::print(stderr, "error: {}\n", message);
  throw CLI::RuntimeError(1);
}

}  // namespace photon::cli

int main(int argc, char** argv) {
  CLI::App app{"photon: LLM inference from a Hugging Face model folder"};
  app.require_subcommand(1);
  auto& commands = photon::cli::registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& c : commands) c.setup(*app.add_subcommand(c.name, c.help));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
