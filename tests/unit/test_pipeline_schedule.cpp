// The pipeline schedule (workloads/pipeline_schedule.h) against Megatron-LM's 1F1B and interleaved
// schedules (megatron/core/pipeline_parallel/schedules.py): every chunk once each way, the warm-up
// length, the 1F1B alternation and its bound on micro-batches in flight, and the layer split.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <tuple>

#include "workloads/pipeline_schedule.h"

using namespace racksim::workloads;

namespace {

struct Case {
  int pp, vp, m;
};

// Pipelines of 1 to 8 ranks, 1 to 3 chunks per rank, micro-batch counts below, at and above pp
// (interleaved needs a multiple of pp, as in Megatron).
std::vector<Case> cases() {
  std::vector<Case> out;
  for (int pp : {1, 2, 3, 4, 8})
    for (int vp : {1, 2, 3}) {
      if (pp == 1 && vp > 1) continue;
      const std::vector<int> ms = vp == 1 ? std::vector<int>{1, 2, 3, 5, 8, 13, 16} : std::vector<int>{pp, 2 * pp, 3 * pp};
      for (int m : ms) out.push_back({pp, vp, m});
    }
  return out;
}

std::string label(const Case& c, int r) {
  return "pp " + std::to_string(c.pp) + " vp " + std::to_string(c.vp) + " m " + std::to_string(c.m) + " rank " +
         std::to_string(r);
}

std::string letters(const std::vector<ScheduleEntry>& s) {
  std::string out;
  for (const auto& e : s) {
    out += e.forward ? 'F' : 'B';
    out += std::to_string(e.micro);
    out += '.';
    out += std::to_string(e.chunk);
    out += ' ';
  }
  return out;
}

}  // namespace

TEST(PipelineSchedule, EveryChunkOnceForwardAndOnceBackwardPerRank) {
  for (const auto& c : cases())
    for (int r = 0; r < c.pp; ++r) {
      const auto s = pipeline_schedule(c.pp, c.vp, c.m, r);
      ASSERT_EQ(s.size(), static_cast<std::size_t>(2 * c.m * c.vp)) << label(c, r);
      std::map<std::tuple<bool, int, int>, int> seen;
      for (const auto& e : s) {
        ASSERT_GE(e.micro, 0) << label(c, r);
        ASSERT_LT(e.micro, c.m) << label(c, r);
        ASSERT_GE(e.chunk, 0) << label(c, r);
        ASSERT_LT(e.chunk, c.vp) << label(c, r);
        ++seen[{e.forward, e.micro, e.chunk}];
      }
      for (int i = 0; i < c.m; ++i)
        for (int k = 0; k < c.vp; ++k) {
          EXPECT_EQ((seen[{true, i, k}]), 1) << label(c, r) << " F" << i << "." << k;
          EXPECT_EQ((seen[{false, i, k}]), 1) << label(c, r) << " B" << i << "." << k;
        }
    }
}

TEST(PipelineSchedule, BackwardFollowsItsForwardAndMicroBatchesRunInOrder) {
  for (const auto& c : cases())
    for (int r = 0; r < c.pp; ++r) {
      std::map<std::tuple<bool, int, int>, std::size_t> at;
      const auto s = pipeline_schedule(c.pp, c.vp, c.m, r);
      for (std::size_t i = 0; i < s.size(); ++i) at[{s[i].forward, s[i].micro, s[i].chunk}] = i;
      for (int i = 0; i < c.m; ++i)
        for (int k = 0; k < c.vp; ++k) {
          EXPECT_LT((at[{true, i, k}]), (at[{false, i, k}])) << label(c, r);
          if (i > 0) {  // a chunk takes its micro-batches in order, both ways
            EXPECT_LT((at[{true, i - 1, k}]), (at[{true, i, k}])) << label(c, r);
            EXPECT_LT((at[{false, i - 1, k}]), (at[{false, i, k}])) << label(c, r);
          }
        }
    }
}

// Megatron's num_warmup_microbatches: pp - rank - 1 (1F1B), (pp - rank - 1)·2 + (vp - 1)·pp (interleaved),
// at most every chunk.
TEST(PipelineSchedule, WarmupIsMegatronsCount) {
  EXPECT_EQ(warmup_forwards(4, 1, 8, 0), 3);
  EXPECT_EQ(warmup_forwards(4, 1, 8, 2), 1);
  EXPECT_EQ(warmup_forwards(4, 1, 8, 3), 0);
  EXPECT_EQ(warmup_forwards(8, 1, 3, 0), 3);   // fewer micro-batches than stages: all forwards first
  EXPECT_EQ(warmup_forwards(4, 2, 8, 0), 10);  // 3·2 + 1·4
  EXPECT_EQ(warmup_forwards(4, 2, 8, 3), 4);   // 0·2 + 1·4
  EXPECT_EQ(warmup_forwards(4, 3, 4, 0), 12);  // 3·2 + 2·4 = 14, capped at 4·3 chunks
  EXPECT_EQ(warmup_forwards(1, 1, 8, 0), 0);
  for (const auto& c : cases())
    for (int r = 0; r < c.pp; ++r) {
      const auto s = pipeline_schedule(c.pp, c.vp, c.m, r);
      const int w = warmup_forwards(c.pp, c.vp, c.m, r);
      // The schedule opens with exactly w unpaired forwards; the next entry is the first pair's forward.
      for (int k = 0; k < w; ++k) {
        EXPECT_TRUE(s[k].forward) << label(c, r);
        EXPECT_FALSE(s[k].paired) << label(c, r);
      }
      if (c.pp > 1 && w < c.m * c.vp) {
        EXPECT_TRUE(s[w].forward && s[w].paired) << label(c, r);
        EXPECT_FALSE(s[w + 1].forward) << label(c, r);
      }
    }
}

