#include "test_support.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace ll3::test {

namespace fs = std::filesystem;

std::string shared_dir() {
  const char* env = std::getenv("LL3_SHARED");
  std::string dir = env != nullptr && *env != '\0' ? env : LL3_SHARED_DEFAULT;
  if (fs::exists(fs::path(dir) / "models")) return dir;
  return "";
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

std::string ll3_binary() { return LL3_BIN; }
std::string source_dir() { return LL3_SOURCE_DIR; }

namespace {
struct TempRoot {
  std::string path;
  ~TempRoot() {
    if (!path.empty()) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};
TempRoot g_temp_root;
}  // namespace

std::string temp_dir() {
  if (g_temp_root.path.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ll3-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    g_temp_root.path = p;
  }
  static int counter = 0;
  std::string dir = g_temp_root.path + "/" + std::to_string(counter++);
  fs::create_directories(dir);
  return dir;
}

CommandResult run_command(const std::string& cmd, bool merge_stderr) {
  CommandResult r;
  std::string full = cmd + (merge_stderr ? " 2>&1" : "");
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<float> random_normal(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

Npy read_npy(const std::string& path) {
  std::string raw = read_file(path);
  if (raw.size() < 10 || raw.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error("not npy: " + path);
  size_t header_len;
  size_t header_start;
  if (raw[6] == 1) {
    header_len = static_cast<uint8_t>(raw[8]) | static_cast<uint8_t>(raw[9]) << 8;
    header_start = 10;
  } else {
    header_len = static_cast<uint8_t>(raw[8]) | static_cast<uint8_t>(raw[9]) << 8 |
                 static_cast<uint8_t>(raw[10]) << 16 | static_cast<size_t>(static_cast<uint8_t>(raw[11])) << 24;
    header_start = 12;
  }
  std::string header = raw.substr(header_start, header_len);
  if (header.find("'<f4'") == std::string::npos) throw std::runtime_error("npy not <f4: " + path);
  Npy out;
  size_t s = header.find("'shape': (");
  if (s == std::string::npos) throw std::runtime_error("npy without shape: " + path);
  s += 10;
  size_t e = header.find(')', s);
  std::stringstream shape(header.substr(s, e - s));
  std::string item;
  while (std::getline(shape, item, ',')) {
    if (item.find_first_not_of(' ') != std::string::npos) out.shape.push_back(std::stoll(item));
  }
  size_t count = 1;
  for (int64_t d : out.shape) count *= static_cast<size_t>(d);
  size_t data_start = header_start + header_len;
  if (raw.size() < data_start + count * 4) throw std::runtime_error("npy truncated: " + path);
  out.data.resize(count);
  std::memcpy(out.data.data(), raw.data() + data_start, count * 4);
  return out;
}

}  // namespace ll3::test
