// Bounded reading and checked writing of the files racksim touches. Every input limit is a
// named constant here or next to the code it guards, documented in docs/decisions.md ("Input
// limits") and README.md; an input beyond one is an InputError naming the file and the limit.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

namespace racksim::input {

namespace limits {
// A scenario, sweep, suite, preset or calibration file: the largest shipped one is 51 KB.
inline constexpr std::uint64_t kMaxYamlFileBytes = std::uint64_t{16} << 20;  // 16 MiB
// Nodes of one YAML document with every alias expanded (an 866-byte "billion laughs" file
// expands to 10^9): what a loader may walk. The largest shipped file has about 3,000.
inline constexpr std::uint64_t kMaxYamlNodes = 1'000'000;
// Nesting of one YAML document with aliases expanded (yaml-cpp's own parser stops near 500).
inline constexpr int kMaxYamlDepth = 256;
// A calibration measurement (racksim-bench JSON, nccl-tests log): the largest shipped is 400 KB.
inline constexpr std::uint64_t kMaxMeasurementFileBytes = std::uint64_t{256} << 20;  // 256 MiB
// An HLO module, as a file and as text after gzip decompression: the shipped ones are 0.4 MB.
inline constexpr std::uint64_t kMaxHloTextBytes = std::uint64_t{4} << 30;  // 4 GiB
// `--set` overrides of one command (or a Python call's `set=`): each is applied to the scenario's tree, which costs
// time in the overrides before it (16,000 distinct keys took 17 s); a what-if sets a handful.
inline constexpr std::size_t kMaxSetOverrides = 1'000;
}  // namespace limits

// "16 MiB", "4 GiB", "512 KiB": a byte limit as the messages print it.
std::string format_limit(std::uint64_t bytes);

// Reads the whole file at `path`, at most `max_bytes` of it. Throws InputError naming the path
// when it does not exist or cannot be opened, is a directory, or holds more than `max_bytes`
// (`what` names the kind of file in that message, e.g. "a YAML file"). A pipe or a device is
// read up to the limit, never further. Unless `binary` is allowed, reading stops after the
// first 64 KiB block that holds a NUL byte (binary data: the caller reports where), so
// `racksim run /dev/urandom` fails at once; stop_unless_gzip allows binary data in a file that
// starts with the gzip magic bytes.
enum class Binary { allowed, stop, stop_unless_gzip };
std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes, const std::string& what,
                              Binary binary);

// A file written piece by piece with every write checked (a sweep streams its rows): the
// constructor creates or truncates it, write() and close() throw InputError naming the path and
// the option on any failure (a full disk, /dev/full, a path in a missing folder).
class OutputFile {
 public:
  OutputFile(std::string path, std::string option);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  void write(std::string_view data);
  void close();
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(int err) const;
  std::string path_, option_;
  int fd_ = -1;
};

// Removes what a failed write left at `path` when it is a regular file (a cut-short output is not left behind as if it
// were the output); a device or a pipe is left alone. Called from a catch block before rethrowing.
void remove_partial_output(const std::string& path);

// While one lives, `path` (opened already, a regular file) is an output being written that a signal would leave
// half-written (a trace of millions of events takes tens of seconds): in a process that called
// install_partial_output_cleanup, SIGINT, SIGTERM and SIGHUP (those not ignored) then remove that file, as
// remove_partial_output does on an error, and end the process as the signal would have. One at a time; elsewhere, and
// for a path longer than 4 KiB or not a regular file, it does nothing.
class PartialOutputGuard {
 public:
  explicit PartialOutputGuard(const std::string& path);
  ~PartialOutputGuard();
  PartialOutputGuard(const PartialOutputGuard&) = delete;
  PartialOutputGuard& operator=(const PartialOutputGuard&) = delete;
};
// For the CLI's process only (a Python host keeps its own handlers and may write from several threads).
void install_partial_output_cleanup();
bool partial_output_cleanup_enabled();

// Writes `content` to `path` and checks that every byte reached the file (open, write, flush
// and close); throws InputError "PATH: error: cannot write (OPTION): REASON" otherwise.
// `option` names the command-line option that chose the path (--trace, --out, ...).
void write_file_checked(const std::string& path, std::string_view content, const std::string& option);

// Why `path` cannot be read as a `what` YAML file ("model file 'PATH' does not exist", "... is a directory: name the
// model YAML file in it", "... is not a regular file (a device, a pipe or a socket)"), or nullopt when it is a regular
// file. For the loaders that take a file only (a model, a calibration, a suite's scenario).
std::optional<std::string> why_not_a_file(const std::string& path, const std::string& what);

// Whether two paths name one file (both existing: the same inode; else the same normalized path).
bool same_file(const std::string& a, const std::string& b);
// Refuses outputs (path, option) that name an input (path, what it is) or each other: writing would destroy the input
// or the other output (run --trace over its scenario, --trace and --report on one file). Empty paths are skipped.
void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::pair<std::string, std::string>>& inputs);

// The files read_file_bounded opened, on any thread, while this log lived: what a command's inputs read beyond the
// files its command line names (a model or calibration file a scenario names, a sweep's base scenario and its model),
// so that an output naming one of them is refused before it is written. Logs may nest; each records. At most
// kMaxPaths distinct paths are kept (a sweep reads the same few files once per point).
class ReadLog {
 public:
  static constexpr std::size_t kMaxPaths = 4096;
  ReadLog();
  ~ReadLog();
  ReadLog(const ReadLog&) = delete;
  ReadLog& operator=(const ReadLog&) = delete;
  // The paths read, each as (path, `what`), for check_outputs.
  std::vector<std::pair<std::string, std::string>> inputs(const std::string& what) const;
  void record(const std::string& path);

 private:
  std::vector<std::string> paths_;
};
// Records `path` in every live ReadLog: read_file_bounded calls it, and so does a cache that hands out what a file
// held without reading it again (input/file_cache.h).
void note_file_read(const std::string& path);

// A command's read of its inputs with its outputs guarded: refuses `outputs` that name one of the `named` inputs (the
// files its command line names) before anything is read, runs `load`, then refuses those that name a file `load` read
// (a model, preset or calibration a scenario names; `what_read` says what such a file is). Returns what `load` returned.
template <class Load>
auto load_guarding_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                           const std::vector<std::pair<std::string, std::string>>& named, const std::string& what_read,
                           Load&& load) {
  check_outputs(outputs, named);
  ReadLog read;
  auto loaded = std::forward<Load>(load)();
  check_outputs(outputs, read.inputs(what_read));
  return loaded;
}

// A path a scenario names (a preset or calibration file): relative to the directory of the file that names it when
// `naming_file` is a file on disk; as given (relative to the working directory) when it was named on the command line
// (--set, whose pseudo file is the set's text) or in text with no file (a Python dict), or when it is absolute.
std::string path_beside(const std::string& naming_file, const std::string& path);

// Flushes `out` and throws InputError naming `label` (e.g. "<standard output>") when the
// stream has failed: a write to a full disk, a closed pipe, /dev/full.
void check_stream(std::ostream& out, const std::string& label, const std::string& option);

}  // namespace racksim::input
