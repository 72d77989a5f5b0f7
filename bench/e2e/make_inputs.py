"""Inputs of bench/e2e/run.sh, made on the GPU machine (transformers is installed there):
a random-init Llama-3.1-8B-shaped checkpoint (bf16, built on the GPU, saved with save_pretrained)
and pre-tokenised random ids.

usage: make_inputs.py MODEL_DIR DATA_FILE [LAYERS]   (LAYERS: 32 = the full 8B shape)
"""
import json
import random
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    model_dir, data_file = sys.argv[1], sys.argv[2]
    layers = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    t = time.time()
    cfg = LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, hidden_act="silu",
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=128000, eos_token_id=128001, torch_dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(model_dir, safe_serialization=True, max_shard_size="5GB")
    n = sum(p.numel() for p in model.parameters())
    print(f"model: {n / 1e9:.3f} B parameters, {layers} layers, saved in {time.time() - t:.1f} s",
          flush=True)
    del model
    torch.cuda.empty_cache()
    # 640 samples of 8192 random ids: enough for every configuration's steps (cut by cutoff-len).
    rng = random.Random(0)
    with open(data_file, "w") as f:
        for _ in range(640):
            f.write(json.dumps({"input_ids": [rng.randrange(128256) for _ in range(8192)]}) + "\n")


if __name__ == "__main__":
    main()
