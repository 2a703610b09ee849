#include "input/files.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "input/diagnostics.h"

namespace racksim::input {

namespace {

[[noreturn]] void file_error(const std::string& path, const std::string& message) {
  Diagnostic d;
  d.where.file = path;
  d.message = message;
  throw InputError(std::vector<Diagnostic>{d});
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string format_limit(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{} {}", bytes, units[u]);
}

namespace {
// The live ReadLogs (a command's; nested ones in the Python module's calls), guarded for the sweep's worker threads.
std::mutex g_read_logs_mutex;
std::vector<ReadLog*> g_read_logs;
}  // namespace

ReadLog::ReadLog() {
  const std::lock_guard<std::mutex> lock(g_read_logs_mutex);
  g_read_logs.push_back(this);
}

ReadLog::~ReadLog() {
  const std::lock_guard<std::mutex> lock(g_read_logs_mutex);
  g_read_logs.erase(std::remove(g_read_logs.begin(), g_read_logs.end(), this), g_read_logs.end());
}

void ReadLog::record(const std::string& path) {  // called with g_read_logs_mutex held
  if (paths_.size() < kMaxPaths && std::find(paths_.begin(), paths_.end(), path) == paths_.end()) paths_.push_back(path);
}

void note_file_read(const std::string& path) {
  const std::lock_guard<std::mutex> lock(g_read_logs_mutex);
  for (ReadLog* log : g_read_logs) log->record(path);
}

std::vector<std::pair<std::string, std::string>> ReadLog::inputs(const std::string& what) const {
  const std::lock_guard<std::mutex> lock(g_read_logs_mutex);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(paths_.size());
  for (const auto& p : paths_) out.emplace_back(p, what);
  return out;
}

std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes, const std::string& what,
                              Binary binary) {
  Fd f;
  // Opened without blocking (a FIFO with no writer would hold open() forever), then read blocking: a pipe whose writer
  // is there (`<(cat f)`) is read to its end, one with none reads as empty.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd >= 0) {
    const int flags = ::fcntl(f.fd, F_GETFL);
    if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  if (f.fd < 0) {
    const int e = errno;
    if (e == ENOENT) file_error(path, "cannot open file");
    file_error(path, fmt::format("cannot open file: {}", std::strerror(e)));
  }
  note_file_read(path);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) file_error(path, fmt::format("cannot read file: {}", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) file_error(path, fmt::format("is a directory; expected {}", what));
  auto too_big = [&](const std::string& size) {
    file_error(path, fmt::format("too large for {}: {}; the limit is {} (docs/decisions.md, \"Input limits\")", what,
                                 size, format_limit(max_bytes)));
  };
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes)
    too_big(fmt::format("{} bytes", static_cast<std::uint64_t>(st.st_size)));
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<std::size_t>(st.st_size));
  std::vector<char> buf(std::size_t{1} << 16);
  for (;;) {
    const ssize_t n = ::read(f.fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      file_error(path, fmt::format("cannot read file: {}", std::strerror(errno)));
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) too_big(fmt::format("more than {}", format_limit(max_bytes)));
    out.append(buf.data(), static_cast<std::size_t>(n));
    const bool gzip = out.size() >= 2 && static_cast<unsigned char>(out[0]) == 0x1f &&
                      static_cast<unsigned char>(out[1]) == 0x8b;
    const bool stop = binary == Binary::stop || (binary == Binary::stop_unless_gzip && !gzip);
    if (stop && std::memchr(buf.data(), '\0', static_cast<std::size_t>(n)) != nullptr) break;
  }
  return out;
}

OutputFile::OutputFile(std::string path, std::string option) : path_(std::move(path)), option_(std::move(option)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail(errno);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::fail(int err) const {
  file_error(path_, fmt::format("cannot write ({}): {}", option_, std::strerror(err)));
}

void OutputFile::write(std::string_view data) {
  if (fd_ < 0) fail(EBADF);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    done += static_cast<std::size_t>(n);
  }
}

void OutputFile::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(errno);
}

std::optional<std::string> why_not_a_file(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) return std::nullopt;
  if (fs::is_directory(st)) return fmt::format("{} file '{}' is a directory: name the {} YAML file in it", what, path, what);
  if (fs::exists(st)) return fmt::format("{} file '{}' is not a regular file (a device, a pipe or a socket)", what, path);
  return fmt::format("{} file '{}' does not exist", what, path);
}

