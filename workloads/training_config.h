// How a model is trained: batch, precision, parallelism, sharding of training state,
// activation recompute/offload, and the launch mode. The graph builder turns these into
// transformations of the training graph.
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/names.h"

namespace racksim::workloads {

struct Parallelism {
  int tp = 1;   // tensor parallel (with sequence parallelism)
  int pp = 1;   // pipeline stages
  int vp = 1;   // virtual (interleaved) stages per pipeline rank
  int cp = 1;   // context parallel
  int ep = 1;   // expert parallel (folds into tp·cp·dp, as in Megatron)
  int etp = 0;  // expert tensor parallel; 0 = tp (Megatron's default for --expert-tensor-parallel-size)
  int dp = 0;   // data parallel; resolved from gpus when `dp: auto`
  bool dp_auto = true;
  // Hybrid sharding (HSDP; torchtitan's data_parallel_shard_degree): ZeRO/FSDP shards state over a shard group
  // of dp_shard data-parallel ranks (the innermost of dp) and replicates it over dp/dp_shard replica groups.
  // 0: the whole of dp (plain ZeRO/FSDP).
  int dp_shard = 0;

  int dp_shard_size() const { return dp_shard > 0 ? dp_shard : dp; }
  // Replica groups of the sharded state: 1 without hybrid sharding.
  int dp_replicas() const { return dp_shard > 0 && dp > 0 && dp % dp_shard == 0 ? dp / dp_shard : 1; }

