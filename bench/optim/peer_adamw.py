"""torch.optim.AdamW on the CPU, the peer of bench_adamw: same N, fp32, median of 5 steps."""
import sys, time
import torch

n = int(float(sys.argv[1]) * 1e6) if len(sys.argv) > 1 else 64_000_000
threads = int(sys.argv[2]) if len(sys.argv) > 2 else torch.get_num_threads()
torch.set_num_threads(threads)
for mode in ("foreach", "fused"):
    p = torch.nn.Parameter(torch.full((n,), 0.01))
    p.grad = torch.full((n,), 0.001)
    opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, **{mode: True})
    ts = []
    for _ in range(6):
        t0 = time.perf_counter()
        opt.step()
        ts.append(time.perf_counter() - t0)
    s = sorted(ts[1:])[2]
    print(f"torch {torch.__version__} AdamW {mode} ({threads} threads): n={n}  {s:.3f} s  "
          f"{n / s / 1e9:.2f} G params/s  {28 * n / s / 1e9:.1f} GB/s")
