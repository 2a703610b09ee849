// The MoE block's ops: router, token dispatch and combine by each dispatcher, the experts' grouped GEMMs, shared
// experts.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

void Builder::add_moe_steps(std::vector<Step>& steps, int l) {
  const double a = pr_.activation_bytes;
  const auto& e = *m_.moe;
  const double E = e.experts, fe = e.expert_ffn_hidden / static_cast<double>(etp_);  // this rank's slice
  // Megatron's router padding (training.moe.router_padding) under the alltoall dispatcher: each expert's count of
  // this rank's tokens rounded up to the quantized GEMMs' alignment, the padding rows sent, permuted and computed
  // like the others (training_config.h says where Megatron-Core does it). Balanced routing's counts.
  const bool router_pads = t_.moe.router_padding && !jax_ && fp8_class() && !t_.moe.hierarchical() && !drop_and_pad();
  const int align = t_.precision == sim::Dtype::fp8 ? 16 : 32;
  // Token dropping (training.moe.capacity_factor): padded, a rank sends exactly C rows to each expert; unpadded, the
  // balanced counts capped at C (a capacity factor under 1 drops tokens even when balanced).
  const double capacity_factor = t_.moe.capacity_factor;
  const double sent_tokens =
      drop_and_pad()          ? E * expert_capacity() / e.top_k
      : capacity_factor > 0   ? Tsp_ * std::min(1.0, expert_capacity() / mean_expert_count())
      : router_pads           ? Tsp_ + E * hw::expected_alignment_padding(Tsp_, e.top_k / E, align) / e.top_k
                              : Tsp_;
  const double load_x = busiest_expert_load();               // tokens at the busiest EP rank / the mean
  const double routed = sent_tokens * e.top_k;               // token copies this rank sends
  const double received = routed * load_x;                   // at the busiest rank
  const double local_experts = E / ep_;
  // Expert tensor parallelism over ranks that hold the same tokens: without sequence parallelism a tensor-parallel
  // group replicates the activations (JAX mode: MaxText shards its activations over 'tensor' in no token axis), and
  // its etp ranks, each with 1/etp of every expert's FFN (MaxText's w0/w1 on 'mlp', wo's input), route the same
  // tokens: nothing to gather before the experts; the down projection's partial sums are reduce-scattered over
  // etp on the hidden axis, the combine carries h/etp per token, and an all-gather restores the hidden
  // (RoutedMoE.sparse_matmul, layers/moe.py). With sequence parallelism (Megatron: required with tp) each etp rank
  // holds distinct tokens, gathered before the experts and scattered after them.
  const bool etp_replicated = etp_ > 1 && tp_ > 1 && Tsp_ == T_ && tp_ % etp_ == 0;
  const double etp_gathered = etp_replicated ? 1.0 : static_cast<double>(etp_);
  const double etp_gathered_out = etp_replicated ? static_cast<double>(etp_) : 1.0;  // the hidden's split after the experts
  const double expert_tokens = received * etp_gathered;      // after the etp all-gather
  const double per_expert = expert_tokens / local_experts;
  // Saved expert activations: a rank's mean load (see above), not the busiest rank's.
  const double saved_expert_bytes = routed * etp_gathered * h_ * a;
  // The token permutations: Megatron's alltoall dispatcher permutes the tokens a rank sends before
  // the exchange and restores them after the combine (its own tokens: balanced); DeepEP's and HybridEP's
  // (`flex`, Megatron-Core's flex dispatcher) permute the tokens a rank received into expert order after
  // the dispatch and back before the combine (token_dispatcher.py, _DeepepManager.get_permuted/
  // restored_hidden_states_by_experts): the busiest rank's tokens.
  const bool flex = t_.moe.hierarchical();
  const double perm_scale = flex ? load_x : 1.0;
  const double permuted = routed * perm_scale;
  // Megatron's alltoall dispatcher over an EP group: its metadata exchanges (below, in the dispatch step).
  const bool a2a_metadata = !jax_ && !flex && ep_ > 1;
  // It receives a rank's tokens in (source rank, expert) chunks; with more than one local expert it regroups
  // them by expert after the exchange (and the etp gather) and back before the combine: sort_chunks_by_idxs
  // in token_dispatcher.py, a copy of every received token (the busiest rank's). DeepEP/HybridEP fold this
  // into their own permutation above; XLA's all-to-all is laid out by expert.
  const bool sorts_chunks = a2a_metadata && local_experts > 1;
  // DeepEP's and HybridEP's permutations between a rank's received rows, one per (token, GPU it reached), and its
  // expert rows, one per (token, local expert): each reads one side and writes the other (dispatch_postprocess,
  // combine_preprocess, and the same in the backward; HybridEP's permute.cu).
  const double flex_permute_bytes = (permuted + Tsp_ * gpus_reached_ * perm_scale) * h_ * a;
  const bool hybridep_sync = t_.moe.hybridep_combine_sync && t_.moe.dispatcher == MoeDispatcher::hybridep && !jax_ &&
                             !loose_ep_overlap() && ep_ > 1;
  const bool swiglu = m_.ffn == FfnKind::swiglu;
  const double mats = swiglu ? 2 : 1;
  // Under fp8-class training the tokens may be quantized before the dispatch (the expert GEMMs want them
  // in that format anyway), with the format's scales: fp8 one fp32 scale per 128 elements (DeepSeek-V3,
  // DeepEP; shared reference at_scale_measurements.md §4, §7c), mxfp8 one 8-bit scale per 32, nvfp4's
  // already in its bytes per element. Megatron-Core dispatches bf16 (training.moe.dispatch_fp8 says
  // why); XLA and DeepSeek's own FP8 dispatch cast first. DeepSeek's recipe (dispatch_fp8 in Megatron mode, through
  // DeepEP) also quantizes the activation gradient before the down projections, the combine's backward exchange
  // ("a similar strategy is applied to the activation gradient before MoE down-projections", arXiv 2412.19437 sec.
  // 3.3.2); the combine and the dispatch's backward stay bf16 ("for both the forward and backward combine
  // components, we retain them in BF16"). XLA's transposed exchanges carry the bf16 cotangents.
  const double scale_bytes = t_.precision == sim::Dtype::fp8 ? 4.0 / 128.0 : t_.precision == sim::Dtype::mxfp8 ? 1.0 / 32.0 : 0.0;
  const bool dispatch_fp8 = fp8_class() && t_.moe.dispatch_fp8.value_or(jax_);
  const double dispatch_bytes = dispatch_fp8 ? h_ * (pr_.matmul_input_bytes + scale_bytes) : h_ * a;
  const double grad_dispatch_bytes = dispatch_fp8 && !jax_ ? dispatch_bytes : h_ * a;
  // The shared experts: on this rank the 1/tp token slice at full width (a tp-split MLP on all tokens; its own TP
  // collectives are not modelled), or over tokens the tensor group replicates 1/tp of the width with an all-reduce
  // each way (MaxText shards their FFN on 'mlp'). Megatron-Core computes them first, before the router, on the normalized input
  // (MoELayer.forward: shared_experts_compute, then route), and autograd runs their backward after the router's
  // (lower sequence numbers last). XLA: after the combine, as the compiled steps showed (left as it was).
  const bool shared = e.shared_experts > 0;
  const double shared_w = e.shared_experts * static_cast<double>(e.expert_ffn_hidden) / (etp_replicated ? tp_ : 1);
  const auto shared_forward = [=, this] {
    mark_module(Module::moe_router);  // (captured with the router)
    gemm_fwd("shared.gate_up", Tsp_, mats * shared_w, h_);
    vector("shared.act", (mats + 1) * Tsp_ * shared_w * a, 8 * Tsp_ * shared_w, Tsp_ * shared_w);
    gemm_fwd("shared.down", Tsp_, h_, shared_w);
    if (etp_replicated) tp_collective("shared.tp_all_reduce", CollectiveOp::all_reduce, Tsp_ * h_ * a, TpOverlap::none);
    mark_module(Module::moe_dispatch);
  };
  const auto shared_backward = [=, this] {
    mark_module(Module::moe_router);
    gemm_dgrad("shared.down", Tsp_, h_, shared_w);
    gemm_wgrad("shared.down", Tsp_, h_, shared_w);
    vector("shared.act.bwd", (2 * mats + 1) * Tsp_ * shared_w * a, 12 * Tsp_ * shared_w, Tsp_ * shared_w);
    gemm_dgrad("shared.gate_up", Tsp_, mats * shared_w, h_);
    if (etp_replicated) tp_collective("shared.bwd.tp_all_reduce", CollectiveOp::all_reduce, Tsp_ * h_ * a, TpOverlap::none);
    gemm_wgrad("shared.gate_up", Tsp_, mats * shared_w, h_);
    mark_module(Module::moe_dispatch);
  };
  const bool shared_first = shared && !jax_;
  steps.push_back({"router", Tsp_ * E * 4,
                   [=, this] {
                     if (shared_first) shared_forward();
                     mark_module(Module::moe_router);
                     gemm("router", Tsp_, E, h_);
                     vector("router.topk", Tsp_ * E * 4 * 2, 10 * Tsp_ * E, Tsp_ * E);
                     // Token dropping (apply_router_token_dropping): a top-C over each expert's column of the fp32
                     // probabilities, the capacity mask zeroed and scattered, the probabilities masked.
                     if (capacity_factor > 0 && !jax_) vector("router.token_drop", 4 * Tsp_ * E * 4, 10 * Tsp_ * E);
                   },
                   [=, this] {
                     if (capacity_factor > 0 && !jax_) vector("router.token_drop.bwd", 3 * Tsp_ * E * 4, Tsp_ * E);
                     vector("router.topk.bwd", Tsp_ * E * 4 * 2, 4 * Tsp_ * E);
                     gemm("router.dgrad", Tsp_, h_, E);
                     gemm("router.wgrad", h_, E, Tsp_, 1, 2 * h_ * E * pr_.grad_bytes);
                     if (shared_first) shared_backward();
                     mark_module(Module::moe_router);
                   }});
  steps.push_back({"dispatch", saved_expert_bytes,
                   [=, this] {
                     const OpId routing = last_compute();  // router.topk: the routing map
                     // The alltoall dispatcher's metadata: each rank's token count per expert, all-gathered
                     // over the EP group before the exchange (gather_from_sequence_parallel_region in
                     // MoEAlltoAllTokenDispatcher.preprocess, token_dispatcher.py ~550 at d98e8a6; int64 per
                     // expert; its tp part is not modelled); the host reads the split sizes off it.
                     // A plain NCCL call on the current stream (not the exchanges' stream): the permutation waits for it.
                     // (Under the looser DualPipe-like overlap it stays on the exchanges' stream, joined after the pair.)
                     OpId counts = routing;
                     // (Padded to capacity the counts are known before routing: no gather, no host wait.)
                     if (a2a_metadata && !drop_and_pad())
                       counts = loose_ep_overlap()
                                    ? ep_stream_collective("dispatch.counts_all_gather", CollectiveOp::all_gather, CommGroup::ep, ep_ * E * 8.0)
                                    : inline_collective("dispatch.counts_all_gather", CollectiveOp::all_gather, CommGroup::ep, ep_ * E * 8.0);
                     // The alltoall dispatcher permutes before the exchange (its preprocess); DeepEP and HybridEP
                     // after it, into expert order (dispatch_postprocess: get_permuted_hidden_states_by_experts).
                     // With token dropping (unpadded) or the router's padding the permutation's output size varies,
                     // so the host waits for the counts before the permutation instead (preprocess:
                     // before_permutation_1); padded to capacity it does not wait at all (no_sync).
                     const bool waits = !jax_ && !loose_ep_overlap();
                     const bool counts_wait = waits && !flex && !drop_and_pad();
                     const bool waits_early = capacity_factor > 0 || router_pads;
                     if (counts_wait && waits_early) pending_host_wait_ = counts;
                     if (!flex) vector("dispatch.permute", 2 * permuted * h_ * a, 0);
                     // Megatron-Core's token dispatchers read the token counts on the host (shared
                     // reference: megatron/core/transformer/moe/token_dispatcher.py): the all-to-all
                     // dispatcher copies them off the routing map and waits for that copy before the EP
                     // all-to-all (or, with no EP/TP exchange, before the experts); DeepEP and HybridEP
                     // wait inside their dispatch, and DeepEP again after it (both below). XLA's static
                     // shapes need no such wait. Under EP overlap Megatron-Core's
                     // combined 1F1B schedule has issued the paired micro-batch's work before it waits
                     // (close_pair's order); the looser DualPipe-like overlap places no wait.
                     if (counts_wait && !waits_early) pending_host_wait_ = counts;
                     // DeepEP's and HybridEP's dispatch first exchange routing metadata and the host waits for it,
                     // inside the dispatch call, to size the receive buffers before it launches the exchange:
                     // DeepEP's notify_dispatch, every rank's int32 token counts per expert (deepseek-ai/DeepEP
                     // Buffer.dispatch without a cached layout); HybridEP's preprocessing, an all-gather of the
                     // ranks' boolean routing maps, a byte per token and expert (deepseek-ai/DeepEP hybrid_ep_buffer.py;
                     // Megatron-LM@d98e8a64 token_dispatcher.py _HybridEPManager: "HybridEP sizes buffers
                     // dynamically (CPU sync in dispatch)").
                     const bool hybridep = t_.moe.dispatcher == MoeDispatcher::hybridep;
                     // (Padded to capacity Megatron-Core passes HybridEP the permuted size, num_permuted_tokens, so its
                     // host does not wait for the preprocessing: _HybridEPManager.setup_metadata at d98e8a64.)
                     const bool padded_hybridep = hybridep && drop_and_pad();
                     if (flex && ep_ > 1 && (waits || padded_hybridep)) {
                       const OpId notify = ep_stream_collective("dispatch.notify", CollectiveOp::all_gather, CommGroup::ep,
                                                                hybridep ? ep_ * Tsp_ * E : ep_ * E * 4.0);
                       if (waits && !padded_hybridep) pending_host_wait_ = notify;
                     }
                     expert_exchange("dispatch.all_to_all", sent_tokens, dispatch_bytes);
                     // HybridEP of Oct-Nov 2025 (training.moe.hybridep_dispatch_sync) then reads the tokens per local
                     // expert on the host to size its permutation's output: the host waits for the dispatch kernel
                     // (its permute_processing kernel behind it, not emitted, is tiny).
                     if (waits && !padded_hybridep && hybridep && t_.moe.hybridep_dispatch_sync && ep_ > 1) pending_host_wait_ = last();
                     // ... and the routing probabilities in an all-to-all of their own (token_dispatch:
                     // global_probs = all_to_all(...)); DeepEP and HybridEP carry them in their dispatch.
                     if (a2a_metadata) expert_exchange("dispatch.probs_all_to_all", sent_tokens, a);
                     // DeepEP's receive counts come back as a host list (fused_a2a.py: tokens_per_expert =
                     // torch.tensor(num_recv_tokens_per_expert_list)), but its routing map is rebuilt from the received
                     // indices on the GPU (_DeepepManager._indices_to_multihot, unless the experimental fused path;
                     // Megatron-LM@d98e8a64 token_dispatcher.py:1337-1365): zeroed multihot maps, then boolean
                     // indexing (indices[mask], probs[mask]) and repeat_interleave, whose output sizes the host reads
                     // back: a synchronization of the current stream, the compute stream. So the host waits for the
                     // exchange (the stream waits for it first) and for every kernel issued on the compute stream before
                     // it: under EP overlap the paired micro-batch's expert backward and weight gradients (Megatron-Core
                     // issues them before this node), after which the stream is empty and the rest of the layer runs at
                     // the host's pace. HybridEP permutes inside its dispatch and, from 83e0d15, has its counts from
                     // the preprocessing: no second wait (before it, the wait above).
                     if (waits && t_.moe.dispatcher == MoeDispatcher::deepep && ep_ > 1) {
                       // Each received row (at most one per token copy) zeroes its int64 and fp32 multihot entries for
                       // the local experts and reads and scatters its top-k indices and probabilities.
                       vector("dispatch.indices_to_multihot", permuted * 12.0 * (local_experts + e.top_k), 0);
                       pending_host_wait_ = last();
                     }
                     if (!etp_replicated) etp_collective("dispatch.etp_all_gather", CollectiveOp::all_gather, expert_tokens * h_ * a);
                     if (flex) vector("dispatch.permute", flex_permute_bytes, 0);
                     if (sorts_chunks) vector("dispatch.sort_chunks", 2 * expert_tokens * dispatch_bytes, 0);
                   },
                   [=, this] {
                     // HybridEP's combine_with_unpermute (the dispatch's backward) first synchronizes its stream
                     // (training.moe.hybridep_combine_sync): the host waits for the gradient it unpermutes, and without
                     // EP overlap (the compute stream current) for everything issued before it.
                     if (hybridep_sync) pending_host_wait_ = megatron_ep_overlap() ? expert_dgrad_ : last();
                     if (flex) vector("dispatch.unpermute.bwd", flex_permute_bytes, permuted * h_);
                     if (sorts_chunks) vector("dispatch.sort_chunks.bwd", 2 * expert_tokens * h_ * a, 0);
                     // The gate/up dgrad's partial sums over the etp ranks' FFN slices, reduced to the token owners;
                     // tokens replicated, after the exchange (below).
                     if (!etp_replicated)
                       etp_collective("dispatch.bwd.etp_reduce_scatter", CollectiveOp::reduce_scatter, expert_tokens * h_ * a);
                     if (a2a_metadata) expert_exchange("dispatch.bwd.probs_all_to_all", sent_tokens, a);  // the probs' gradient
                     expert_exchange("dispatch.bwd.all_to_all", sent_tokens, h_ * a);
                     if (!flex) vector("dispatch.unpermute.bwd", 2 * permuted * h_ * a, permuted * h_);
                     // Tokens replicated over the tensor group: the input's gradient (the k copies summed by the
                     // unpermutation) is the sum of the ranks' FFN slices, psummed over tp as JAX transposes a
                     // shard_map input the tensor axis does not shard (MaxText's sparse_matmul).
                     if (etp_replicated) etp_collective("dispatch.bwd.etp_all_reduce", CollectiveOp::all_reduce, Tsp_ * h_ * a);
                   }});
  // Under fp8-class training Megatron-Core's TEGroupedMLP pads each expert's token chunk to the recipe's
  // alignment before the grouped GEMMs and strips it from their output (Fp8Padding / Fp8Unpadding,
  // experts.py:890-1043 at d98e8a6; TE fused_multi_row_padding: a copy of every token, skipped only when
  // every split is already aligned, which routed counts are not), and the backward runs both the other
  // way. HybridEP pads inside its dispatch (moe_utils.py skip_routed_expert_padding), and DeepEP's fused
  // permutation pads to the alignment itself (permute(..., align_size): fused_permute_and_pad_with_probs),
  // after which every split is aligned and Fp8Padding copies nothing. XLA: static shapes.
  // With the router's padding (training.moe.router_padding) every split is aligned already.
  // Padded to capacity, every split is C x ep x etp rows: Fp8Padding copies nothing when that is aligned (TE
  // fp8_padding.py returns early when every split already is).
  const bool splits_aligned =
      drop_and_pad() && std::fmod(expert_capacity() * ep_ * etp_, static_cast<double>(align)) == 0;
  const bool pads = !jax_ && fp8_class() && !t_.moe.router_padding && !splits_aligned &&
                    (t_.moe.dispatcher == MoeDispatcher::all_to_all || (t_.moe.dispatcher == MoeDispatcher::deepep && !t_.moe.permute_fusion));
  const double pad_copy_bytes = 2 * expert_tokens * h_ * a;  // read and write the busiest rank's tokens
  // Experts as grouped GEMMs: local_experts GEMMs of per_expert tokens each.
  // Each grouped GEMM op also carries Transformer Engine's host time for its local experts' GEMMs.
  const double grouped_host = grouped_gemm_host_s(local_experts);
  const auto grouped_gemm = [this, grouped_host](std::string_view name, double m, double n, double k, double batch,
                                                 double extra_bytes, Quant quant) {
    const OpId id = gemm(name, m, n, k, batch, extra_bytes, quant);
    g_.ops[id].host_s += grouped_host;
    if (name.ends_with(".wgrad")) mark_wgrad(id, name, m * n * batch);
  };
  // What the experts keep for their backward (Megatron-Core's TEGroupedMLP, experts.py at d98e8a64), at the
  // rank's mean load as above: fc1's input is the dispatch step's; expert_out is fc1's output, which the
  // activation saves (the routing probabilities are applied there, so the unpermutation needs no expert output),
  // with the shared experts' fc1 output and activation (their input is the layer's normalized input); expert_act
  // is the routed experts' activation output, fc2's saved input, so that a policy without it recomputes the
  // activation as Megatron's --recompute-modules moe_act does (experts.py: the activation in
  // CheckpointWithoutOutput, its output discarded after fc2 and recomputed before fc2's backward). MaxText's
  // policies name the experts' gate, up and down outputs instead (mlpwi_0, mlpwi_1, mlpwo: layers/moe.py): in
  // JAX mode expert_out is those three.
  const double routed_rows = routed * etp_gathered, shared_rows = shared ? Tsp_ * shared_w / fe : 0.0;
  const double expert_saved_bytes = jax_ ? routed_rows * (mats * fe + h_ / etp_gathered_out) * a
                                         : (routed_rows * mats + shared_rows * (mats + 1)) * fe * a;
  const double act_saved_bytes = routed_rows * fe * a;
  // The activation's output, listed before the experts' step so that it dies with their backward (fc2's, which
  // reads it; its own backward is empty); recomputed alone (one more activation kernel before the backward) when
  // the policy keeps expert_out but not expert_act. Its forward is the experts' step's.
  const bool act_alone = moe_act_recomputed(l);
  steps.push_back({"expert_act", act_saved_bytes,
                   [=, this] {
                     // (JAX mode: XLA's recompute at the head of the layer's backward; Megatron's in the experts' backward.)
                     if (phase_ == Phase::recompute && act_alone && jax_)
                       vector("experts.act.recompute", (mats + 1) * expert_tokens * fe * a, 8 * expert_tokens * fe,
                              expert_tokens * fe);
                   },
                   [] {}});
  steps.push_back({"expert_out", expert_saved_bytes,
                   [=, this] {
                     if (pads) vector("experts.fp8_pad", pad_copy_bytes, 0);
                     grouped_gemm("experts.gate_up", per_expert, mats * fe, h_, local_experts, 0, Quant::forward);
                     vector("experts.act", (mats + 1) * expert_tokens * fe * a, 8 * expert_tokens * fe, expert_tokens * fe);
                     grouped_gemm("experts.down", per_expert, h_, fe, local_experts, 0, Quant::forward);
                     if (pads) vector("experts.fp8_unpad", pad_copy_bytes, 0);
                   },
                   [=, this] {
                     // Megatron's offload groups here (fine-grained activation offloading): moe_act, the
                     // activation's input (expert_out), waited for before the experts' backward and ended by the
                     // activation's; expert_fc1, fc1's input (dispatch), reloaded behind it and waited for before
                     // fc1's backward, which ends it (its dgrad; the wgrad too unless delayed under EP overlap).
                     offload_wait("expert_out");
                     // Megatron's moe_act recompute (CheckpointWithoutOutput): the activation's output, discarded after
                     // fc2's forward, is recomputed when fc2's output gradient arrives, inside the experts' backward
                     // (experts.py: discard_output_and_register_recompute), not at the head of the layer's backward.
                     if (!jax_ && act_alone) {
                       const Phase outer = std::exchange(phase_, Phase::recompute);
                       vector("experts.act.recompute", (mats + 1) * expert_tokens * fe * a, 8 * expert_tokens * fe,
                              expert_tokens * fe);
                       const TensorId t = temp("expert_act.recomputed", act_saved_bytes);
                       g_.ops[last()].allocs.push_back(t);
                       if (bwd_by_step_) bwd_by_step_->set("expert_act", t);
                       phase_ = outer;
                     }
                     if (pads) vector("experts.fp8_unpad.bwd", pad_copy_bytes, 0);
                     grouped_gemm("experts.down.dgrad", per_expert, fe, h_, local_experts, 0, Quant::backward);
                     grouped_gemm("experts.down.wgrad", fe, h_, per_expert, local_experts,
                                  wgrad_output_bytes(fe * h_ * local_experts), wgrad_quant());
                     vector("experts.act.bwd", (2 * mats + 1) * expert_tokens * fe * a, 12 * expert_tokens * fe, expert_tokens * fe);
                     offload_done("expert_out");
                     offload_wait("dispatch");
                     grouped_gemm("experts.gate_up.dgrad", per_expert, h_, mats * fe, local_experts, 0, Quant::backward);
                     expert_dgrad_ = last();
                     if (megatron_ep_overlap()) offload_done("dispatch");
                     grouped_gemm("experts.gate_up.wgrad", h_, mats * fe, per_expert, local_experts,
                                  wgrad_output_bytes(h_ * mats * fe * local_experts), wgrad_quant());
                     if (!megatron_ep_overlap()) offload_done("dispatch");
                     if (pads) vector("experts.fp8_pad.bwd", pad_copy_bytes, 0);
                   }});
  steps.back().mask_bytes = residual_mask_bytes();  // the MLP residual's dropout mask (see add_mlp_steps)
  const double combine_out = Tsp_ * h_ * a;
  steps.push_back({"mlp_out", combine_out,
                   [=, this] {
                     // Unpermuted after the exchange by the alltoall dispatcher, before it by DeepEP and HybridEP
                     // (combine_preprocess: get_restored_hidden_states_by_experts), which sum a token's local-expert
                     // rows into one row per (token, GPU it reached) to send back: read the expert rows, write one row
                     // per GPU a token reaches (each GPU receives its share of them). Before it,
                     // HybridEP's combine may synchronize its stream (training.moe.hybridep_combine_sync): the host
                     // waits for the experts' output.
                     if (hybridep_sync) pending_host_wait_ = last();
                     if (flex) vector("combine.unpermute", flex_permute_bytes, permuted * h_);
                     if (sorts_chunks) vector("combine.sort_chunks", 2 * expert_tokens * h_ * a, 0);
                     etp_collective("combine.etp_reduce_scatter", CollectiveOp::reduce_scatter, expert_tokens * h_ * a);
                     expert_exchange("combine.all_to_all", sent_tokens, h_ * a / etp_gathered_out);
                     if (!flex)
                       vector("combine.unpermute", (routed + Tsp_) * perm_scale * h_ * a / etp_gathered_out,
                              permuted * h_ / etp_gathered_out);
                     // (Replicated: the hidden gathered back once the k copies are summed.)
                     if (etp_replicated) etp_collective("combine.etp_all_gather", CollectiveOp::all_gather, Tsp_ * h_ * a);
                     if (shared && !shared_first) shared_forward();
                     // The residual add is the transformer layer's, outside the MoE layer's checkpoint:
                     // recomputed only under full recompute.
                     if (phase_ != Phase::recompute || t_.recompute.mode == RecomputeMode::full) residual("mlp_out.residual");
                   },
                   [=, this] {
                     residual_dropout_bwd("mlp_out.dropout.bwd");
                     vector("mlp_out.residual.bwd", 3 * Tsp_ * h_ * a, Tsp_ * h_);
                     if (shared && !shared_first) shared_backward();
                     // (Replicated: the output's gradient arrives whole on every rank and is sliced on the hidden axis,
                     // no exchange.)
                     if (!flex) vector("combine.bwd", 2 * permuted * h_ * a / etp_gathered_out, permuted * h_ / etp_gathered_out);
                     expert_exchange("combine.bwd.all_to_all", sent_tokens, grad_dispatch_bytes / etp_gathered_out);
                     etp_collective("combine.bwd.etp_all_gather", CollectiveOp::all_gather, expert_tokens * h_ * a);
                     if (flex) vector("combine.bwd", flex_permute_bytes, permuted * h_);
                     if (sorts_chunks) vector("combine.sort_chunks.bwd", 2 * expert_tokens * h_ * a, 0);
                   }});
}

}  // namespace racksim::workloads::training_graph
