"""The control of bench/e2e/run.sh: the same model trained by PyTorch with everything on the GPU
(bf16 weights, gradients and AdamW states, torch.optim.AdamW fused; HF gradient checkpointing), on
random ids like ours. Prints tok/s (median of steps 2..), TFLOPS (6P + 6·L·H·S) and peak memory.

usage: torch_control.py MODEL_DIR SEQxBATCH [STEPS]
"""
import statistics
import sys
import time

import torch
from transformers import LlamaForCausalLM


def main():
    model_dir, cfg = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    S, B = (int(x) for x in cfg.split("x"))
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16).cuda()
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    P = sum(p.numel() for p in model.parameters())
    L, H = model.config.num_hidden_layers, model.config.hidden_size
    g = torch.Generator(device="cuda").manual_seed(0)
    times = []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        ids = torch.randint(0, model.config.vocab_size, (B, S), device="cuda", generator=g)
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    tok = B * S / statistics.median(times[1:] or times)
    free, total = torch.cuda.mem_get_info()
    print(f"torch control {cfg}: {tok:,.0f} tok/s, {tok * (6 * P + 6 * L * H * S) / 1e12:.0f} TFLOPS, "
          f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB, "
          f"device in use {(total - free) / 2**30:.1f} GiB, steps {[round(B * S / x) for x in times]}",
          flush=True)


if __name__ == "__main__":
    main()
