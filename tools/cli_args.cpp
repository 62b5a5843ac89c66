#include "cli_args.h"

#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstdlib>

namespace ll3::cli {

ArgParser::ArgParser(std::string command, std::string usage, std::string summary)
    : command_(std::move(command)), usage_(std::move(usage)), summary_(std::move(summary)) {}

void ArgParser::add(std::vector<std::string> names, std::string metavar, std::string help,
                    std::function<std::string(const std::string&)> set) {
  flags_.push_back({std::move(names), std::move(metavar), std::move(help), std::move(set)});
}

void ArgParser::add_string(std::vector<std::string> names, std::string metavar, std::string help,
                           std::string* out) {
  add(std::move(names), std::move(metavar), std::move(help), [out](const std::string& v) {
    *out = v;
    return std::string();
  });
}

static std::string parse_ll(const std::string& v, long long* out) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0) return "expected an integer, got '" + v + "'";
  *out = x;
  return "";
}

static std::string parse_double(const std::string& v, double* out) {
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0) return "expected a number, got '" + v + "'";
  *out = x;
  return "";
}

void ArgParser::add_int(std::vector<std::string> names, std::string metavar, std::string help,
                        long long* out) {
  add(std::move(names), std::move(metavar), std::move(help),
      [out](const std::string& v) { return parse_ll(v, out); });
}

void ArgParser::add_int(std::vector<std::string> names, std::string metavar, std::string help,
                        int* out) {
  add(std::move(names), std::move(metavar), std::move(help), [out](const std::string& v) {
    long long x;
    std::string err = parse_ll(v, &x);
    if (err.empty() && (x < -2147483647LL || x > 2147483647LL)) err = "integer out of range: " + v;
    if (err.empty()) *out = static_cast<int>(x);
    return err;
  });
}

void ArgParser::add_float(std::vector<std::string> names, std::string metavar, std::string help,
                          double* out) {
  add(std::move(names), std::move(metavar), std::move(help),
      [out](const std::string& v) { return parse_double(v, out); });
}

void ArgParser::add_float(std::vector<std::string> names, std::string metavar, std::string help,
                          float* out) {
  add(std::move(names), std::move(metavar), std::move(help), [out](const std::string& v) {
    double x;
    std::string err = parse_double(v, &x);
    if (err.empty()) *out = static_cast<float>(x);
    return err;
  });
}

void ArgParser::add_flag(std::vector<std::string> names, std::string help, bool* out) {
  add(std::move(names), "", std::move(help), [out](const std::string&) {
    *out = true;
    return std::string();
  });
}

void ArgParser::positionals(std::string help, std::vector<std::string>* out, size_t min, size_t max) {
  positionals_ = out;
  positional_help_ = std::move(help);
  pos_min_ = min;
  pos_max_ = max;
}

int ArgParser::usage_error(const std::string& message) const {
  std::fprintf(stderr, "ll3 %s: %s\nusage: %s\n(see 'll3 %s --help')\n", command_.c_str(),
               message.c_str(), usage_.c_str(), command_.c_str());
  return 2;
}

void ArgParser::print_help() const {
  std::printf("usage: %s\n\n%s\n\n", usage_.c_str(), summary_.c_str());
  if (positionals_ != nullptr) std::printf("arguments:\n  %s\n\n", positional_help_.c_str());
  std::printf("options:\n");
  for (const Flag& f : flags_) {
    std::string names;
    for (const std::string& n : f.names) names += (names.empty() ? "" : ", ") + n;
    if (!f.metavar.empty()) names += " " + f.metavar;
    std::printf("  %-28s %s\n", names.c_str(), f.help.c_str());
  }
  std::printf("  %-28s %s\n", "-h, --help", "show this help");
}

int ArgParser::parse(int argc, char** argv) {
  size_t n_pos = 0;
  bool only_positionals = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (!only_positionals && arg == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && (arg == "-h" || arg == "--help")) {
      print_help();
      return 0;
    }
    if (!only_positionals && arg.size() > 1 && arg[0] == '-' &&
        !(arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.'))) {
      std::string value;
      bool has_inline = false;
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
      const Flag* flag = nullptr;
      for (const Flag& f : flags_) {
        for (const std::string& n : f.names) {
          if (n == arg) flag = &f;
        }
      }
      if (flag == nullptr) return usage_error("unknown flag '" + arg + "'");
      if (flag->metavar.empty()) {
        if (has_inline) return usage_error("flag '" + arg + "' takes no value");
      } else if (!has_inline) {
        if (i + 1 >= argc) return usage_error("flag '" + arg + "' needs a value " + flag->metavar);
        value = argv[++i];
      }
      std::string err = flag->set(value);
      if (!err.empty()) return usage_error(arg + ": " + err);
      continue;
    }
    if (positionals_ == nullptr) return usage_error("unexpected argument '" + arg + "'");
    if (n_pos >= pos_max_) return usage_error("too many arguments at '" + arg + "'");
    positionals_->push_back(arg);
    ++n_pos;
  }
  if (positionals_ != nullptr && n_pos < pos_min_) return usage_error("missing arguments");
  return -1;
}

}  // namespace ll3::cli
