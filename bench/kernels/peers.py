#!/usr/bin/env python3
"""Peers of bench_kernels (usage: peers.py [attention]), timed in the same run on the same GPU (torch, bf16, Llama-3.1-8B shapes):
torch SDPA (cuDNN and flash backends, enable_gqa=True, causal), eager RMSNorm / SwiGLU / RoPE as
transformers writes them, eager embedding forward and backward, the F32<->BF16 casts, and the
unfused head (bf16 logits -> fp32 -> F.cross_entropy). CUDA events, 3 warm-ups, median of 20 (5 for
the head). Liger-Kernel rows appear when its wheel is importable (carry it:
bench/kernels/run.sh installs .whl/liger_kernel-*.whl with pip --target when present).
"""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BW, MX = 4.1e12, 790e12


def time_ms(fn, warm=3, iters=20):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def report(name, shape, ms, nbytes=0.0, flops=0.0):
    floor = max(nbytes / BW, flops / MX) * 1e3
    rate = f"{flops / ms * 1e-9:9.1f} TFLOP/s" if flops else f"{nbytes / ms * 1e-6:9.1f} GB/s    "
    print(f"{name:40s} {shape:26s} {ms:9.3f} ms {rate}  floor {floor:8.3f} ms  {100 * floor / ms:5.1f}%", flush=True)


def rand(*shape, dtype=torch.bfloat16, grad=False):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 4 - 2).to(dtype).requires_grad_(grad)


def rmsnorm(x, w, eps=1e-5):  # transformers' LlamaRMSNorm
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def main():
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN {torch.backends.cudnn.version()}")
    T, C, I, V, NH, NKV, D = 16384, 4096, 14336, 128256, 32, 8, 128
    e2 = 2.0
    if sys.argv[1:] == ["attention"]:  # the attention rows only
        attention(NH, NKV, D)
        return

    x, w = rand(T, C, grad=True), rand(C, grad=True)
    g = rand(T, C)
    report("torch eager rmsnorm fwd", "16384x4096", time_ms(lambda: rmsnorm(x, w)), 2 * T * C * e2)
    def rms_fb():
        x.grad = w.grad = None
        rmsnorm(x, w).backward(g)
    report("torch eager rmsnorm fwd+bwd", "16384x4096", time_ms(rms_fb), 5 * T * C * e2)
    del x, w, g

    gt, up = rand(T, I, grad=True), rand(T, I, grad=True)
    d = rand(T, I)
    report("torch eager swiglu fwd", "16384x14336", time_ms(lambda: F.silu(gt) * up), 3 * T * I * e2)
    def sw_fb():
        gt.grad = up.grad = None
        (F.silu(gt) * up).backward(d)
    report("torch eager swiglu fwd+bwd", "16384x14336", time_ms(sw_fb), 8 * T * I * e2)
    del gt, up, d

    small_ops(T, C, V, NH, NKV, D, e2)
    attention(NH, NKV, D)

    xh, wh = rand(T, C, grad=True), rand(V, C, grad=True)
    with torch.no_grad():
        wh.mul_(0.02)
    tg = torch.randint(0, V, (T,), device="cuda")
    tg[::16] = -100
    def ce():
        xh.grad = wh.grad = None
        logits = (xh @ wh.t()).float()
        F.cross_entropy(logits, tg, ignore_index=-100).backward()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    tce = time_ms(ce, warm=1, iters=5)
    extra = (torch.cuda.max_memory_allocated() - base) / 2**30
    report(f"torch unfused linear+CE (+{extra:.1f} GiB)", "16384x4096 -> 128256", tce, flops=6.0 * T * C * V)
    del xh, wh, tg
    liger(T, C, I, V, e2)


def rotate_half(x):  # transformers' Llama RoPE
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def small_ops(T, C, V, NH, NKV, D, e2):
    """RoPE, embedding and casts in eager PyTorch, on bench_kernels' shapes, with its byte counts."""
    pos = torch.arange(T, device="cuda") % 2048
    inv = 500000.0 ** (-torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D)
    ang = pos[:, None].float() * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)  # LlamaRotaryEmbedding: cos/sin in the input's dtype
    cos, sin = emb.cos().to(torch.bfloat16)[:, None, :], emb.sin().to(torch.bfloat16)[:, None, :]
    for name, H in (("q", NH), ("k", NKV)):
        x = rand(T, H, D)
        report(f"torch eager rope fwd {name}", f"16384x{H}x128",
               time_ms(lambda: x * cos + rotate_half(x) * sin), 2.0 * T * H * D * e2)
        del x
    ids = torch.randint(0, V, (T,), device="cuda")
    table, dout = rand(V, C), rand(T, C)
    report("torch eager embedding fwd", "16384 of 128256x4096", time_ms(lambda: F.embedding(ids, table)),
           2.0 * T * C * e2)
    del table
    # what autograd runs for nn.Embedding's weight: a dense bf16 [V, C] gradient
    report("torch eager embedding bwd (dense bf16 grad)", "16384 into 128256x4096",
           time_ms(lambda: torch.ops.aten.embedding_dense_backward(dout, ids, V, -1, False)),
           T * C * (e2 + 8.0))
    # ours' semantics: accumulate into an existing F32 [V, C] gradient
    dtab = torch.zeros(V, C, device="cuda", dtype=torch.float32)
    report("torch eager embedding bwd (index_add_ F32)", "16384 into 128256x4096 F32",
           time_ms(lambda: dtab.index_add_(0, ids, dout.float())), T * C * (e2 + 8.0))
    del dtab, dout, ids
    P = 218112000  # parameters of one Llama-3.1-8B layer
    f = torch.rand(P, device="cuda")
    report("torch eager cast F32->BF16", "218M (one 8B layer)", time_ms(lambda: f.to(torch.bfloat16)), P * 6.0)
    h = f.to(torch.bfloat16)
    report("torch eager cast BF16->F32", "218M (one 8B layer)", time_ms(lambda: h.float()), P * 6.0)
    del f, h


