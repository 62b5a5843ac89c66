// The ll3 subcommands. Each lives in tools/cmd_<name>.cpp, registers itself with
// LL3_COMMAND(name, summary, function), and gets argv after the subcommand name; it returns the
// process exit code (0 ok, 1 failure, 2 usage error).
#pragma once

#include <vector>

namespace ll3::cli {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn fn;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn fn) {
    command_registry().push_back({name, summary, fn});
  }
};

}  // namespace ll3::cli

#define LL3_COMMAND_CONCAT2(a, b) a##b
#define LL3_COMMAND_CONCAT(a, b) LL3_COMMAND_CONCAT2(a, b)
#define LL3_COMMAND(name, summary, fn) \
  static ::ll3::cli::CommandRegistrar LL3_COMMAND_CONCAT(ll3_registrar_, __COUNTER__)(name, summary, fn)
