// Strict, typed reading of YAML input. A loader walks a document with MapReader: every key it
// asks for is "declared", and finish() reports any key in the file that nobody asked for,
// with the nearest declared key as a suggestion. Values with units go through the quantity
// parser, so a bare number where a unit belongs is an error. Problems are collected in a
// Diagnostics (file:line:column + key path) instead of thrown one at a time.
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/names.h"
#include "core/units.h"
#include "input/diagnostics.h"

namespace racksim::input {

// Where a subtree came from when it was grafted into another document: a --set on the
// command line, or a scenario's system.overrides merged into a preset.
struct Origin {
  std::string file;          // file (or "--set K=V") that holds the grafted node
  std::string display_path;  // key path to show the user for the grafted node
  int line = 0, column = 0;  // where in it, when the grafted node's own marks do not say (a set's value is parsed from
                             // its own text): a validate case's set: entry; 0: the node's marks; -1: a command-line
                             // --set, which has no line (its errors name the option alone)
  // Where the grafted node is when its line says (a set's entry, or a command-line set: no line); nullopt when its
  // own marks do.
  std::optional<SourceLocation> location() const {
    if (line == 0) return std::nullopt;
    return line < 0 ? SourceLocation{file, 0, 0} : SourceLocation{file, line, column};
  }
};

struct LoadContext {
  Diagnostics* diag = nullptr;
  std::map<std::string, Origin> grafts;  // document-internal dotted path -> origin
};

// A load in progress: its diagnostics and the context that nodes share (grafts). Not copyable:
// the context points at the diagnostics.
struct LoadSession {
  Diagnostics diag;
  std::shared_ptr<LoadContext> ctx = std::make_shared<LoadContext>();
  LoadSession() { ctx->diag = &diag; }
  LoadSession(const LoadSession&) = delete;
  LoadSession& operator=(const LoadSession&) = delete;
};

class Node {
 public:
  Node(YAML::Node yaml, std::string file, std::string display_path, std::string internal_path,
       std::shared_ptr<LoadContext> ctx);

  const YAML::Node& yaml() const { return yaml_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return display_path_; }
  const std::string& internal_path() const { return internal_path_; }
  Diagnostics& diag() const { return *ctx_->diag; }
  const std::shared_ptr<LoadContext>& context() const { return ctx_; }
  SourceLocation where() const;

  // The child under `key` (a map entry) or at `index` (a list entry), with its path.
  Node child(const std::string& key) const;
  // The entry's key itself, with the child's path: an error there is at the key, where a null value's own mark is the
  // next token's (often the next line). A key a set made reports where the set was given, as its child does.
  Node key_of(const std::string& key) const;
  Node element(std::size_t index) const;

  // "a mapping", "a list", "null", "the value 'abc'"
  std::string describe() const;

  void error(const std::string& message, DiagnosticKind kind = DiagnosticKind::other) const;

  // Scalar conversions that record a diagnostic on failure and return nullopt.
  std::optional<std::string> as_string() const;
  std::optional<int64_t> as_integer(int64_t min_value, int64_t max_value) const;
  std::optional<double> as_number(double min_value, double max_value) const;
  std::optional<bool> as_bool() const;
  std::optional<double> as_quantity(sim::QuantityKind kind) const;

 private:
  YAML::Node yaml_;
  std::string file_;
  std::string display_path_;
  std::string internal_path_;
  std::shared_ptr<LoadContext> ctx_;
};

class MapReader {
 public:
  // Records "expected a mapping" (and reads nothing) when `node` is not a map.
  explicit MapReader(const Node& node);
  bool ok() const { return ok_; }
  const Node& node() const { return node_; }

  bool has(const std::string& key);
  std::optional<Node> get(const std::string& key, bool required = false);

  std::optional<std::string> string(const std::string& key, bool required = false);
  std::optional<int64_t> integer(const std::string& key, bool required = false,
                                 int64_t min_value = INT64_MIN, int64_t max_value = INT64_MAX);
  std::optional<double> number(const std::string& key, bool required = false,
                               double min_value = -1e308, double max_value = 1e308);
  std::optional<bool> boolean(const std::string& key, bool required = false);
  std::optional<double> quantity(const std::string& key, sim::QuantityKind kind,
                                 bool required = false);

