#!/usr/bin/env python3
"""Multi-latent attention's core (query/key head dim 192, value head dim 128) against standard heads, per FLOP.

Why (issue #12): racksim times a flash-attention kernel by its FLOPs, (d_qk + d_v) per score element, and its key
length, on a curve fitted on head dim 128 (calibration/data/h200-2026-12-04-attention-train). DeepSeek-V3's rows run
MLA's core attention with d_qk = 192 (128 + 64 rotary) and d_v = 128, 128 heads per rank at TP1, 4,096 tokens. Does a
fused kernel run those at the head-dim-128 rate per FLOP?

Per (d_qk, d_v) and per SDPA backend (cuDNN, flash, memory-efficient; a backend that refuses a shape is recorded
as such), as a training step runs it: forward alone back to back for --seconds / 2, then forward + backward back to
back for --seconds (CUDA events per call, median of the second half). Writes JSON lines.

Usage: python3 attention_mla.py --out OUT.jsonl [--seconds 4]
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention_gqa import back_to_back

B, H, S = 1, 128, 4096  # one DeepSeek-V3 rank at TP1, sequence 4,096
DIMS = [(128, 128), (192, 128), (192, 192)]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    dev = torch.device("cuda")
    with open(args.out, "w") as f:
        f.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "cudnn": torch.backends.cudnn.version(), "B": B, "H": H, "S": S}) + "\n")
        for backend_name, backend in BACKENDS.items():
            for d_qk, d_v in DIMS:
                row = {"backend": backend_name, "d_qk": d_qk, "d_v": d_v}
                f_flops = 2.0 * B * H * S * S * (d_qk + d_v) * 0.5  # causal, racksim's count
                q, k = (torch.randn(B, H, S, d_qk, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
                v = torch.randn(B, H, S, d_v, device=dev, dtype=torch.bfloat16, requires_grad=True)
                g = torch.randn(B, H, S, d_v, device=dev, dtype=torch.bfloat16)

                def fwd():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

                def fwd_bwd():
                    torch.autograd.grad(fwd(), (q, k, v), g)

                try:
                    fwd_bwd()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 (a backend that refuses the shape)
                    row["refused"] = str(e).splitlines()[0][:300]
                else:
                    t_f = back_to_back(fwd, args.seconds / 2)
                    t_fb = back_to_back(fwd_bwd, args.seconds)
                    row.update({"forward_s": t_f, "forward_backward_s": t_fb,
                                "forward_tflops": f_flops / t_f / 1e12,
                                "backward_tflops": 2.5 * f_flops / (t_fb - t_f) / 1e12,
                                "forward_backward_tflops": 3.5 * f_flops / t_fb / 1e12})
                del q, k, v, g
                torch.cuda.empty_cache()
                f.write(json.dumps(row) + "\n")
                f.flush()
                print(json.dumps({k_: (round(x, 4) if isinstance(x, float) else x) for k_, x in row.items()}), flush=True)


if __name__ == "__main__":
    main()
