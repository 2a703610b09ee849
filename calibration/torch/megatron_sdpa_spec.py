"""Megatron-Core's local GPT layer spec with its core attention replaced by PyTorch's fused
scaled_dot_product_attention (causal, Megatron's attention dropout), for `--spec megatron_sdpa_spec
layer_spec`: the flash-style attention that the Transformer Engine spec would use, where TE is absent.
Everything else (linears, LayerNorm, bias-GELU, bias-dropout-add) stays Megatron's local modules."""
import torch
import torch.nn.functional as F

from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.module import MegatronModule


class SdpaAttention(MegatronModule):
    """DotProductAttention's interface ([s, b, heads, head_dim] in, [s, b, hidden] out)."""

    def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None):
        super().__init__(config=config)
        self.dropout_p = config.attention_dropout if attention_dropout is None else attention_dropout

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, packed_seq_params=None):
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout_p if self.training else 0.0,
                                           is_causal=True)
        s, b = query.shape[0], query.shape[1]
        return o.permute(2, 0, 1, 3).reshape(s, b, -1)


layer_spec = get_gpt_layer_local_spec()
layer_spec.submodules.self_attention.submodules.core_attention = SdpaAttention