namespace {
// Where writing `path` would land: absolute (weakly_canonical leaves a path relative when none of it exists, so that
// "t.json" and "./t.json" differed), through a final symlink whose target does not exist yet (a dangling link is
// written through), normalized.
std::filesystem::path write_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return fs::path(path).lexically_normal();
  for (int hops = 0; hops < 40; ++hops) {  // the kernel's own bound on links followed (ELOOP)
    if (!fs::is_symlink(fs::symlink_status(p, ec))) break;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  const fs::path canonical = fs::weakly_canonical(p, ec);
  return (ec ? p : canonical).lexically_normal();
}
}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return write_target(a) == write_target(b);
}

void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [path, option] = outputs[i];
    if (path.empty()) continue;
    for (const auto& [input, what] : inputs)
      if (!input.empty() && same_file(path, input))
        throw input_error(path, 0, 0, option, fmt::format("is {} ({}): writing the output would destroy it", what, input));
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[j].first.empty() && same_file(path, outputs[j].first))
        throw input_error(path, 0, 0, option,
                          fmt::format("{} and {} name the same file: give each its own", option, outputs[j].second));
  }
}

std::string path_beside(const std::string& naming_file, const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.is_absolute() || naming_file.empty() || !std::filesystem::is_regular_file(naming_file, ec)) return path;
  return (std::filesystem::path(naming_file).parent_path() / p).string();
}

void remove_partial_output(const std::string& path) {
  // (An audit's finding: a full disk had left 200 KB of invalid trace JSON.) The path itself must be a regular file: a
  // symlink is left with its target (unlinking it would remove the link and keep the partial output; /dev/stdout is
  // one), as are a device and a pipe.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
}

namespace {
// The guarded output, for a signal handler: a fixed buffer (no allocation there) and the file's identity, published by
// the flag. Only the CLI's process enables it (install_partial_output_cleanup), and it writes one trace at a time from
// its main thread; elsewhere (the Python module, whose calls may run on several threads) a guard does nothing.
std::atomic<bool> g_cleanup_enabled{false};
char g_partial_path[4096];
dev_t g_partial_dev = 0;
ino_t g_partial_ino = 0;
std::atomic<bool> g_partial_set{false};
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_saved_actions[std::size(kCleanupSignals)];
bool g_saved[std::size(kCleanupSignals)] = {};

extern "C" void remove_partial_output_on_signal(int sig) {
  // lstat and unlink are async-signal-safe. Only the file the guard opened: the same device and inode, reached by a
  // path that is not a symlink (lstat), so a link or anything renamed into its place is left alone.
  struct stat st {};
  if (g_partial_set.load() && ::lstat(g_partial_path, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == g_partial_dev &&
      st.st_ino == g_partial_ino)
    ::unlink(g_partial_path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
}  // namespace

PartialOutputGuard::PartialOutputGuard(const std::string& path) {
  if (!g_cleanup_enabled.load() || path.size() >= sizeof(g_partial_path)) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;  // (a symlink, device or pipe: left alone)
  std::memcpy(g_partial_path, path.c_str(), path.size() + 1);
  g_partial_dev = st.st_dev;
  g_partial_ino = st.st_ino;
  g_partial_set.store(true);
  // The handlers live only while the output is written, and never replace an ignored signal: a run under nohup, or
  // started in the background by a shell without job control, keeps ignoring SIGHUP or SIGINT as it was started to.
  for (std::size_t k = 0; k < std::size(kCleanupSignals); ++k) {
    struct sigaction current {};
    g_saved[k] = false;
    if (::sigaction(kCleanupSignals[k], nullptr, &current) != 0 || current.sa_handler == SIG_IGN) continue;
    struct sigaction mine {};
    mine.sa_handler = remove_partial_output_on_signal;
    sigemptyset(&mine.sa_mask);
    g_saved[k] = ::sigaction(kCleanupSignals[k], &mine, &g_saved_actions[k]) == 0;
  }
}
PartialOutputGuard::~PartialOutputGuard() {
  if (!g_partial_set.load()) return;
  for (std::size_t k = 0; k < std::size(kCleanupSignals); ++k)
    if (g_saved[k]) ::sigaction(kCleanupSignals[k], &g_saved_actions[k], nullptr);
  g_partial_set.store(false);
}

void install_partial_output_cleanup() { g_cleanup_enabled.store(true); }
bool partial_output_cleanup_enabled() { return g_cleanup_enabled.load(); }

void write_file_checked(const std::string& path, std::string_view content, const std::string& option) {
  OutputFile f(path, option);
  try {
    f.write(content);
    f.close();
  } catch (const InputError&) {
    remove_partial_output(path);
    throw;
  }
}

void check_stream(std::ostream& out, const std::string& label, const std::string& option) {
  errno = 0;
  out.flush();
  if (out) return;
  const int e = errno;
  file_error(label, e != 0 ? fmt::format("cannot write ({}): {}", option, std::strerror(e))
                           : fmt::format("cannot write ({})", option));
}

}  // namespace racksim::input