// After the warm-up, forwards and backwards alternate (each forward paired with the backward after it)
// until the forwards run out; the cool-down is backwards only. So no rank holds more than warm-up + 1
// chunks' activations, the point of 1F1B; the last rank (no warm-up) never more than one.
TEST(PipelineSchedule, OneForwardOneBackwardInTheSteadyState) {
  for (const auto& c : cases()) {
    if (c.pp == 1) continue;
    for (int r = 0; r < c.pp; ++r) {
      const auto s = pipeline_schedule(c.pp, c.vp, c.m, r);
      const int w = warmup_forwards(c.pp, c.vp, c.m, r), total = c.m * c.vp;
      const int steady = total - w;
      for (int i = 0; i < steady; ++i) {
        const auto& f = s[w + 2 * i];
        const auto& b = s[w + 2 * i + 1];
        EXPECT_TRUE(f.forward && f.paired) << label(c, r) << ": " << letters(s);
        EXPECT_TRUE(!b.forward && b.paired) << label(c, r) << ": " << letters(s);
      }
      for (std::size_t k = static_cast<std::size_t>(w + 2 * steady); k < s.size(); ++k)
        EXPECT_TRUE(!s[k].forward && !s[k].paired) << label(c, r);
      int in_flight = 0, peak = 0;
      for (const auto& e : s) peak = std::max(peak, in_flight += e.forward ? 1 : -1);
      EXPECT_EQ(in_flight, 0);
      EXPECT_EQ(peak, std::min(w + 1, total)) << label(c, r);
    }
  }
}

