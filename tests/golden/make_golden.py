#!/usr/bin/env python3
"""Generate SlideFormer's golden fixtures from Hugging Face transformers + torch.optim.AdamW.

Usage:  python3 tests/golden/make_golden.py [--out tests/golden/data] [--cases a,b,...]

For each tiny random-initialised model (CPU, fp32, eager attention, all dropouts 0) this writes DIR/<case>/:
  config.json, generation_config.json, model.safetensors   exactly as model.save_pretrained(dir, safe_serialization=True)
                                                           writes them (F32, INITIAL weights)
  batch.json           {"input_ids": [[..]], "labels": [[..]], "hparams": {...}}
  golden.safetensors   F32: logits [B,S,V], loss [1], grad.<name>, step_losses [3], grad_norms [3], param_after3.<name>
See tests/golden/README.md for the exact semantics.  Deterministic: fixed seeds, single thread, deterministic algorithms.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

sys.dont_write_bytecode = True  # importing check_hf_load must not leave __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_hf_load import compare_logits, hf_logits  # noqa: E402

STEPS = 3
LR = 1e-2
BETAS = (0.9, 0.95)
EPS = 1e-4  # see README: with 1e-8, fp32 rounding noise in near-zero gradients is amplified by Adam past 1e-4
WEIGHT_DECAY = 0.1
CLIP_FRACTION = 0.5  # max_grad_norm = CLIP_FRACTION * (first step's pre-clip norm), rounded to 4 significant digits

COMMON = dict(hidden_size=64, num_hidden_layers=2, initializer_range=0.1, attention_dropout=0.0,
              max_position_embeddings=128, attn_implementation="eager", use_cache=False)

CASES = [
    dict(name="llama3_rope", cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=1001, B=2, S=23,
         cfg=dict(vocab_size=293, intermediate_size=96, num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                  tie_word_embeddings=False,
                  # original_max_position_embeddings=32 with theta 1e4, head_dim 16 puts the 8 frequencies in all three
                  # llama3 regimes: i=0 (wavelen 6.3 < 32/4) unchanged, i=1 (wavelen 19.9) smoothed, i>=2 divided by 8.
                  rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=32))),
    dict(name="llama_tied", cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=1002, B=2, S=23,
         cfg=dict(vocab_size=311, intermediate_size=104, num_attention_heads=4, num_key_value_heads=4,
                  tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
                  rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    dict(name="mistral", cls=MistralForCausalLM, cfg_cls=MistralConfig, seed=1003, B=2, S=23,
         cfg=dict(vocab_size=277, intermediate_size=96, num_attention_heads=8, num_key_value_heads=2, head_dim=8,
                  sliding_window=None, tie_word_embeddings=False,
                  rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    dict(name="qwen2_bias", cls=Qwen2ForCausalLM, cfg_cls=Qwen2Config, seed=1004, B=2, S=23,
         cfg=dict(vocab_size=269, intermediate_size=120, num_attention_heads=4, num_key_value_heads=2,
                  use_sliding_window=False, tie_word_embeddings=False,
                  rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    dict(name="qwen3_qknorm", cls=Qwen3ForCausalLM, cfg_cls=Qwen3Config, seed=1005, B=2, S=23,
         cfg=dict(vocab_size=283, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  use_sliding_window=False, tie_word_embeddings=False,
                  rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    dict(name="llama_gqa1_long", cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=1006, B=2, S=37,
         cfg=dict(vocab_size=263, intermediate_size=100, num_attention_heads=4, num_key_value_heads=4,
                  rms_norm_eps=1e-5, tie_word_embeddings=False,
                  # pad_token_id makes HF build nn.Embedding(padding_idx=3): that row's gradient is ALWAYS zero
                  # (token 3 occurs in the batch on purpose), and the row is made nonzero below so it matters.
                  pad_token_id=3,
                  rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
]


def perturb(model, gen):
    """Norm weights (init 1) -> 1 + 0.1*randn, biases (init 0) -> 0.1*randn, padding_idx row (init 0) -> 0.1*randn."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # input_layernorm, post_attention_layernorm, model.norm, q_norm, k_norm
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        emb = model.get_input_embeddings()
        if emb.padding_idx is not None:
            emb.weight[emb.padding_idx].copy_(0.1 * torch.randn(emb.weight.shape[1], generator=gen))


