// A hand-written recursive-descent parser of XLA's HLO text format. Malformed input throws
// input::InputError naming file:line:column; everything that is well formed is accepted,
// including attributes and opcodes the importer does not interpret (they are kept as text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "workloads/hlo/hlo_module.h"

namespace racksim::workloads::hlo {

// Parses a whole module. `file_label` names the input in error messages.
Module parse_hlo_text(std::string_view text, const std::string& file_label);

// Reads FILE (plain text, or gzip-compressed when it starts with the gzip magic bytes) and
// parses it. A missing or unreadable file is an InputError.
Module load_hlo_file(const std::string& path);

// The file's text, decompressed when gzip (every member of a multi-member file), at most
// input::limits::kMaxHloTextBytes (4 GiB) as a file and as text: beyond is an InputError, and
// a gzip bomb is measured without being held in memory. Exposed for tests and the fuzzer;
// `max_bytes` lets a test use a smaller limit.
std::string read_hlo_text(const std::string& path);
std::string read_hlo_text(const std::string& path, std::uint64_t max_bytes);

}  // namespace racksim::workloads::hlo
