// What was loaded from a file, kept for the rest of the process: the points of a sweep (and the
// cases of a validation suite) load the same presets, models and calibrations again and again, and
// parsing YAML costs more than simulating a small step. An entry is keyed by the file's path and
// used only while the file keeps its size and modification time, so a file that changes is loaded
// again. Only loads without errors are stored (errors are reported by loading again). Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "input/files.h"

namespace racksim::input {

template <class T>
class FileCache {
 public:
  std::optional<T> get(const std::string& path) {
    const auto now = stamp(path);
    if (!now) return std::nullopt;
    std::lock_guard lock(mu_);
    auto it = map_.find(path);
    if (it == map_.end() || it->second.first != *now) return std::nullopt;
    note_file_read(path);  // a command's outputs may not name it, read or cached (input/files.h, ReadLog)
    return it->second.second;
  }
  void put(const std::string& path, T value) {
    const auto now = stamp(path);
    if (!now) return;
    std::lock_guard lock(mu_);
    map_.insert_or_assign(path, std::pair{*now, std::move(value)});
  }
  void erase(const std::string& path) {
    std::lock_guard lock(mu_);
    map_.erase(path);
  }

 private:
  using Stamp = std::pair<std::uintmax_t, int64_t>;  // size, modification time
  static std::optional<Stamp> stamp(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return std::nullopt;
    const auto mtime = std::filesystem::last_write_time(path, ec);
    if (ec) return std::nullopt;
    return Stamp{size, static_cast<int64_t>(mtime.time_since_epoch().count())};
  }

  std::mutex mu_;
  std::unordered_map<std::string, std::pair<Stamp, T>> map_;
};

}  // namespace racksim::input
