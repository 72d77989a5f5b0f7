#!/usr/bin/env python3
"""The current predictor against runs logged earlier: for every `CONFIG.plan.log` with its
`CONFIG.log` under the folders given (bench/e2e/run.sh writes both), rebuild the run's plan shape
(tokens, window, the GPU-resident units, the held share, clipping) and machine constants from the
plan log, ask build/replay_predict for the step, and print it beside the step the run measured
(the trainer's mean of steps 2..) and the prediction that run printed itself.

The logs give the constants with one or two decimals; the compute and AdamW rates are taken from
the plan's "per step" line instead (compute seconds and the AdamW's seconds), which carry three.
usage: python3 bench/e2e/replay_predictions.py [--bin build/replay_predict] DIR...
"""
import glob, json, os, re, subprocess, sys, tempfile

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
          "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
          "head_dim": 128, "vocab_size": 128256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
          "max_position_embeddings": 131072, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16", "hidden_act": "silu", "bos_token_id": 128000,
          "eos_token_id": 128001}


def layers_named(text):
    """How many decoder layers "layers 24-31" / "layer 0" names, and the first."""
    m = re.search(r"layers? (\d+)(?:-(\d+))?", text)
    if not m:
        return 0, None
    a = int(m.group(1))
    return int(m.group(2) or a) - a + 1, a


def probe_layer(plan_text):
    """The probe's layer in a plan log: (tokens a step, forward µs/token, recompute + backward
    µs/token), or None. Older logs print µs/token with one decimal: the plan's compute seconds
    (three decimals) less the fused head's FLOPs at the layer's rate give the layer's time exactly,
    split between forward and backward as printed."""
    t = re.search(r"steps of ≤ (\d+) tokens", plan_text)
    m = re.search(r"the layer ([0-9.]+) µs/token forward, ([0-9.]+) µs/token recompute \+ backward "
                  r"\(([0-9.]+) TFLOP/s", plan_text)
    c = re.search(r"per step: compute ([0-9.]+) s", plan_text)
    lm = re.search(r"(\d+) layers, hidden (\d+)", plan_text)
    if not (t and m and c and lm):
        return None
    T, layers, hidden = int(t.group(1)), int(lm.group(1)), int(lm.group(2))
    f, b, tflops = map(float, m.groups())
    head = 6 * T * hidden * CONFIG["vocab_size"] / (tflops * 1e12)
    per_token = (float(c.group(1)) - head) / (T * layers) * 1e6
    return T, per_token * f / (f + b), per_token * b / (f + b)


def replay(binary, model_dir, layers, plan_text, clip):
    T = int(re.search(r"steps of ≤ (\d+) tokens", plan_text).group(1))
    window = int(re.search(r"plan: window (\d+)", plan_text).group(1))
    mm = re.search(r"H2D ([0-9.]+) GB/s, D2H ([0-9.]+) GB/s.*?CPU AdamW ([0-9.]+) G params/s "
                   r"\(([0-9.]+) while copies run(?:, they then at [0-9.]+ GB/s both ways)?\); the layer "
                   r"([0-9.]+) µs/token forward, "
                   r"([0-9.]+) µs/token recompute \+ backward \(([0-9.]+) TFLOP/s", plan_text)
    h2d, d2h, fast, slow, f, b, tflops = map(float, mm.groups())
    c = re.search(r"compute ([0-9.]+) s, H2D .*?CPU AdamW ([0-9.]+) G params \(([0-9.]+) s\)",
                  plan_text)
    _, host_gparams, adam_s = map(float, c.groups())
    if adam_s > 0:
        slow = host_gparams / adam_s
    _, f, b = probe_layer(plan_text)
    dev = -1
    od = re.search(r"updated on the device \(([^)]*)\)", plan_text)
    if od:
        n, first = layers_named(od.group(1))
        if n == 0:
            dev = -2 if "head" in od.group(1) else -3  # the embedding and the head, or it alone
        elif "head" in od.group(1):
            dev = first + n
        else:  # layers with the embedding alone, the head on the host
            dev = -10 - (first + n)
    held = 0
    hm = re.search(r"held, updated in forward order behind the ring: (.*?\))", plan_text)
    if hm:
        held = layers_named(hm.group(1))[0] + ("head" in hm.group(1))
    args = [binary, model_dir] + [str(x) for x in (T, window, dev, held, int(clip), h2d, d2h, fast,
                                                   slow, f, b, tflops)]
    # The clipped update's passes (cache version 3 on), what the probe's copies moved beside the
    # AdamW (version 4 on: the host's ceiling) and the run's own split, from the bottom up.
    passes = re.search(r"the clipped update's passes alone: the master ([0-9.]+), m and v "
                       r"([0-9.]+) G params/s", plan_text)
    if passes:
        beside = re.search(r"they then at ([0-9.]+) GB/s both ways", plan_text)
        later = re.search(r"the Adam m and v of (.*?) \(\d+ parameters\) written after", plan_text)
        split = 0
        if later:
            split = layers_named(later.group(1))[0] + ("head" in later.group(1))
        args += [passes.group(1), passes.group(2), beside.group(1) if beside else "0", str(split)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return T, dev, held, float(re.search(r"predicted step ([0-9.]+) s", out).group(1))


def main():
    argv = sys.argv[1:]
    binary = "build/replay_predict"
    if argv[:1] == ["--bin"]:
        binary, argv = argv[1], argv[2:]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in argv:
            for plan in sorted(glob.glob(os.path.join(folder, "**", "*.plan.log"), recursive=True)):
                log = plan[: -len(".plan.log")] + ".log"
                if not os.path.exists(log):
                    continue
                plan_text, log_text = open(plan).read(), open(log).read()
                model = re.search(r"model \S+: (\d+) layers, hidden (\d+)", plan_text)
                timing = re.search(r"timing: ([0-9.]+) s a step on average", log_text)
                own = re.search(r"predicted ([0-9.]+) s for steps", log_text)
                if not model or not timing or "per step: compute" not in plan_text:
                    continue
                if int(model.group(2)) != CONFIG["hidden_size"]:
                    continue
                layers = int(model.group(1))
                model_dir = os.path.join(tmp, f"l{layers}")
                os.makedirs(model_dir, exist_ok=True)
                with open(os.path.join(model_dir, "config.json"), "w") as f:
                    json.dump(dict(CONFIG, num_hidden_layers=layers), f)
                clip = re.search(r"_clip([0-9.]+)\.plan\.log$", plan)
                clip = clip is not None and float(clip.group(1)) > 0
                T, dev, held, now = replay(binary, model_dir, layers, plan_text, clip)
                measured = float(timing.group(1))
                then = float(own.group(1)) if own else float("nan")
                rows.append((os.path.relpath(plan[: -len(".plan.log")]), T, dev, held, clip,
                             measured, then, now))
    print("run | tokens | GPU-resident (-1 none, -2 embedding+head, -3 embedding, k: -2 and "
          "layers 0..k-1, -10-k: -3 and layers 0..k-1) | held | clip | measured s | its own prediction (ratio) | now (ratio)")
    for name, T, dev, held, clip, measured, then, now in rows:
        print(f"{name} | {T} | {dev} | {held} | {int(clip)} | {measured:.3f} | "
              f"{then:.3f} ({measured / then:.3f}) | {now:.3f} ({measured / now:.3f})")


if __name__ == "__main__":
    main()
