#include "test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

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
  static std::atomic<int> counter{0};
  std::string dir = g_temp_root.path + "/" + std::to_string(counter++);
  fs::create_directories(dir);
  return dir;
}

CommandResult run_command(const std::string& cmd, bool merge_stderr, double timeout_s) {
  CommandResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    // Its own process group, so that a command past its deadline is killed with everything it
    // started; and gone with the test process if that is killed.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fds[1], 1);
    if (merge_stderr) dup2(fds[1], 2);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // also here: whichever runs first, the group exists before a kill
  close(fds[1]);
  using clock = std::chrono::steady_clock;
  const clock::time_point deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  const auto ms_left = [&] {
    return static_cast<int>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count()));
  };
  char buf[65536];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    const int n = poll(&p, 1, std::min(ms_left(), 1000));
    if (n < 0 && errno != EINTR) break;
    if (n > 0) {
      const ssize_t got = read(fds[0], buf, sizeof buf);
      if (got > 0) {
        r.output.append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got == 0 || errno != EINTR) break;  // EOF: the command (and what it started) closed its output
    }
    if (ms_left() == 0) {
      r.timed_out = true;
      break;
    }
  }
  close(fds[0]);
  // After EOF the command is exiting; a command past its deadline is killed first.
  int status = 0;
  while (!r.timed_out && waitpid(pid, &status, WNOHANG) == 0) {
    if (ms_left() == 0) r.timed_out = true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.timed_out) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    r.exit_code = 124;
    const std::string note = "[run_command: killed after " + std::to_string(static_cast<int>(timeout_s)) + " s: " + cmd + "]";
    std::fprintf(stderr, "%s\n", note.c_str());
    r.output += "\n" + note + "\n";
    return r;
  }
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
