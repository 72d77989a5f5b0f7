#!/usr/bin/env python3
"""Greedy decoding by Hugging Face transformers on the golden fixture models, for `slideformer generate`.

Usage:  python3 tests/golden/make_generate.py [--data tests/golden/data] [--out tests/golden/data/generate.json]

For each fixture model (tests/golden/data/<case>: config.json, generation_config.json, model.safetensors) and each of
two prompts this runs `model.generate(input_ids, do_sample=False, max_new_tokens=N)` (CPU, fp32, eager attention, KV
cache) and writes the new ids. With them, for every generated token, the fp32 logits' top-2 margin and largest
magnitude at the step that chose it (from one forward over the whole sequence): the CUDA test compares the bf16 ids
only up to the first step whose margin a bf16 error could overturn (tests/golden/test_generate_golden_cuda.cpp).

Checks, so that the fixture can be held exactly by an fp32 implementation: the ids equal those of a generate without
the cache and the argmax of the one-forward logits at every step, and every margin is at least 1e-4 of the logits'
magnitude (fp32 implementations differ by ~1e-6 of it). Deterministic: single thread, deterministic algorithms.
"""
import argparse
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM

CASES = ["llama3_rope", "llama_tied", "mistral", "qwen2_bias", "qwen3_qknorm", "llama_gqa1_long"]
MAX_NEW = 40
MIN_RELATIVE_MARGIN = 1e-4


def prompts(batch):
    """A 7-token prompt from the fixture's batch and a one-token one (the bos id)."""
    row = batch["input_ids"][0]
    return [row[:7], [1]]


def run_case(case_dir):
    model = AutoModelForCausalLM.from_pretrained(case_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with open(os.path.join(case_dir, "batch.json")) as f:
        batch = json.load(f)
    eos = model.generation_config.eos_token_id
    # padding only fills rows that ended; a model without an end-of-sequence id never ends
    pad = eos if isinstance(eos, int) else (eos[0] if eos else 0)
    out = []
    for prompt in prompts(batch):
        ids = torch.tensor([prompt])
        mask = torch.ones_like(ids)
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=MAX_NEW, use_cache=True,
                                 pad_token_id=pad)
            again = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=MAX_NEW,
                                   use_cache=False, pad_token_id=pad)
        assert torch.equal(gen, again), f"{case_dir}: generate with and without the KV cache differ"
        new = gen[0, len(prompt):].tolist()
        with torch.no_grad():
            logits = model(gen).logits[0].double()
        margins, magnitudes = [], []
        for k, tok in enumerate(new):
            row = logits[len(prompt) - 1 + k]
            top = torch.topk(row, 2)
            assert int(top.indices[0]) == tok, f"{case_dir}: step {k}: argmax {int(top.indices[0])} != {tok}"
            margin, mag = float(top.values[0] - top.values[1]), float(row.abs().max())
            assert margin >= MIN_RELATIVE_MARGIN * mag, \
                f"{case_dir}: prompt {prompt}, step {k}: top-2 margin {margin:.3g} is a near tie (max |logit| {mag:.3g})"
            margins.append(margin)
            magnitudes.append(mag)
        out.append(dict(prompt=prompt, max_new_tokens=MAX_NEW, new_ids=new,
                        margins=[float(f"{m:.6g}") for m in margins],
                        max_abs_logits=[float(f"{m:.6g}") for m in magnitudes]))
        rel = min(m / a for m, a in zip(margins, magnitudes))
        print(f"{os.path.basename(case_dir)}: prompt of {len(prompt)}: {len(new)} new ids, "
              f"smallest margin / max|logit| {rel:.3g}")
    return out


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "data"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    result = dict(transformers=transformers.__version__, torch=torch.__version__.split("+")[0],
                  cases={c: run_case(os.path.join(a.data, c)) for c in CASES})
    path = a.out or os.path.join(a.data, "generate.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
