// ll3: the command-line front end. Subcommands register themselves (tools/cmd_*.cpp).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "commands.h"

namespace ll3::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}

}  // namespace ll3::cli

static void print_usage(FILE* out) {
  auto commands = ll3::cli::command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::fprintf(out,
               "ll3: LLaMA-3 inference engine\n\nusage: ll3 COMMAND [options]   (ll3 COMMAND "
               "--help for its options; ll3 --version: version and backends)\n\ncommands:\n");
  for (const auto& c : commands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  std::string sub = argv[1];
  if (sub == "-h" || sub == "--help" || sub == "help") {
    print_usage(stdout);
    return 0;
  }
  if (sub == "--version" || sub == "version") {
    std::printf("ll3 %s\nbackends: %s\n", LL3_VERSION, ll3::backends_summary().c_str());
    return 0;
  }
  for (const auto& c : ll3::cli::command_registry()) {
    if (sub == c.name) return c.fn(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "ll3: unknown command '%s'\n\n", sub.c_str());
  print_usage(stderr);
  return 2;
}
