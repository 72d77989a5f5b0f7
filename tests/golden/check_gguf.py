#!/usr/bin/env python3
"""Check a GGUF file written by llama.cpp's convert_hf_to_gguf.py from a SlideFormer checkpoint.

Usage:  python3 tests/golden/check_gguf.py MODEL_DIR MODEL.gguf LLAMA_CPP_DIR

Reads MODEL.gguf with llama.cpp's own reader (LLAMA_CPP_DIR/gguf-py) and compares it with MODEL_DIR's
config.json and safetensors: the architecture, the number of tensors (every weight converted), the vocabulary
(the tokenizer's ids, padded to vocab_size) and, value for value, the tensors the converter copies unchanged
(token embedding, a layer's down projection and norms; q/k are permuted for Llama and are not compared).
Exit status: 0 when all agree, 1 otherwise.
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file


def checkpoint_tensors(model_dir):
    out = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            out.update(load_file(os.path.join(model_dir, name)))
    return out


def main():
    model_dir, gguf_path, llama_cpp = sys.argv[1:4]
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    import gguf

    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    ours = checkpoint_tensors(model_dir)
    reader = gguf.GGUFReader(gguf_path)
    theirs = {t.name: t for t in reader.tensors}
    problems = []

    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    want_arch = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
                 "Qwen3ForCausalLM": "qwen3"}[cfg["architectures"][0]]
    if arch != want_arch:
        problems.append(f"architecture {arch}, expected {want_arch}")
    if len(theirs) != len(ours):
        problems.append(f"{len(theirs)} tensors in the GGUF, {len(ours)} in the checkpoint")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is None or len(tokens.data) != cfg["vocab_size"]:
        problems.append(f"vocabulary of {None if tokens is None else len(tokens.data)} tokens, "
                        f"expected {cfg['vocab_size']}")

    pairs = [("token_embd.weight", "model.embed_tokens.weight"),
             ("output_norm.weight", "model.norm.weight"),
             ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
             ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
             (f"blk.{cfg['num_hidden_layers'] - 1}.ffn_up.weight",
              f"model.layers.{cfg['num_hidden_layers'] - 1}.mlp.up_proj.weight")]
    if not cfg.get("tie_word_embeddings", False):
        pairs.append(("output.weight", "lm_head.weight"))
    for g, h in pairs:
        if g not in theirs or h not in ours:
            problems.append(f"{g} / {h} missing")
            continue
        a = np.asarray(theirs[g].data, dtype=np.float32).reshape(-1)
        b = ours[h].float().numpy().reshape(-1)
        if a.shape != b.shape or not np.array_equal(a, b):
            diff = np.abs(a - b).max() if a.shape == b.shape else "shape"
            problems.append(f"{g} differs from {h} (max |diff| {diff})")
    name = os.path.basename(model_dir.rstrip("/"))
    if problems:
        print(f"{name}: FAILED: " + "; ".join(problems))
        sys.exit(1)
    print(f"{name}: {arch}, {len(theirs)} tensors, {len(tokens.data)} tokens, {len(pairs)} tensors equal value for "
          f"value")


if __name__ == "__main__":
    main()