TEST(PipelineSchedule, OneF1BOnTwoStages) {
  // Rank 0 of 2, three micro-batches: one warm-up forward, two pairs, one cool-down backward.
  EXPECT_EQ(letters(pipeline_schedule(2, 1, 3, 0)), "F0.0 F1.0 B0.0 F2.0 B1.0 B2.0 ");
  EXPECT_EQ(letters(pipeline_schedule(2, 1, 3, 1)), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 ");
}

TEST(PipelineSchedule, InterleavedRotatesChunksEveryPpMicroBatches) {
  // pp 2, vp 2, 4 micro-batches, rank 1 (warm-up 0·2 + 1·2 = 2): forwards take micro-batches 0,1 through
  // chunk 0, then 0,1 through chunk 1, then 2,3 likewise; backwards run the chunks in reverse.
  EXPECT_EQ(letters(pipeline_schedule(2, 2, 4, 1)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
}

TEST(PipelineSchedule, WithoutPipelineEachBackwardFollowsItsForward) {
  const auto s = pipeline_schedule(1, 1, 3, 0);
  EXPECT_EQ(letters(s), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 ");
  // The overlap pairs B(i) with F(i + 1): everything but the first forward and the last backward.
  const std::vector<bool> paired = {false, true, true, true, true, false};
  for (std::size_t k = 0; k < s.size(); ++k) EXPECT_EQ(s[k].paired, paired[k]) << k;
}

TEST(PipelineSchedule, LayerSplit) {
  const PipelineLayout even;
  EXPECT_EQ(split_layers(32, 4, even), (std::vector<int>{0, 8, 16, 24, 32}));
  EXPECT_EQ(split_layers(32, 1, even), (std::vector<int>{0, 32}));
  // Llama 3 405B: 126 layers on 16 stages, 7 on the two ends (which hold the embedding and the head), 8 between.
  const auto b = split_layers(126, 16, even);
  ASSERT_EQ(b.size(), 17u);
  EXPECT_EQ(b[1] - b[0], 7);
  EXPECT_EQ(b[16] - b[15], 7);
  for (int v = 1; v < 15; ++v) EXPECT_EQ(b[v + 1] - b[v], 8) << v;
  // Megatron's --decoder-first/last-pipeline-num-layers: the ends as given (0 allowed), the rest evenly.
  PipelineLayout ends;
  ends.first_stage_layers = 0;
  ends.last_stage_layers = 6;
  EXPECT_EQ(split_layers(30, 4, ends), (std::vector<int>{0, 0, 12, 24, 30}));
  PipelineLayout last_only;
  last_only.last_stage_layers = 2;
  EXPECT_EQ(split_layers(10, 3, last_only), (std::vector<int>{0, 4, 8, 10}));
  // Any count: every layer once, stages differ by at most one and the ends never hold more.
  for (int L = 1; L <= 64; ++L)
    for (int V = 1; V <= std::min(L, 16); ++V) {
      const auto s = split_layers(L, V, even);
      ASSERT_EQ(s.front(), 0);
      ASSERT_EQ(s.back(), L) << L << " on " << V;
      int lo = L, hi = 0, middle_lo = L;
      for (int v = 0; v < V; ++v) {
        lo = std::min(lo, s[v + 1] - s[v]);
        hi = std::max(hi, s[v + 1] - s[v]);
        if (v > 0 && v < V - 1) middle_lo = std::min(middle_lo, s[v + 1] - s[v]);
      }
      EXPECT_LE(hi - lo, 1) << L << " on " << V;
      EXPECT_GE(lo, 1) << L << " on " << V;
      EXPECT_LE(s[1] - s[0], middle_lo) << L << " on " << V;
      EXPECT_LE(s[V] - s[V - 1], middle_lo) << L << " on " << V;
    }
}

// Megatron's --microbatch-group-size-per-virtual-pipeline-stage N (the Llama 3 paper's "tunable N"): its schedule table
// groups N micro-batches per virtual stage, the last group whatever is left (get_schedule_table at d98e8a64), and the
// interleaved warm-up grows by (vp - 1)·(N - pp). The two examples of Megatron's own docstring
// (model_parallel_config.py), forwards of rank 0: PP 2 VP 2 N 2 M 4 "0 1 0 1 2 3 2 3"; N 3 M 5 "0 1 2 0 1 2 3 4 3 4".
TEST(PipelineSchedule, MicroBatchGroupsAreMegatronsScheduleTable) {
  auto forwards = [](int pp, int vp, int m, int n) {
    std::string micro, chunk;
    for (const auto& e : pipeline_schedule(pp, vp, m, 0, false, n))
      if (e.forward) micro += std::to_string(e.micro), chunk += std::to_string(e.chunk);
    return micro + " " + chunk;
  };
  EXPECT_EQ(forwards(2, 2, 4, 2), "01012323 00110011");
  EXPECT_EQ(forwards(2, 2, 5, 3), "0120123434 0001110011");
  EXPECT_EQ(forwards(4, 2, 8, 0), forwards(4, 2, 8, 4));  // 0: Megatron's default, pp
  EXPECT_EQ(warmup_forwards(4, 2, 16, 0, false, 8), 14);   // 3·2 + 1·8
  EXPECT_EQ(warmup_forwards(4, 3, 12, 1, false, 6), 16);   // 2·2 + 2·6
  EXPECT_EQ(warmup_forwards(4, 2, 6, 0, false, 6), 12);    // 3·2 + 1·6 = 12 = every chunk
  // Every valid grouping: each chunk once each way, each backward after its forward, a chunk's micro-batches in
  // order, the warm-up as counted (the checks above, on the grouped schedules).
  for (int pp : {2, 3, 4})
    for (int vp : {2, 3})
      for (int m = pp; m <= 4 * pp + 1; ++m)
        for (int n = pp; n <= m; ++n) {
          if (m % n != 0 && m % n < pp) continue;  // Megatron refuses these
          for (int r = 0; r < pp; ++r) {
            const auto s = pipeline_schedule(pp, vp, m, r, false, n);
            const std::string at = "pp " + std::to_string(pp) + " vp " + std::to_string(vp) + " m " +
                                   std::to_string(m) + " N " + std::to_string(n) + " rank " + std::to_string(r);
            ASSERT_EQ(s.size(), static_cast<std::size_t>(2 * m * vp)) << at;
            std::map<std::tuple<bool, int, int>, std::size_t> pos;
            for (std::size_t i = 0; i < s.size(); ++i) pos[{s[i].forward, s[i].micro, s[i].chunk}] = i;
            ASSERT_EQ(pos.size(), s.size()) << at;
            for (int i = 0; i < m; ++i)
              for (int k = 0; k < vp; ++k) {
                EXPECT_LT((pos[{true, i, k}]), (pos[{false, i, k}])) << at;
                if (i > 0) {
                  EXPECT_LT((pos[{true, i - 1, k}]), (pos[{true, i, k}])) << at;
                }
              }
            const int w = warmup_forwards(pp, vp, m, r, false, n);
            EXPECT_EQ(w, std::min((pp - r - 1) * 2 + (vp - 1) * n, m * vp)) << at;
            for (int k = 0; k < w; ++k) EXPECT_TRUE(s[k].forward) << at;
            if (w < m * vp) {
              EXPECT_FALSE(s[w + 1].forward) << at;  // then 1F1B pairs
            }
          }
        }
}