  int expert_tp() const { return etp > 0 ? etp : tp; }
  // Expert data parallel: the ranks of one pipeline stage holding the same experts. Megatron lays out
  // dense layers as tp-cp-dp(-pp) and expert layers as etp-ep-edp(-pp) over the same ranks.
  int expert_dp() const {
    const long long world_stage = static_cast<long long>(tp) * cp * dp;
    const long long expert_mp = static_cast<long long>(ep) * expert_tp();
    return expert_mp > 0 && world_stage % expert_mp == 0 ? static_cast<int>(world_stage / expert_mp) : 1;
  }
};

enum class OptimizerSharding { none, zero1, zero2, fsdp };
inline constexpr std::array<sim::EnumName<OptimizerSharding>, 4> kOptimizerShardingNames = {
    {{OptimizerSharding::none, "none"}, {OptimizerSharding::zero1, "zero1"}, {OptimizerSharding::zero2, "zero2"}, {OptimizerSharding::fsdp, "fsdp"}}};
// names: a {save: [...], offload: [...]} map, not a scalar a scenario can write (the loader skips it).
enum class RecomputeMode { none, selective, full, save_dots, names };
inline constexpr std::array<sim::EnumName<RecomputeMode>, 5> kRecomputeModeNames = {{{RecomputeMode::none, "none"},
                                                                                      {RecomputeMode::selective, "selective"},
                                                                                      {RecomputeMode::full, "full"},
                                                                                      {RecomputeMode::save_dots, "save_dots"},
                                                                                      {RecomputeMode::names, "names"}}};
// The Adam moments' dtype: fp32, or bf16 (Megatron-Core's precision-aware optimizer, --use-precision-aware-optimizer
// --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16, as DeepSeek-V3 trained: arXiv 2412.19437 sec. 3.3.3). Master weights and
// main gradients stay fp32.
enum class AdamMoments { fp32, bf16 };
inline constexpr std::array<sim::EnumName<AdamMoments>, 2> kAdamMomentsNames = {
    {{AdamMoments::fp32, "fp32"}, {AdamMoments::bf16, "bf16"}}};
enum class AttentionImpl { flash, materialized };
inline constexpr std::array<sim::EnumName<AttentionImpl>, 2> kAttentionImplNames = {
    {{AttentionImpl::flash, "flash"}, {AttentionImpl::materialized, "materialized"}}};
// Whose conventions the step follows where frameworks differ: Megatron-LM (bf16 weight copy,
// fp32 main grads, distributed optimizer) or JAX/XLA (fp32 parameters cast per use, gradients
// as step temporaries, optimizer outputs in new buffers when the state is not donated).
enum class Framework { megatron, jax };
inline constexpr std::array<sim::EnumName<Framework>, 2> kFrameworkNames = {{{Framework::megatron, "megatron"}, {Framework::jax, "jax"}}};

// Activation names per transformer layer (DESIGN.md "Scenario file").
const std::vector<std::string>& activation_names();      // dense layer
const std::vector<std::string>& moe_activation_names();  // extra names in MoE layers

struct RecomputePolicy {
  RecomputeMode mode = RecomputeMode::none;
  std::vector<std::string> save;     // mode == names: kept in HBM
  std::vector<std::string> offload;  // mode == names: moved to host memory in forward, back in backward
};

// A remat policy named the way MaxText (`remat_policy`) or JAX (`jax.checkpoint_policies.*`)
// names it, as the racksim policy with the same saved set (docs/decisions.md, "Remat policy
// names"). `difference` is empty when the saved sets are the same; otherwise it says what racksim
// keeps differently (a warning wherever the alias is used).
struct RecomputeAlias {
  RecomputePolicy policy;
  std::string source;      // what the named policy saves, in its own names
  std::string difference;  // empty: the same saved set
};
// nullopt when `name` is not an alias. `moe`: the model has MoE layers (their saved set differs).
std::optional<RecomputeAlias> recompute_alias(const std::string& name, bool moe);
const std::vector<std::string>& recompute_alias_names();

// How MoE tokens reach their experts and back (Megatron-Core --moe-token-dispatcher-type).
//  all_to_all: NCCL all-to-all over the EP group, one copy per (token, expert) pair ("alltoall").
//  hierarchical: DeepEP / HybridEP ("flex"): a token crosses the NIC once per destination NVLink
//  domain and is forwarded over NVLink to the GPUs holding its experts there, one copy per GPU.
//  deepep and hybridep are both hierarchical, each at its own measured link rates and SM count
//  (hw::expert_link_efficiency; DeepEP 20 SMs, HybridEP 32).
enum class MoeDispatcher { all_to_all, deepep, hybridep };
inline constexpr std::array<sim::EnumName<MoeDispatcher>, 3> kMoeDispatcherNames = {
    {{MoeDispatcher::all_to_all, "alltoall"}, {MoeDispatcher::deepep, "deepep"}, {MoeDispatcher::hybridep, "hybridep"}}};
struct MoeOptions {
  MoeDispatcher dispatcher = MoeDispatcher::all_to_all;
  bool hierarchical() const { return dispatcher != MoeDispatcher::all_to_all; }
  // Node-limited routing (DeepSeek-V3's group-limited gating, Megatron --moe-router-group-topk with
  // groups = nodes): each token's experts lie in at most this many NVLink domains. 0: unlimited.
  int max_nodes_per_token = 0;
  // Megatron-Core --overlap-moe-expert-parallel-comm (and DualPipe): in the 1F1B steady state, the
  // EP exchanges of one micro-batch run beside the compute of the micro-batch paired with it. In Megatron mode
  // with an interleaved pipeline or none, in Megatron-Core's combined 1F1B order, with --delay-wgrad-compute
  // (which its recipes set with it); elsewhere a looser DualPipe-like pairing (docs/decisions.md).
  bool a2a_overlap = false;
  // Megatron-Core's fused router (--moe-router-fusion: top-k, score function and aux-loss scores in one
  // kernel) and fused permutation (--moe-permute-fusion: permute, unpermute and chunk sorting). Both
  // off by default, as in Megatron; they take the host work of what they fuse away.
  bool router_fusion = false;
  bool permute_fusion = false;
  // The forward dispatch's token format under fp8-class training. Unset: as the framework does.
  // Megatron-Core's alltoall, DeepEP and HybridEP dispatchers send the bf16 hidden states
  // (token_dispatcher.py / fused_a2a.py at d98e8a6: "HybridEP dispatcher does not support fp8
  // dispatch"; fp8/mxfp8 dispatch only through the opt-in NCCL-EP path, moe_dispatch_fwd_dtype,
  // default bf16), and GroupedLinear quantizes after the exchange; XLA casts before it. true: the
  // matmul format with its scales (DeepSeek-V3's own FP8 dispatch); false: bf16.
  std::optional<bool> dispatch_fp8;
  // HybridEP's combine synchronizes its stream on the host before the unpermutation, to read the dispatched token count
  // from pinned memory (deepseek-ai/DeepEP hybrid-ep executor.cu combine_preprocess: combine_with_unpermute never passes
  // the count, so it stays -1 and the executor calls cudaStreamSynchronize), in the forward combine and in the dispatch's
  // backward. In the hybrid-ep branch from 83e0d15 (2025-12-03) to a484936 (2026-01-20), e.g. 3d4a884, which
  // Megatron-MoE-ModelZoo's GB200 image pins from 2026-01-20 (dockers/GB200.Dockerfile). Off: newer and older HybridEP.
  bool hybridep_combine_sync = false;
  // HybridEP's dispatch synchronizes its stream on the host after the dispatch kernel, to read the tokens per local
  // expert that size the permutation's output: in dispatch_postprocess it launches permute_processing behind the
  // dispatch kernel and copies tokens_per_expert to the host (deepseek-ai/DeepEP hybrid-ep 3f601f7
  // csrc/hybrid_ep/executor/executor.cu:154-158, tokens_per_expert.cpu() then .sum().item()), when Megatron-Core passes
  // no num_permuted_tokens (dropless: token_dispatcher.py _HybridEPManager). In the branch from f4f2c10 (2025-10-09) to
  // 29b4d6f; 3f601f7 is what Megatron-LM's DeepSeek-V3 GB200 reproduce guide and Megatron-MoE-ModelZoo's GB200
  // Dockerfile pinned until 2026-01-20. (1dddd19..29b4d6f also leave the preprocessing's count on the GPU, so their
  // combine and backward wait too, through .item(): not modelled.) From 83e0d15 the count is read before the dispatch
  // kernel instead (the notify's wait). Off: other HybridEP versions.
  bool hybridep_dispatch_sync = false;
  // Megatron-Core's --moe-router-padding-for-quantization (--moe-router-padding-for-fp8, its alias): under fp8-class
  // training the router pads each expert's count of a rank's tokens up to the GEMM alignment (fp8 16, mxfp8 and nvfp4
  // 32: fp8_utils.py get_fp8_align_size, fp4_utils.py get_fp4_align_size), sending tokens routed with probability 0
  // (moe_utils.py pad_routing_map, in the alltoall dispatcher's dispatch_preprocess), and the experts skip their own
  // Fp8Padding copies (moe_utils.py skip_routed_expert_padding). Under DeepEP it pads the received map per local
  // expert instead, at most align - 1 rows an expert (not modelled); HybridEP pads inside its permutation either way.
  bool router_padding = false;
  // Megatron-Core's token dropping (--moe-expert-capacity-factor cf): each expert takes at most
  // C = ceil(tokens x top_k / experts x cf) of a rank's tokens (moe_utils.py get_capacity, on the rank's own tokens;
  // the router drops the rest, apply_router_token_dropping). 0: dropless. With pad_to_capacity
  // (--moe-pad-expert-input-to-capacity) every expert takes exactly C from every rank, tokens routed with probability 0
  // filling the gaps: the sizes are known before routing, so the alltoall dispatcher neither exchanges its counts nor
  // waits for them on the host (token_dispatcher.py preprocess at Megatron-LM@d98e8a64: the drop_and_pad branch), and
  // the load is the same at every rank whatever the routing. Without padding the counts still vary (the host waits
  // for them before the first permutation) and the busiest rank's load is capped at C.
  double capacity_factor = 0;
  bool pad_to_capacity = false;
  // C for a rank routing `tokens` tokens (its own, after the sequence-parallel slice).
  double expert_capacity(double tokens, int top_k, int experts) const {
    return std::ceil(tokens * top_k / static_cast<double>(experts) * capacity_factor);
  }
  // Megatron-Core's --moe-router-force-load-balancing (a benchmark mode): the router routes on random normal logits
  // (moe_utils.py RandomSTE at Megatron-LM@d98e8a64), so each token takes top_k distinct experts uniformly at random and
  // the busiest EP rank receives more than the mean by chance, each layer and micro-batch: its load is
  // hw::random_routing_busiest_load, not training.expert_imbalance (which must stay 1 with it).
  bool force_load_balancing = false;
};
// Uneven pipeline ends, stated one of two ways (-1: not stated). Per virtual stage: the first and the last virtual
// stage's decoder layers, 0 allowed (a stage of only the embedding or only the loss: the split
// --pipeline-model-parallel-layout "Et|(tt|)*30L" and --account-for-embedding/loss-in-pipeline-split make). Per
// pipeline rank: Megatron's --decoder-first/last-pipeline-num-layers, the first and the last rank's layers (at least
// 1), split evenly over that rank's virtual stages (transformer_block.py get_num_layers_to_build). With vp 1 they agree.
struct PipelineLayout {
  int first_stage_layers = -1;
  int last_stage_layers = -1;
  int first_rank_layers = -1;
  int last_rank_layers = -1;
  // The interleaved schedule's micro-batches per group (Megatron's --microbatch-group-size-per-virtual-pipeline-stage,
  // the "tunable N" of the Llama 3 paper, sec. 3.3.2): each virtual stage runs N micro-batches before the next one
  // starts; 0 is Megatron's default, pp (depth-first). Megatron needs pp <= N <= micro-steps, and the last group
  // (micro-steps mod N) empty or of at least pp.
  int microbatch_group_size = 0;
  int group(int pp) const { return microbatch_group_size > 0 ? microbatch_group_size : pp; }
  bool by_stage() const { return first_stage_layers >= 0 || last_stage_layers >= 0; }
  bool by_rank() const { return first_rank_layers >= 0 || last_rank_layers >= 0; }
  bool uneven() const { return by_stage() || by_rank(); }
};

// Megatron-Core's context-parallel attention (--cp-comm-type): ring of K/V sends, all-gather of K/V,
// or all-to-all of Q/K/V and output (DeepSpeed-Ulysses).
enum class CpComm { p2p, all_gather, a2a };
inline constexpr std::array<sim::EnumName<CpComm>, 3> kCpCommNames = {{{CpComm::p2p, "p2p"}, {CpComm::all_gather, "all_gather"}, {CpComm::a2a, "a2a"}}};

// How an fp8 step scales its matmul operands (Megatron --fp8-recipe; mxfp8 is a precision of its own).
// delayed and tensorwise keep one scale per tensor, which the tensor cores apply; blockwise (DeepSeek-V3's
// 1x128 activation tiles and 128x128 weight blocks) needs a scale per 128-deep block of K, which Hopper's
// tensor cores cannot apply: the GEMM promotes each block's partial sum on the CUDA cores (gpu.fp8_blockwise_rate_ratio).
enum class Fp8Recipe { delayed, tensorwise, blockwise };
inline constexpr std::array<sim::EnumName<Fp8Recipe>, 3> kFp8RecipeNames = {
    {{Fp8Recipe::delayed, "delayed"}, {Fp8Recipe::tensorwise, "tensorwise"}, {Fp8Recipe::blockwise, "blockwise"}}};

// Who writes a JAX step's fp8 casts. transformer_engine: one kernel casts an operand to its row-wise and column-wise
// copies (TE's cast_transpose; Pax's and MaxText's te_* recipes). xla: flax's direct FP8 dot (MaxText's fp8 and
// fp8_gpu, flax.linen.Fp8DirectDotGeneralOp) lowered by XLA, which casts each operand to one fp8 layout and transposes
// the copy the other GEMM needs in a kernel of its own (calibration/data/h100-2026-12-06-jax-fp8). Only with framework
// jax, precision fp8, delayed scaling and the fp8 wgrad (what flax's op runs).
enum class Fp8Casts { transformer_engine, xla };
inline constexpr std::array<sim::EnumName<Fp8Casts>, 2> kFp8CastsNames = {
    {{Fp8Casts::transformer_engine, "transformer_engine"}, {Fp8Casts::xla, "xla"}}};
// Megatron --transformer-impl: whose linear layers the model runs (Megatron mode).
enum class TransformerImpl { transformer_engine, local };
inline constexpr std::array<sim::EnumName<TransformerImpl>, 2> kTransformerImplNames = {
    {{TransformerImpl::transformer_engine, "transformer_engine"}, {TransformerImpl::local, "local"}}};

struct TrainingConfig {
  // The matmuls in a low-precision format with scales (fp8, mxfp8, nvfp4), Transformer Engine's or XLA's.
  bool fp8_class() const {
    return precision == sim::Dtype::fp8 || precision == sim::Dtype::mxfp8 || precision == sim::Dtype::nvfp4;
  }
  int seq_len = 0;
  int global_batch = 0;   // sequences per optimizer step
  int micro_batch = 1;    // sequences per micro-step per data-parallel rank
  sim::Dtype precision = sim::Dtype::bf16;
  // training.precision: fp16 (Megatron --fp16): parameters, activations and gradients in IEEE half precision. The tensor
  // cores run fp16 at bf16's rate on every preset (the datasheets give one dense FP16/BF16 figure), so `precision` stays
  // bf16 for the hardware model and only Megatron's fp16 handling differs (Precision::grad_bytes and the optimizer's
  // loss-scaler work, graph_builder.cpp and data_parallel.cpp). Megatron mode only.
  bool fp16 = false;
  // The name training.precision gave: fp16 or the matmul dtype's.
  std::string precision_name() const { return fp16 ? "fp16" : sim::to_string(precision); }
  // Megatron --grad-reduce-in-bf16 (training.grad_reduce_in_bf16): the gradient buffer (main_grad) kept and reduced in
  // bf16 where --bf16 otherwise forces fp32 (megatron/training/arguments.py: accumulate_allreduce_grads_in_fp32 =
  // False). Megatron mode, not with fp16 (whose buffer is fp16 already).
  bool grad_reduce_in_bf16 = false;
  // Megatron's gradient buffer in 16 bits (fp16 or grad_reduce_in_bf16): 2 bytes per parameter held and reduced, and
  // the distributed optimizer's fp32 copy of its shard (Precision::main_grad_bytes).
  bool grads_16bit() const { return framework != Framework::jax && (fp16 || grad_reduce_in_bf16); }
  Parallelism parallelism;
  OptimizerSharding optimizer_sharding = OptimizerSharding::none;
  RecomputePolicy recompute;
  // Megatron's --recompute-method block --recompute-num-layers N under full recompute: only the first N layers of
  // each model chunk (a pipeline stage, or a virtual stage) are checkpointed, the others keep every activation.
  // 0: every layer (Megatron's uniform method with one layer per checkpoint, racksim's recompute: full).
  int recompute_num_layers = 0;
  bool offload_optimizer = false;
  // Multi-token prediction (DeepSeek-V3 sec. 2.2; Megatron-Core --mtp-num-layers): D sequential modules on
  // the last pipeline stage, each an embedding of the tokens shifted by k, two RMSNorms and a projection
  // from 2h to h before one transformer layer of the model's last layer's kind, then its own norm and the
  // shared output head with a loss of its own. 0: none (racksim's default; Megatron's too).
  int mtp_layers = 0;
  // The layers a step's graph builds and replays: the model's decoder layers and the MTP depths.
  int graph_layers(int model_layers) const { return model_layers + mtp_layers; }
  AdamMoments adam_moments = AdamMoments::fp32;
  AttentionImpl attention = AttentionImpl::flash;
  bool cuda_graphs = false;
  // Megatron-Core's --cuda-graph-scope with Transformer Engine's graphs (--cuda-graph-impl transformer_engine):
  // which modules of each layer are captured (megatron/core/transformer/enums.py, CudaGraphScope). Everything
  // outside them (the MoE dispatcher and experts, embedding, loss, optimizer, pipeline and data-parallel
  // communication) launches eagerly. None set: the whole step's kernels come from graphs (racksim's
  // per-micro-step graphs), except the MoE dispatcher's host work, whose shapes follow the routing.
  struct CudaGraphScope {
    bool attn = false;            // input norm, attention, its output projection and residual
    bool mlp = false;             // a dense layer's pre-MLP norm and MLP
    bool moe_router = false;      // an MoE layer's pre-MLP norm, router and shared experts
    bool moe_preprocess = false;  // the token dispatcher's preprocessing (requires moe_router)
    bool any() const { return attn || mlp || moe_router || moe_preprocess; }
    bool operator==(const CudaGraphScope&) const = default;
  };
  CudaGraphScope cuda_graph_scope;
  bool nvls = true;
  Framework framework = Framework::megatron;
  // Tensor parallelism with sequence parallelism (Megatron: all-gather before and
  // reduce-scatter after each TP region, norms on a 1/tp slice of the tokens) or without
  // (all-reduce after the row-parallel GEMMs, as GSPMD/XLA and Megatron without --sequence-parallel).
  bool sequence_parallel = true;
  // Tensor-parallel communication overlapped with the neighbouring GEMM (Megatron/Transformer
  // Engine --tp-comm-overlap with userbuffers): the collective runs beside the GEMM instead of
  // before or after it. Megatron mode only: XLA's collective matmul is not modelled, and in JAX
  // mode the key changes nothing (a note says so).
  bool tp_comm_overlap = false;
  // CUDA_DEVICE_MAX_CONNECTIONS, the hardware queues the job's streams share. With one, kernels reach the GPU in
  // launch order, so a collective launched before the next GEMM gets its SMs first (Megatron sets 1 for its
  // TP/SP ordering); with more, a collective that becomes ready while compute kernels hold the SMs starts only
  // when they drain (measured on 2 x H200, docs/decisions.md). Unset: 1 in Megatron mode, 32 with
  // moe.a2a_overlap (Megatron-Core's EP overlap requires more than one: megatron/core/transformer/moe/README.md;
  // Megatron-MoE-ModelZoo's sbatch_benchmarking.sh exports 32 with A2A_OVERLAP=1), and CUDA's default 8 in JAX
  // mode (XLA sets none).
  std::optional<int> cuda_device_max_connections;
  static constexpr int kMaxConnections = 32;  // CUDA takes CUDA_DEVICE_MAX_CONNECTIONS from 1 to 32
  int max_connections() const {
    if (cuda_device_max_connections) return *cuda_device_max_connections;
    if (framework == Framework::jax) return 8;
    return moe.a2a_overlap ? 32 : 1;
  }
  bool donate_state = true;         // jax: optimizer state updated in place (buffer donation)
  bool scan_layers = true;          // jax: layers under lax.scan (stacked residuals) or unrolled
  // jax: each layer weight one array stacked over the layers ([L, ...]: lax.scan needs it, and a Python loop over one
  // stacked tree has it) or one array per layer (MaxText's scan_layers: false, a layers_N subtree each; flax or equinox
  // modules listed per layer). Unset: stacked when scanned, one per layer when unrolled. Unrolled under a remat policy a
  // stacked layer's weights are sliced into buffers of their own, the checkpointed function's inputs, kept until its
  // backward (docs/decisions.md, "XLA slices an unrolled layer's stacked weights"). Megatron mode ignores it.
  std::optional<bool> stacked_layer_params;
  bool layer_params_stacked() const { return stacked_layer_params.value_or(scan_layers); }
  // jax: Q, K and V projected by one fused weight, so XLA joins their gradients into its layout for the dgrad and the
  // wgrad (two copies per layer; the compiled H200 programs, Praxis's combined QKV projection, MaxText fused_qkv: true);
  // false: three projections (MaxText's default), no join (compiled on the H200 with a fused attention kernel:
  // calibration/data/h200-2026-12-04-qkv-split-compile). Megatron mode ignores it.
  bool fused_qkv = true;
  // jax: the input embedding as a matmul of the tokens' one-hot matrix with the table (MaxText use_iota_embed: true,
  // layers/embeddings.py: (ids[..., None] == iota(V)).astype(dtype) dot table; Pax's lookup_style 'matmul'), not a
  // gather: XLA writes the one-hot matrix and runs two GEMMs, the lookup and the table's gradient (docs/decisions.md,
  // "MaxText's one-hot embedding and fp32 logits"). Megatron mode ignores it.
  bool one_hot_embedding = false;
  // jax: the output layer's dot in fp32 (MaxText logits_dot_in_fp32: true, its default from 2024-01-13 to 2024-10-03):
  // the activations cast to fp32 against the fp32 kernel at the default matmul precision, which XLA runs on the
  // tensor cores as TF32 (docs/decisions.md, "MaxText's one-hot embedding and fp32 logits"). Megatron mode ignores it.
  bool logits_fp32 = false;
  // jax, attention materialized: the softmax is Transformer Engine's fused scaled (causal) masked softmax, as TE's
  // unfused DotProductAttention runs it (NVTE_FUSED_ATTN=0; transformer_engine/jax/flax/transformer.py
  // _UnfusedDotProductAttention and module.py Softmax at TE v1.5), the layers Pax builds under TE (Praxis's
  // te_helper); where TE has no kernel for the shape (16 < S <= 4096) its module falls back to XLA's. The
  // score dot writes bf16, one kernel reads the causal half and writes bf16 probabilities (zeros above the diagonal),
  // and one backward kernel reads the probabilities and dP over that half and writes a bf16 dS. Unset (false): XLA's
  // own softmax fusions over fp32 scores (docs/decisions.md, "Transformer Engine's fused softmax in the JAX mode").
  // Megatron mode ignores it.
  bool fused_softmax = false;
  // optimizer_sharding fsdp under a pipeline (pp > 1, Megatron mode, i.e. PyTorch): when a stage's weights are
  // gathered. per_step (default): once per step and kept, gradients reduced in the last backward, as
  // torch.distributed.pipelining runs FSDP under a schedule. per_microbatch: FSDP's reshard after each backward kept
  // and its reshard after forward turned off (reshard_after_forward=False), so a layer's weights are gathered again
  // before the next forward or backward that finds them resharded, about once per micro-batch (Llama 3 405B, arXiv
  // 2407.21783 sec. 3.3.2); when the gradients are reduced is fsdp_grad_reduce's.
  enum class FsdpPipelineGather { per_step, per_microbatch };
  FsdpPipelineGather fsdp_pipeline_gather = FsdpPipelineGather::per_step;
  static constexpr std::array<sim::EnumName<FsdpPipelineGather>, 2> kFsdpPipelineGatherNames = {
      {{FsdpPipelineGather::per_step, "per_step"}, {FsdpPipelineGather::per_microbatch, "per_microbatch"}}};
  // optimizer_sharding fsdp under a pipeline (pp > 1, Megatron mode, i.e. PyTorch): when the gradients are
  // reduce-scattered. per_step (default): accumulated whole (fp32) over the micro-batches and reduced in the last
  // backward, as torch.distributed.pipelining runs FSDP (set_requires_gradient_sync(False) for the others).
  // per_microbatch: after every backward, as FSDP does outside such a schedule (FSDP1's FULL_SHARD and SHARD_GRAD_OP
  // "synchronizes and shards them (via reduce-scatter) after the backward computation", torch/distributed/fsdp/api.py;
  // FSDP2 with gradient sync on): a layer's whole gradient lives only until its reduce-scatter and the fp32 shard
  // accumulates over the micro-batches (Llama 3 405B: "shards optimizer states and gradients", sec. 3.3.2).
  enum class FsdpGradReduce { per_step, per_microbatch };
  FsdpGradReduce fsdp_grad_reduce = FsdpGradReduce::per_step;
  static constexpr std::array<sim::EnumName<FsdpGradReduce>, 2> kFsdpGradReduceNames = {
      {{FsdpGradReduce::per_step, "per_step"}, {FsdpGradReduce::per_microbatch, "per_microbatch"}}};
  // Megatron mode: whether a data-parallel group's parameter all-gathers run on a communicator of their own
  // (separate: Megatron-LM's --create-all-gather-group, "to overlap reduce-scatter and all-gather operations") or on
  // the group's one communicator with its gradient reductions (shared, the default of Megatron-LM, Megatron-FSDP and
  // PyTorch's FSDP: one NCCL communicator per process group, whose operations run in the order they are issued, so a
  // gather issued after a reduce-scatter waits for it). JAX mode: no effect (XLA's stream assignment decides).
  enum class DpAllGatherGroup { shared, separate };
  DpAllGatherGroup dp_all_gather_group = DpAllGatherGroup::shared;
  static constexpr std::array<sim::EnumName<DpAllGatherGroup>, 2> kDpAllGatherGroupNames = {
      {{DpAllGatherGroup::shared, "shared"}, {DpAllGatherGroup::separate, "separate"}}};
  // jax: XLA_PYTHON_CLIENT_MEM_FRACTION (XLA_CLIENT_MEM_FRACTION in newer JAX): with preallocation (JAX's default) the
  // allocator's pool is this fraction of the card's total memory, and a program that needs more stops with an out of
  // memory error whatever is free beside it (docs.jax.dev "GPU memory allocation"). Unset: no cap below the card's
  // (JAX's current default policy grows its 75% pool up to the whole card). Megatron mode ignores it.
  std::optional<double> xla_client_mem_fraction;
  static constexpr double kMinMemFraction = 0.01, kMaxMemFraction = 1.0;  // what the key takes (a share of the card)
  // jax, scanned layers: the collectives XLA's collective pipeliner moves across loop iterations
  // (--xla_gpu_enable_pipelined_{all_gather,reduce_scatter,all_reduce}): a layer's all-gather into the
  // previous iteration, its reduce-scatter / all-reduce into the next (xla/service/collective_pipeliner.h).
  // Default: XLA's own defaults (openxla/xla@00ccad5d xla/debug_options_flags.cc: reduce-scatter only), what
  // the measured H200 runs used (XLA_FLAGS empty); MaxText's and JAX-Toolbox's GPU recipes set all three.
  struct XlaPipelined {
    bool all_gather = false, reduce_scatter = true, all_reduce = false;
    bool operator==(const XlaPipelined&) const = default;
  };
  XlaPipelined xla_pipelined;
  // jax: XLA's collective combiners (AllReduceCombiner, ReduceScatterCombiner, AllGatherCombiner) merge
  // independent collectives of one kind over one group until their bytes would exceed these thresholds
  // (--xla_gpu_{all_reduce,reduce_scatter,all_gather}_combine_threshold_bytes). Defaults: XLA's,
  // kDefault*CombineThreshold = 30 MiB + 7 bytes (openxla/xla@9b2cf8eb xla/service/collective_utils.h).
  // Applied to the gradient reduce-scatters and replica all-reduces of unrolled programs, and to FSDP's per-array
  // weight gathers (docs/decisions.md, "XLA gathers FSDP weights array by array").
  static constexpr double kXlaDefaultCombineThresholdBytes = 30.0 * 1024 * 1024 + 7;
  struct XlaCombineThreshold {
    double all_reduce_bytes = kXlaDefaultCombineThresholdBytes;
    double reduce_scatter_bytes = kXlaDefaultCombineThresholdBytes;
    double all_gather_bytes = kXlaDefaultCombineThresholdBytes;
    bool operator==(const XlaCombineThreshold&) const = default;
  };
  XlaCombineThreshold xla_combine_threshold;
  double expert_imbalance = 1.0;    // MoE: tokens at the busiest expert rank / the mean (>= 1)
  // `expert_imbalance: chance`: the busiest rank's load is the one random routing gives the layout by chance
  // (hw::random_routing_busiest_load, as under force_load_balancing), the least excess a real router's per-micro-batch
  // counts show: a router no more even than independent random choices. expert_imbalance stays 1 with it.
  bool expert_imbalance_chance = false;
  MoeOptions moe;
  PipelineLayout pipeline;
  // Megatron's DDP switches (--overlap-grad-reduce, --overlap-param-gather; both off by default):
  // gradient buckets reduced as their layer's backward finishes instead of after the whole backward,
  // and ZeRO parameter all-gathers overlapped with the next step's forward instead of after the
  // optimizer (the forward of a layer waits only for its own bucket).
  CpComm cp_comm = CpComm::p2p;     // Megatron's default
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;  // Megatron's default; only with precision fp8
  Fp8Casts fp8_casts = Fp8Casts::transformer_engine;  // JAX mode, precision fp8: who writes the casts
  // Under fp8-class precisions, the weight-gradient GEMM in the low precision too (Megatron --fp8-wgrad, on by
  // default; --no-fp8-wgrad runs it in bf16, keeping Fprop and Dgrad in fp8).
  bool fp8_wgrad = true;
  // Megatron mode, fp8-class precisions: --fp8-param-gather (off by default, as in Megatron). On, the parameters are
  // Transformer Engine fp8 tensors (their row-wise and column-wise copies, about the bf16 weights' 2 bytes) and the
  // distributed optimizer gathers them in fp8. Off, the parameters stay bf16 (gathered in bf16) and each TE layer
  // keeps its weight's fp8 copies in a workspace from the step's first micro-batch on (is_first_microbatch).
  bool fp8_param_gather = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // Dropout (Megatron --attention-dropout / --hidden-dropout, whose defaults are 0.1 each; LLM recipes
  // mostly set 0, racksim's default). Attention dropout draws a random number per attention-score
  // element inside the fused attention kernel, forward and again in backward; hidden dropout, in the
  // bias-dropout-add after attention and after the MLP, draws one per element and keeps a one-byte mask
  // for the backward, which reads it in a kernel of its own. The probability does not change the cost.
  double attention_dropout = 0;
  double hidden_dropout = 0;
  // Megatron --cross-entropy-loss-fusion (off by default in Megatron). true (racksim's default): one
  // fused pass over the fp32 logits per direction. false: Megatron's unfused vocab-parallel cross
  // entropy, separate passes (cast to fp32, max, subtract, exp, sum, divide; in backward scale and cast
  // back; megatron/core/tensor_parallel/cross_entropy.py).
  bool cross_entropy_fusion = true;
  // Megatron --check-for-nan-in-loss-and-grad (on by default in Megatron; --no-check-... turns it off):
  // the host reads back each micro-batch's loss and each gradient bucket's norm before its reduction,
  // waiting for the GPU there (docs/decisions.md). Ignored under framework: jax. Under precision fp16 the default is
  // off: Megatron turns the check off under its dynamic loss scaler, whose skipped steps are the NaN signal
  // (megatron/training/arguments.py, `if args.fp16: ... if not args.loss_scale: args.check_for_nan_in_loss_and_grad =
  // False`); true there is a static --loss-scale's run.
  bool check_for_nan = true;
  // Megatron --gradient-accumulation-fusion (on by default; --no-gradient-accumulation-fusion turns it off): each
  // weight-gradient GEMM adds into the fp32 main gradient in its own epilogue (Transformer Engine's
  // fuse_wgrad_accumulation), at gpu.wgrad_accumulate_serial_bytes per weight element. false: the GEMM writes the
  // bf16 gradient and a kernel of its own adds it into the main gradient (Megatron's DDP hook; PyTorch's
  // AccumulateGrad likewise). Ignored under framework: jax (XLA's dot writes the gradient).
  bool gradient_accumulation_fusion = true;
  // Megatron --transformer-impl (transformer_engine, Megatron-Core's default; local: Megatron's own linears, or a plain
  // PyTorch model's torch.nn.Linear). What it changes in racksim: only whose cuBLAS call a layer's weight gradient is,
  // Transformer Engine's (a bf16 wgrad in its NT layout: gpu.bf16_wgrad_nt_time_ratio) or PyTorch's / Megatron's
  // fused_weight_gradient_mlp_cuda (the curve's TN; its fused accumulate still costs gpu.wgrad_accumulate_serial_bytes,
  // measured through TE). Everything else stays Transformer Engine's under local too, and the report says so where the
  // job asks for it: fp8-class casts and GEMMs, userbuffers (tp_comm_overlap), partial CUDA graphs, the grouped expert
  // GEMM's host time, flash attention (attention: materialized is Megatron's local DotProductAttention). Ignored under
  // framework: jax.
  TransformerImpl transformer_impl = TransformerImpl::transformer_engine;
  // The job's Megatron-Core names each NVTX range from its caller's frame even with profiling off (Megatron-LM from
  // 7f9f2bf750, 2025-05-16, to 158951764f, 2025-06-09, "Fix perf issues with NVTX range profiling"; @1e057005 is one):
  // each of the layer's nvtx_range_push/pop calls costs the host launch.megatron_nvtx_range (docs/decisions.md).
  // false (racksim's default): any other version. Ignored under framework: jax.
  bool megatron_nvtx_lookup = false;
  // Keys the scenario gave, away from their defaults, that only the other framework's mode reads (scan_layers, xla_* and
  // donate_state in Megatron mode; the overlap switches and check_for_nan in JAX mode): accepted, simulated as absent,
  // and said in the report.
  std::vector<std::string> other_framework_keys;