def make_batch(case, gen):
    B, S, V = case["B"], case["S"], case["cfg"]["vocab_size"]
    ids = torch.randint(0, V, (B, S), generator=gen)
    pad = case["cfg"].get("pad_token_id")
    if pad is not None:  # make sure the padding_idx token occurs (as input and as a valid target)
        ids[0, 4] = pad
        ids[1, S // 3] = pad
    labels = ids.clone()
    # -100: a 3-token "prompt" at the start of row 0, a 2-token hole in the middle of row 0, one in the middle of
    # row 1 and the last position of row 1.
    for r, c in [(0, 0), (0, 1), (0, 2), (0, S // 2), (0, S // 2 + 1), (1, S // 2 - 3), (1, S - 1)]:
        labels[r, c] = -100
    # Two targets differ from the input stream, so a loss that reads input_ids instead of labels is caught.
    labels[0, S - 2] = (ids[0, S - 2] + 7) % V
    labels[1, 6] = (ids[1, 6] + 11) % V
    return ids, labels


def total_norm(grads):
    # same as torch.nn.utils.clip_grad._get_total_norm for norm_type 2: norm of per-tensor norms
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)


def build(case):
    cfg = case["cfg_cls"](**COMMON, **copy.deepcopy(case["cfg"]))
    torch.manual_seed(case["seed"])
    model = case["cls"](cfg).to(torch.float32)
    perturb(model, torch.Generator().manual_seed(case["seed"] + 1))
    return model


def run_case(case, out_dir):
    name = case["name"]
    case_dir = os.path.join(out_dir, name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)

    model = build(case)
    assert model.config._attn_implementation == "eager"
    assert all(p.dtype == torch.float32 for p in model.parameters())
    ids, labels = make_batch(case, torch.Generator().manual_seed(case["seed"] + 2))
    V = model.config.vocab_size

    # INITIAL weights, written by HF itself.
    model.save_pretrained(case_dir, safe_serialization=True)

    names = [n for n, _ in model.named_parameters()]  # tied: lm_head.weight is not listed (same Parameter)
    params = [p for _, p in model.named_parameters()]
    ckpt = load_file(os.path.join(case_dir, "model.safetensors"))
    assert set(ckpt) == set(names), (sorted(set(ckpt) ^ set(names)))
    assert all(t.dtype == torch.float32 for t in ckpt.values())

    model.train()
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, foreach=False)
    golden = {}
    step_losses, grad_norms = [], []
    max_grad_norm = None
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=labels)
        out.loss.backward()
        if step == 0:
            logits = out.logits.detach()
            # The loss must be plain mean CE over valid shifted targets (no num_items_in_batch passed).
            ref = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1),
                                                    ignore_index=-100, reduction="mean")
            assert torch.allclose(ref, out.loss.detach(), rtol=1e-6, atol=0), (ref, out.loss)
            golden["logits"] = logits.clone()
            golden["loss"] = out.loss.detach().reshape(1).clone()
            for n, p in zip(names, params):
                golden["grad." + n] = p.grad.detach().clone()
            g0 = total_norm([p.grad for p in params]).item()
            max_grad_norm = float(f"{CLIP_FRACTION * g0:.4g}")
        step_losses.append(out.loss.item())
        gn = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        grad_norms.append(gn.item())
        opt.step()
    opt.zero_grad(set_to_none=True)
    for n, p in zip(names, params):
        golden["param_after3." + n] = p.detach().clone()
    golden["step_losses"] = torch.tensor(step_losses, dtype=torch.float32)
    golden["grad_norms"] = torch.tensor(grad_norms, dtype=torch.float32)
    assert all(gn > max_grad_norm for gn in grad_norms[:1]), "clipping must bite at step 1"
    golden = {k: v.contiguous().to(torch.float32) for k, v in golden.items()}
    save_file(golden, os.path.join(case_dir, "golden.safetensors"), metadata={"format": "pt"})

    hparams = dict(lr=LR, beta1=BETAS[0], beta2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY,
                   max_grad_norm=max_grad_norm, steps=STEPS)
    with open(os.path.join(case_dir, "batch.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "labels": labels.tolist(), "hparams": hparams}, f)
        f.write("\n")

    # --- self-checks ------------------------------------------------------------------------------------------
    # 1. the saved directory reloads through from_pretrained and reproduces the golden logits.
    got = hf_logits(case_dir, ids)
    abs_d, rel_d = compare_logits(got, golden["logits"])
    assert rel_d < 1e-6, f"{name}: reload mismatch abs {abs_d} rel {rel_d}"
    # 2. llama3 scaling actually changes the model at these positions.
    if case["cfg"].get("rope_parameters", {}).get("rope_type") == "llama3":
        c2 = copy.deepcopy(case["cfg"])
        c2["rope_parameters"] = dict(rope_type="default", rope_theta=c2["rope_parameters"]["rope_theta"])
        plain = case["cls"](case["cfg_cls"](**COMMON, **c2)).to(torch.float32)
        plain.load_state_dict(ckpt, strict=True)
        plain.eval()
        with torch.no_grad():
            lp = plain(input_ids=ids).logits
        d = (lp - golden["logits"]).abs().max().item()
        scaled = model.model.rotary_emb.inv_freq
        unscaled = plain.model.rotary_emb.inv_freq
        print(f"  llama3 inv_freq  scaled={[f'{x:.4g}' for x in scaled.tolist()]}")
        print(f"  default inv_freq        {[f'{x:.4g}' for x in unscaled.tolist()]}")
        print(f"  max |logits(llama3) - logits(default rope)| = {d:.4g}")
        assert d > 1e-3, "llama3 rope scaling did not change the logits"
    # 3. padding_idx row really gets no gradient.
    emb = model.get_input_embeddings()
    if emb.padding_idx is not None:
        assert (ids == emb.padding_idx).any()
        assert golden["grad.model.embed_tokens.weight"][emb.padding_idx].abs().max().item() == 0.0
        assert golden["param_after3.model.embed_tokens.weight"][emb.padding_idx].abs().max().item() > 0.0

    n_valid = int((labels[:, 1:] != -100).sum())
    size = sum(os.path.getsize(os.path.join(case_dir, f)) for f in os.listdir(case_dir))
    nparam = sum(p.numel() for p in params)
    print(f"{name:16s} {type(model).__name__:18s} B={case['B']} S={case['S']} V={V} params={nparam} "
          f"valid_targets={n_valid} loss={golden['loss'].item():.6f} grad_norm0={grad_norms[0]:.6f} "
          f"max_grad_norm={max_grad_norm} step_losses={[round(x, 6) for x in step_losses]} "
          f"grad_norms={[round(x, 6) for x in grad_norms]} size={size / 1024:.0f} KiB")
    return size


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(here, "data"))
    ap.add_argument("--cases", default="", help="comma-separated subset of case names (default: all)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    transformers.logging.set_verbosity_error()
    print(f"torch {torch.__version__}  transformers {transformers.__version__}")

    wanted = set(filter(None, args.cases.split(",")))
    unknown = wanted - {c["name"] for c in CASES}
    if unknown:
        sys.exit(f"unknown case(s): {sorted(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for case in CASES:
        if not wanted or case["name"] in wanted:
            total += run_case(case, args.out)
    print(f"total fixture size: {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
