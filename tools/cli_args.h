// A small declarative flag parser shared by the subcommands: each command lists its flags once,
// and gets --help, "unknown flag" errors (exit 2) and typed values from that list.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ll3::cli {

class ArgParser {
 public:
  ArgParser(std::string command, std::string usage, std::string summary);

  // A flag taking a value: names like {"-m", "--model"}. The setter returns "" or an error.
  void add(std::vector<std::string> names, std::string metavar, std::string help,
           std::function<std::string(const std::string&)> set);
  // Typed conveniences.
  void add_string(std::vector<std::string> names, std::string metavar, std::string help, std::string* out);
  void add_int(std::vector<std::string> names, std::string metavar, std::string help, long long* out);
  void add_int(std::vector<std::string> names, std::string metavar, std::string help, int* out);
  void add_float(std::vector<std::string> names, std::string metavar, std::string help, double* out);
  void add_float(std::vector<std::string> names, std::string metavar, std::string help, float* out);
  // A switch without a value.
  void add_flag(std::vector<std::string> names, std::string help, bool* out);
  // Positional arguments collected in order (none accepted unless this is called).
  void positionals(std::string help, std::vector<std::string>* out, size_t min = 0, size_t max = 1000);

  // Parses argv (after the subcommand). Returns -1 to continue, else an exit code to return now
  // (0 after --help, 2 after a usage error, which has been printed to stderr).
  int parse(int argc, char** argv);
  void print_help() const;
  // Prints "ll3 CMD: message" and the usage line to stderr and returns 2.
  int usage_error(const std::string& message) const;

 private:
  struct Flag {
    std::vector<std::string> names;
    std::string metavar;  // empty for switches
    std::string help;
    std::function<std::string(const std::string&)> set;
  };
  std::string command_, usage_, summary_;
  std::vector<Flag> flags_;
  std::vector<std::string>* positionals_ = nullptr;
  std::string positional_help_;
  size_t pos_min_ = 0, pos_max_ = 0;
};

}  // namespace ll3::cli