  template <class E>
  std::optional<E> choice(const std::string& key, const std::vector<std::pair<std::string, E>>& options,
                          bool required = false) {
    auto s = string(key, required);
    if (!s) return std::nullopt;
    for (const auto& [name, value] : options)
      if (name == *s) return value;
    std::vector<std::string> names;
    for (const auto& o : options) names.push_back(o.first);
    node_.child(key).error(unknown_choice_message(*s, names), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  // The same, with the enum's name table (core/names.h) as the options.
  template <class E, std::size_t N>
  std::optional<E> choice(const std::string& key, const std::array<sim::EnumName<E>, N>& table, bool required = false) {
    return choice(key, sim::choices_in(table), required);
  }

  // Reports every key present in the map that was never asked for.
  void finish();

  static std::string unknown_choice_message(const std::string& got, const std::vector<std::string>& names);

 private:
  Node node_;
  bool ok_ = false;
  std::vector<std::string> declared_;
  std::vector<std::string> null_reported_;  // keys given with no value, already said (once per key)
  // A key present with no value (`key:` or `key: ~`): an error at the key, once; false when the key has a value.
  bool refuse_null(const std::string& key, const Node& child, bool required);
};

// A test's probe: while one lives on this thread, MapReader::finish() records every key its reader declared (the file
// and the key's internal path), so that a test can check that a fuzz corpus names every key a loader reads.
class DeclaredKeyProbe {
 public:
  DeclaredKeyProbe();
  ~DeclaredKeyProbe();
  DeclaredKeyProbe(const DeclaredKeyProbe&) = delete;
  DeclaredKeyProbe& operator=(const DeclaredKeyProbe&) = delete;
  struct Key {
    std::string file, path;
  };
  const std::vector<Key>& keys() const { return keys_; }
  static DeclaredKeyProbe* active();
  void record(const std::string& file, const std::string& path) { keys_.push_back({file, path}); }

 private:
  DeclaredKeyProbe* previous_;
  std::vector<Key> keys_;
};

// The first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// past U+10FFFF), or std::string::npos. Scenario text must be UTF-8: the JSON report cannot hold anything else.
std::size_t first_invalid_utf8(const std::string& text);
// The bytes of the well-formed UTF-8 sequence at text[i] (1 to 4), or 0 when none starts there (i < text.size()).
std::size_t utf8_sequence_bytes(std::string_view text, std::size_t i);
// `text` with each byte that is not well-formed UTF-8 and each control byte written as the text \xNN (in a double-quoted
// YAML string the escape of U+00NN; in a comment, a plain word or a terminal's line, four characters); line breaks and
// tabs are kept where `keep_line_breaks`. For what the importers write and what the CLI prints of a user's text.
std::string escaped_text(std::string_view text, bool keep_line_breaks);

// Parses a YAML file (or text) into a Node rooted at the file; syntax errors become
// diagnostics with the parser's line and column. Returns nullopt when the file cannot be used.
// Parsed once per process while the file is unchanged (input/file_cache.h); each call gets its own tree.
// `from_cache`, when given, says whether the tree is a clone of an earlier parse: yaml-cpp's clone has no line or column
// marks, so a caller that reports errors may read the file again (read_yaml_file) to place them.
std::optional<Node> load_yaml_file(const std::string& path, const std::shared_ptr<LoadContext>& ctx,
                                   bool* from_cache = nullptr);
// Drops `path`'s parse from load_yaml_file's cache: a loader that found errors in a file that parsed calls it, so that
// the next load parses it again and places the same errors (a clone has no line or column: they had come out at 1:1).
void forget_parsed_yaml(const std::string& path);
// The same without the cache: reads and parses the file now.
std::optional<Node> read_yaml_file(const std::string& path, const std::shared_ptr<LoadContext>& ctx);
// How load_yaml_text parses: `quick` takes load_with_citations_set_after where it applies, `full` always
// yaml-cpp's own parse (the fuzz test Fuzz.PresetCitationsSetAfterGiveTheFullParsesResult compares the two).
enum class YamlParse { quick, full };
std::optional<Node> load_yaml_text(const std::string& text, const std::string& file_label,
                                   const std::shared_ptr<LoadContext>& ctx, YamlParse parse = YamlParse::quick);

// YAML::Load(text), cheaper for a file that ends in a top-level `sources:` block of one-line
// citations (`  field.path: "text"`, as every system preset does): yaml-cpp's scanner costs about
// 800 instructions a byte, and the citations are most of a preset's bytes. The citations are
// parsed as "" (same lines and columns) and their text set afterwards. Returns nullopt where the
// text has no such block or the parse differs from the expected shape (the caller parses in full);
// else the tree, equal to YAML::Load(text)'s in values, tags, lines and columns, and in `parsed`
// the text yaml-cpp read (its marks' byte offsets index that text).
std::optional<YAML::Node> load_with_citations_set_after(const std::string& text, std::string& parsed);

// Checks a parsed document against the limits of what a loader may walk (docs/decisions.md,
// "Input limits"): at most limits::kMaxYamlNodes nodes and limits::kMaxYamlDepth levels with its
// aliases expanded (a "billion laughs" file is a few hundred bytes), and, when `text` (the
// source) is given, no quote left open at the end of the file. Records a diagnostic at `where`
// (or at the node, when `text` is given) and returns false on the first problem.
bool check_yaml_document(const YAML::Node& root, const std::string& text, const SourceLocation& where,
                         const std::string& key_path, Diagnostics& diag);

// Every scalar leaf under `node` as dotted path -> node, skipping the top-level keys in `skip`.
void collect_leaf_paths(const YAML::Node& node, const std::string& prefix,
                        std::vector<std::string>& out, const std::vector<std::string>& skip = {});

// Sets `value` at dotted `path` inside `root`, creating maps along the way.
// Returns false (without changing anything) if a non-map is in the way.
// `created`, when given, gets the paths of the mappings made on the way (training.moe where there was none).
// A dotted key the file has stands for its parts: `system.overrides.scale_up.domain_size` sets the file's
// `overrides: {scale_up.domain_size: 64}` entry (keys_along), not a second, nested spelling of it beside.
bool set_by_path(YAML::Node root, const std::string& path, const YAML::Node& value,
                 std::vector<std::string>* created = nullptr);
// The keys a dotted path walks in `root`: its parts, where a mapping on the way has a run of them as one dotted key,
// that key (the longest).
std::vector<std::string> keys_along(const YAML::Node& root, const std::string& path);
std::vector<std::string> split_path(const std::string& path);
// The values of the mapping that stands at dotted `path` in `root` (its leaves, as dotted paths) which setting `value`
// there would drop: all of them when `value` is not a mapping, those it does not hold under any spelling when it is
// (scale_up.domain_size is held by {scale_up: {domain_size: 72}}); none when no mapping stands there. (A set replaces
// what stands at its path; `--set system.overrides={...}` loses the scenario's other overrides.)
std::vector<std::string> keys_dropped_by_set(const YAML::Node& root, const std::string& path, const YAML::Node& value);
// The node at dotted `path` in `root` under any spelling of its keys (keys_along); undefined where there is none.
YAML::Node node_at(const YAML::Node& root, const std::string& path);

// yaml-cpp reads `<<: *anchor` as a plain key named '<<'.
inline constexpr const char* kMergeKeyMessage =
    "YAML merge keys (<<: *anchor) are not supported: write the keys out (an alias of a whole value, key: *anchor, is)";
// For a walk over the raw keys of `map` (where no MapReader checks them): false, with the error at the key, for a key
// seen before in `seen` ("duplicate key": yaml-cpp would hand back the first, a copy of the mapping keep the last) or a
// merge key; true otherwise, the key added to `seen`.
bool key_is_new(const Node& map, const YAML::Node& key, std::vector<std::string>& seen);

// Names (file stems) of the *.yaml files in `dir`, sorted; empty if the folder is missing.
std::vector<std::string> list_yaml_names(const std::string& dir);

// Directory holding the shipped data (hardware_models/, workloads/): $RACKSIM_DATA_DIR if set,
// else the source tree the binary was built from.
std::string data_dir();

// When the top-level mapping `root` is another kind of racksim file than `expected` ("scenario", "sweep", "validation
// suite"), records one error saying which and the command that reads it, and returns true: the caller stops there,
// where its own key checks would list every key as unknown. A file of the expected kind, or of no recognized kind,
// returns false.
bool refuse_other_kind_of_file(const Node& root, const std::string& expected);

}  // namespace racksim::input