  // Derived: gradient-accumulation micro-steps per optimizer step.
  int micro_steps() const { return global_batch / (micro_batch * parallelism.dp); }
  // PyTorch's FSDP under a pipeline schedule (fsdp, pp > 1, Megatron mode): where fsdp_pipeline_gather and
  // fsdp_grad_reduce apply (the training-graph builder's FSDP paths, and which steps are replayed whole).
  bool fsdp_under_pipeline() const {
    return optimizer_sharding == OptimizerSharding::fsdp && parallelism.pp > 1 && framework != Framework::jax;
  }
  bool fsdp_regathers_per_microbatch() const {
    return fsdp_under_pipeline() && fsdp_pipeline_gather == FsdpPipelineGather::per_microbatch;
  }
  bool fsdp_reduces_per_microbatch() const {
    return fsdp_under_pipeline() && fsdp_grad_reduce == FsdpGradReduce::per_microbatch;
  }
  // Derived: tokens of one optimizer step over the whole job.
  double tokens_per_step() const { return static_cast<double>(global_batch) * seq_len; }
};

// The Megatron-Core graph scopes racksim models, each with its field (one table for the scenario parser,
// the report's echo and the Megatron importer).
inline constexpr std::array<std::pair<const char*, bool TrainingConfig::CudaGraphScope::*>, 4> kCudaGraphScopeNames = {{
    {"attn", &TrainingConfig::CudaGraphScope::attn},
    {"mlp", &TrainingConfig::CudaGraphScope::mlp},
    {"moe_router", &TrainingConfig::CudaGraphScope::moe_router},
    {"moe_preprocess", &TrainingConfig::CudaGraphScope::moe_preprocess}}};

std::string to_string(OptimizerSharding s);
std::string to_string(RecomputeMode m);
std::string to_string(AttentionImpl a);
std::string to_string(Framework f);
std::string to_string(MoeDispatcher d);
std::string to_string(CpComm c);
std::string to_string(Fp8Recipe r);
std::string to_string(Fp8Casts c);
std::string to_string(TransformerImpl i);
std::string to_string(AdamMoments a);

}  // namespace racksim::workloads
