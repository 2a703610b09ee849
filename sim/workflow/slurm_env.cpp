// Slurm job arrays split a sweep without a --shard argument (DESIGN.md "Sweep file").
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "input/diagnostics.h"
#include "sim/workflow/sweep.h"

namespace racksim::workflow {

namespace {
std::optional<long long> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  // (Slurm's array indices and counts are below its MaxArraySize, 4,000,001 at most; past 64 bits strtoll had clamped
  // the value, which the message then showed in place of the text, and the shard arithmetic could overflow.)
  constexpr long long kMax = 1'000'000'000;
  if (*end != '\0' || errno == ERANGE || n < 0 || n > kMax) {
    input::Diagnostic d;
    d.where.file = fmt::format("environment {}={}", name, v);
    d.message = fmt::format("expected an integer from 0 to {}", kMax);
    throw input::InputError({d});
  }
  return n;
}
}  // namespace

std::optional<Shard> shard_from_slurm_env(std::string* describe) {
  const auto id = env_int("SLURM_ARRAY_TASK_ID");
  if (!id) return std::nullopt;
  const auto count = env_int("SLURM_ARRAY_TASK_COUNT");
  const auto max = env_int("SLURM_ARRAY_TASK_MAX");
  // MIN names the first index (0 for --array=0-7, 1 for --array=1-8); without it, an ID that
  // reaches COUNT means the array counts from 1.
  const long long min = env_int("SLURM_ARRAY_TASK_MIN").value_or(count && *id >= *count ? 1 : 0);
  // STEP: --array=1-7:2 runs IDs 1, 3, 5, 7, the shards 0-3 (Slurm sets SLURM_ARRAY_TASK_STEP).
  const long long step = env_int("SLURM_ARRAY_TASK_STEP").value_or(1);
  const long long n = count ? *count : (max && step > 0 ? (*max - min) / step + 1 : 0);
  const long long k = step > 0 ? (*id - min) / step : -1;
  if (n < 1 || step < 1 || (*id - min) % step != 0 || k < 0 || k >= n) {
    input::Diagnostic d;
    d.where.file = fmt::format("environment SLURM_ARRAY_TASK_ID={} (MIN {}, STEP {}, COUNT {})", *id, min, step, n);
    d.message = "not a task of an evenly stepped job array (use --array=0-N, 1-N or A-B:S, or give --shard K/N)";
    throw input::InputError({d});
  }
  if (describe)
    *describe = fmt::format("{}/{} from SLURM_ARRAY_TASK_ID={} (SLURM_ARRAY_TASK_MIN {}, STEP {}, COUNT {})", k, n, *id, min,
                            step, n);
  return Shard{static_cast<int>(k), static_cast<int>(n)};
}

}  // namespace racksim::workflow
