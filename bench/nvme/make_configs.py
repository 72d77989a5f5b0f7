"""Model directories (config.json alone) of the shapes `slideformer plan` plans past the GPU
machine, and pre-tokenised data whose ids every one of their vocabularies holds.

usage: make_configs.py OUT_DIR   (writes OUT_DIR/<name>/config.json and OUT_DIR/data.jsonl)
"""
import json
import os
import random
import sys

SHAPES = {
    # Mistral-Small-24B-Base-2501
    "mistral-24b": dict(arch="MistralForCausalLM", model_type="mistral", hidden=5120, layers=40,
                        inter=32768, heads=32, kv=8, head_dim=128, vocab=131072, theta=1e8),
    # Llama-3.1-70B
    "llama-70b": dict(arch="LlamaForCausalLM", model_type="llama", hidden=8192, layers=80,
                      inter=28672, heads=64, kv=8, head_dim=128, vocab=128256, theta=5e5),
    # Mistral-Large-Instruct-2407 (123B)
    "mistral-123b": dict(arch="MistralForCausalLM", model_type="mistral", hidden=12288, layers=88,
                         inter=28672, heads=96, kv=8, head_dim=128, vocab=32768, theta=1e6),
}


def main():
    out = sys.argv[1]
    for name, s in SHAPES.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        cfg = {"architectures": [s["arch"]], "model_type": s["model_type"],
               "hidden_size": s["hidden"], "num_hidden_layers": s["layers"],
               "intermediate_size": s["inter"], "num_attention_heads": s["heads"],
               "num_key_value_heads": s["kv"], "head_dim": s["head_dim"],
               "vocab_size": s["vocab"], "rope_theta": s["theta"], "rms_norm_eps": 1e-5,
               "max_position_embeddings": 32768, "hidden_act": "silu",
               "tie_word_embeddings": False, "torch_dtype": "bfloat16",
               "bos_token_id": 1, "eos_token_id": 2}
        with open(os.path.join(out, name, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
    rng = random.Random(0)
    with open(os.path.join(out, "data.jsonl"), "w") as f:
        for _ in range(64):
            f.write(json.dumps({"input_ids": [rng.randrange(32768) for _ in range(1024)]}) + "\n")


if __name__ == "__main__":
    main()
