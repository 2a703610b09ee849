#include "workloads/op_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace racksim::workloads {

std::string to_string(StreamKind s) { return std::string(sim::name_in(kStreamKindNames, s)); }
std::string to_string(Phase p) { return std::string(sim::name_in(kPhaseNames, p)); }
std::string to_string(CommGroup g) { return std::string(sim::name_in(kCommGroupNames, g)); }
std::string to_string(MemCategory c) { return std::string(sim::name_in(kMemCategoryNames, c)); }

bool same_op(const Op& a, const Op& b) {
  // Every field of Op is compared below: a new field must be added here, or a layer template could stamp an op
  // that differs from the one it would build (op_graph.h's size check on Op says so when a field is added).
  auto same = [](const auto& x, const auto& y) { return std::equal(x.begin(), x.end(), y.begin(), y.end()); };
  const auto same_name = [](const Name& x, const Name& y) {
    return x.base == y.base && x.a == y.a && x.b == y.b && x.prefix == y.prefix && x.literal == y.literal;
  };
  return a.rank == b.rank && a.kind == b.kind && a.stream == b.stream && a.phase == b.phase && a.unit == b.unit &&
         a.dtype == b.dtype && a.attention == b.attention && a.attention_causal == b.attention_causal &&
         a.attention_mla == b.attention_mla && a.accumulate_fp32 == b.accumulate_fp32 && a.accumulate_16bit == b.accumulate_16bit && a.wgrad == b.wgrad &&
         a.wgrad_te_layout == b.wgrad_te_layout && a.te_softmax == b.te_softmax &&
         a.coll == b.coll && a.group == b.group && a.comm_kernel == b.comm_kernel && a.comm_sms == b.comm_sms &&
         a.queues_behind_compute == b.queues_behind_compute && a.graph == b.graph && a.graph_start == b.graph_start &&
         a.host_program_start == b.host_program_start && a.host_rerecord == b.host_rerecord &&
         a.host_compute == b.host_compute &&
         a.expert_library == b.expert_library && a.host_waits_for == b.host_waits_for && same(a.deps, b.deps) &&
         same(a.allocs, b.allocs) && a.gemm_batch == b.gemm_batch && a.expert_top_k == b.expert_top_k &&
         a.expert_max_domains == b.expert_max_domains && a.host_commands == b.host_commands &&
         a.host_buffer_refs == b.host_buffer_refs && same(a.frees, b.frees) && a.flops == b.flops &&
         a.hbm_bytes == b.hbm_bytes && a.coll_bytes == b.coll_bytes && a.copy_bytes == b.copy_bytes &&
         a.gemm_mnk == b.gemm_mnk && a.sfu_ops == b.sfu_ops && a.thread_bytes == b.thread_bytes && a.loop_indices == b.loop_indices &&
         a.attention_seq == b.attention_seq && a.host_s == b.host_s && same_name(a.name, b.name);
}