def attention(NH, NKV, D):
    for B, S in ((8, 2048), (2, 8192)):
        q = rand(B, NH, S, D, grad=True)
        k, v = rand(B, NKV, S, D, grad=True), rand(B, NKV, S, D, grad=True)
        do = rand(B, NH, S, D)
        fwd = 4.0 * B * S * S * NH * D / 2
        for name, be in (("cuDNN", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                    tf = time_ms(f)
                    def fb():
                        q.grad = k.grad = v.grad = None
                        f().backward(do)
                    tfb = time_ms(fb)
                report(f"torch SDPA {name} fwd", f"{B}x{S} GQA 32/8 D128", tf, flops=fwd)
                report(f"torch SDPA {name} fwd+bwd", f"{B}x{S} GQA 32/8 D128", tfb, flops=3.5 * fwd)
            except RuntimeError as err:
                print(f"torch SDPA {name}: not available here ({str(err).splitlines()[0]})")
        # the layout transformers hands SDPA: q/k/v/dO are [B, S, H, D] tensors seen as [B, H, S, D]
        ql = rand(B, S, NH, D, grad=True)
        kl, vl = rand(B, S, NKV, D, grad=True), rand(B, S, NKV, D, grad=True)
        dol = rand(B, S, NH, D).transpose(1, 2)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            def fbl():
                ql.grad = kl.grad = vl.grad = None
                F.scaled_dot_product_attention(ql.transpose(1, 2), kl.transpose(1, 2), vl.transpose(1, 2),
                                               is_causal=True, enable_gqa=True).backward(dol)
            report("torch SDPA cuDNN [B,S,H,D] fwd+bwd", f"{B}x{S} GQA 32/8 D128", time_ms(fbl), flops=3.5 * fwd)
        del q, k, v, do, ql, kl, vl, dol


def liger(T, C, I, V, e2):
    """Liger-Kernel's fused kernels on the same shapes, when its wheel was carried along
    (pip install --target; the GPU machine reaches no registry)."""
    try:
        import liger_kernel
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss, LigerRMSNorm
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    except ImportError as err:
        print(f"Liger-Kernel: not importable here ({err}); its rows are not measured in this run")
        return
    ver = getattr(liger_kernel, "__version__", "0.8.5")
    x = rand(T, C, grad=True)
    norm = LigerRMSNorm(C, eps=1e-5).cuda().to(torch.bfloat16)
    g = rand(T, C)
    def rms_fb():
        x.grad = None
        norm.weight.grad = None
        norm(x).backward(g)
    report(f"liger {ver} rmsnorm fwd", "16384x4096", time_ms(lambda: norm(x)), 2 * T * C * e2)
    report(f"liger {ver} rmsnorm fwd+bwd", "16384x4096", time_ms(rms_fb), 5 * T * C * e2)
    del x, g, norm
    gt, up = rand(T, I, grad=True), rand(T, I, grad=True)
    d = rand(T, I)
    def sw_fb():
        gt.grad = up.grad = None
        LigerSiLUMulFunction.apply(gt, up).backward(d)
    report(f"liger {ver} swiglu fwd", "16384x14336",
           time_ms(lambda: LigerSiLUMulFunction.apply(gt, up)), 3 * T * I * e2)
    report(f"liger {ver} swiglu fwd+bwd", "16384x14336", time_ms(sw_fb), 8 * T * I * e2)
    del gt, up, d
    xh, wh = rand(T, C, grad=True), rand(V, C, grad=True)
    with torch.no_grad():
        wh.mul_(0.02)
    tg = torch.randint(0, V, (T,), device="cuda")
    tg[::16] = -100
    loss_fn = LigerFusedLinearCrossEntropyLoss(ignore_index=-100)
    def ce():
        xh.grad = wh.grad = None
        loss_fn(wh, xh, tg).backward()
    ce()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    tce = time_ms(ce, warm=1, iters=5)
    extra = (torch.cuda.max_memory_allocated() - base) / 2**30
    report(f"liger {ver} fused linear+CE (+{extra:.1f} GiB)", "16384x4096 -> 128256", tce,
           flops=6.0 * T * C * V)


if __name__ == "__main__":
    main()
