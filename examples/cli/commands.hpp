// Subcommand registry of the example CLI. Each cmd_*.cpp defines one static
// CliRegistrar; main.cpp adds every registered subcommand to the CLI11 app.
// Failure convention: a subcommand's callback prints "error: <message>" to
// stderr (cli_fail) and throws CLI::RuntimeError with a non-zero exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "photon/result.hpp"

namespace photon::cli {

struct CliCommand {
  std::string name;
  std::string help;
  std::function<void(CLI::App&)> setup;  // adds options and a callback to the subcommand
};

std::vector<CliCommand>& registry();

struct CliRegistrar {
  explicit CliRegistrar(CliCommand c) { registry().push_back(std::move(c)); }
};

// Prints the error (its code name and message) and ends the subcommand with exit status 1.
[[noreturn]] void fail(const photon::Error& e);
[[noreturn]] void fail(const std::string& message);

// Unwraps a Result or fails the subcommand with its error.
template <class T>
T unwrap(Result<T>&& r) {
  if (!r) ::photon::cli::fail(r.error());  // qualified: ADL would also find photon::fail(Error)
  if constexpr (!std::is_void_v<T>) return std::move(*r);
}

}  // namespace photon::cli
