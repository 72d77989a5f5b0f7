#!/usr/bin/env python3
"""torch SDPA (cuDNN backend) fwd+bwd on one shape, three times, untimed: what profile_attention.sh
runs under ncu next to `bench_attention --profile`. Only the three iterations lie between
cudaProfilerStart and Stop (profile_attention.sh runs ncu with --profile-from-start off), so the
kernels that make the inputs are not counted. Usage: torch_sdpa_once.py [NSEQ S]
(causal, GQA 32/8, head_dim 128, bf16, inputs uniform in [-2, 2) like peers.py)."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, S = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (2, 8192)
NH, NKV, D = 32, 8, 128


def rand(*shape):
    return (torch.rand(*shape, device="cuda") * 4 - 2).to(torch.bfloat16).requires_grad_(True)


q, k, v = rand(B, NH, S, D), rand(B, NKV, S, D), rand(B, NKV, S, D)
do = (torch.rand(B, NH, S, D, device="cuda") * 4 - 2).to(torch.bfloat16)
torch.cuda.synchronize()
torch.cuda.profiler.start()
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        q.grad = k.grad = v.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(do)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print(f"profiled: torch SDPA cuDNN fwd+bwd {B}x{S} x3 (cuDNN {torch.backends.cudnn.version()})")