namespace {

enum : uint64_t { kMicro = 1, kRank = 2, kSegment = 3, kOther = 4 };
constexpr uint64_t key(uint64_t kind, uint64_t value) { return (kind << 40) | value; }

// "mb12" -> 12 for prefix "mb"; -1 unless the rest is a number written the way the builder writes it.
int64_t numbered(std::string_view s, std::string_view prefix) {
  if (s.size() <= prefix.size() || s.substr(0, prefix.size()) != prefix) return -1;
  const std::string_view d = s.substr(prefix.size());
  if (d.size() > 9 || (d.size() > 1 && d[0] == '0')) return -1;
  int64_t v = 0;
  for (char c : d) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Eight bytes at a time (a byte-wise FNV-1a was a third of interning's cost, which is paid for
// every op a builder emits). Only the table's slots depend on it, never an id.
uint64_t hash_name(std::string_view s) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  if (i < s.size()) {
    // The last 1-7 bytes as one word: a name of eight or more reads its last eight (overlapping the
    // previous word), a shorter one byte by byte (a byte loop over the tail cost a tenth of interning).
    uint64_t w = 0;
    if (s.size() >= 8) {
      std::memcpy(&w, s.data() + s.size() - 8, 8);
    } else {
      for (; i < s.size(); ++i) w = (w << 8) | static_cast<unsigned char>(s[i]);
    }
    h = (h ^ w) * 0x100000001b3ull;
  }
  return h ^ (h >> 29);
}

// Equal texts, eight bytes at a time (the hashes are equal already, so a match is the rule: a call
// to memcmp for a name of a few dozen bytes cost a quarter of a lookup).
bool same_text(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  const std::size_t n = a.size();
  if (n < 8) return n == 0 || std::memcmp(a.data(), b.data(), n) == 0;
  std::size_t i = 0;
  uint64_t x = 0, y = 0;
  for (; i + 8 <= n; i += 8) {
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return false;
  }
  std::memcpy(&x, a.data() + n - 8, 8);  // the last 1-7 bytes, overlapping the previous word
  std::memcpy(&y, b.data() + n - 8, 8);
  return x == y;
}

}  // namespace

uint32_t NameTable::intern(std::string_view s) { return find_or_add(s, hash_name(s)); }

uint32_t NameTable::find_or_add(std::string_view s, uint64_t h) {
  if (slots_.empty()) slots_.assign(64, 0);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = static_cast<std::size_t>(h) & mask;
  for (; slots_[i] != 0; i = (i + 1) & mask) {
    const uint32_t id = slots_[i] - 1;
    if (hashes_[id] == h && same_text(views_[id], s)) return id;
  }
  const auto id = static_cast<uint32_t>(strings_.size());
  const std::string& stored = strings_.emplace_back(s);
  views_.emplace_back(stored);
  hashes_.push_back(h);
  slots_[i] = id + 1;
  if (2 * strings_.size() > slots_.size()) {
    // Grow: rehash every name into twice the slots.
    std::vector<uint32_t> old(slots_.size() * 2, 0);
    old.swap(slots_);
    const std::size_t m2 = slots_.size() - 1;
    for (uint32_t v : old) {
      if (v == 0) continue;
      std::size_t j = static_cast<std::size_t>(hashes_[v - 1]) & m2;
      while (slots_[j] != 0) j = (j + 1) & m2;
      slots_[j] = v;
    }
  }
  group_.push_back(0);
  const std::string_view first = std::string_view(stored).substr(0, stored.find('.'));
  uint64_t g = 0;
  if (const int64_t n = numbered(first, "mb"); n >= 0) g = key(kMicro, static_cast<uint64_t>(n));
  else if (const int64_t r = numbered(first, "rank"); r >= 0) g = key(kRank, static_cast<uint64_t>(r));
  else if (const int64_t c = numbered(first, "cb"); c >= 0) g = key(kSegment, static_cast<uint64_t>(c));
  else g = key(kOther, first.size() == stored.size() ? id : intern(first));
  group_[id] = g;
  return id;
}

std::string NameTable::format(const Name& n) const {
  const std::string& base = strings_[n.base];
  switch (n.prefix) {
    case NamePrefix::none: return base;
    case NamePrefix::micro_vstage: return fmt::format("mb{}.v{}.{}", n.a, n.b, base);
    case NamePrefix::micro_layer: return fmt::format("mb{}.L{}.{}", n.a, n.b, base);
    case NamePrefix::rank: return fmt::format("rank{}.{}", n.a, base);
    case NamePrefix::command_buffer: return fmt::format("cb{}.{}", n.a, base);
  }
  return base;
}

uint64_t NameTable::first_component_key(const Name& n) const {
  switch (n.prefix) {
    case NamePrefix::micro_vstage:
    case NamePrefix::micro_layer: return key(kMicro, n.a);
    case NamePrefix::rank: return key(kRank, n.a);
    case NamePrefix::command_buffer: return key(kSegment, n.a);
    case NamePrefix::none: break;
  }
  return group_[n.base];
}

}  // namespace racksim::workloads
