#!/usr/bin/env python3
"""Check that a checkpoint directory written by SlideFormer loads in Hugging Face transformers and gives our logits.

Usage:  python3 tests/golden/check_hf_load.py MODEL_DIR LOGITS.safetensors BATCH.json [--tol 1e-4]

MODEL_DIR          a directory with config.json + model.safetensors (or a sharded index) saved by our trainer
LOGITS.safetensors a file with a tensor "logits" [B,S,V] (any float dtype) computed by our program on the batch
BATCH.json         {"input_ids": [[...], ...], ...}  (the golden batch format; other keys are ignored)

Loads MODEL_DIR with AutoModelForCausalLM.from_pretrained(dtype=float32, attn_implementation="eager"), fails if any
weight is missing, unexpected or mis-shaped (HF would otherwise silently random-initialise it), runs the batch in eval
mode without labels and compares the logits.  Prints max abs diff and max rel diff, where
rel = max|ours - hf| / max|hf|  (normalised by the largest reference logit, robust to near-zero entries).
Exit status: 0 if rel <= tol, 1 if above, 2 on load problems.
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file


def load_model(model_dir):
    from transformers import AutoModelForCausalLM
    model, info = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                                       output_loading_info=True)
    problems = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if problems:
        raise RuntimeError(f"checkpoint in {model_dir} does not load cleanly: {problems}")
    return model.eval()


def hf_logits(model_dir, input_ids):
    model = load_model(model_dir)
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def compare_logits(ours, ref):
    ours = ours.float()
    ref = ref.float()
    if ours.shape != ref.shape:
        raise ValueError(f"logits shape mismatch: ours {tuple(ours.shape)} vs hf {tuple(ref.shape)}")
    abs_d = (ours - ref).abs().max().item()
    rel_d = abs_d / max(ref.abs().max().item(), 1e-30)
    return abs_d, rel_d


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("logits")
    ap.add_argument("batch")
    ap.add_argument("--tol", type=float, default=1e-4, help="max allowed relative difference (default 1e-4)")
    args = ap.parse_args()

    with open(args.batch) as f:
        batch = json.load(f)
    tensors = load_file(args.logits)
    if "logits" not in tensors:
        print(f"error: {args.logits} has no tensor 'logits' (has {sorted(tensors)})", file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(args.model_dir, "config.json")):
        print(f"error: {args.model_dir} is not a directory with a config.json", file=sys.stderr)
        return 2
    try:
        ref = hf_logits(args.model_dir, batch["input_ids"])
    except Exception as e:  # noqa: BLE001 - report any load failure as such
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        abs_d, rel_d = compare_logits(tensors["logits"], ref)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ok = rel_d <= args.tol
    print(f"logits {tuple(ref.shape)}: max abs diff {abs_d:.3e}, max rel diff {rel_d:.3e} "
          f"(max |hf| {ref.abs().max().item():.4g}, tol {args.tol:g}) -> {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
