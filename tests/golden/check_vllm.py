#!/usr/bin/env python3
"""Compare vLLM's greedy generation from a SlideFormer checkpoint with transformers'.

Usage:  PY_HF   check_vllm.py hf      MODEL_DIR HF.json              (needs torch, transformers)
        PY_VLLM check_vllm.py vllm    MODEL_DIR HF.json VLLM.json    (needs vllm)
        python3 check_vllm.py compare HF.json VLLM.json              (standard library only)

The sides run in separate interpreters: vLLM lives in its own virtualenv, with the torch it pins.
hf: tokenises PROMPT with the checkpoint's tokenizer and generates GREEDY tokens (float32, full
forward each step), keeping each chosen token's logprob and its lead over the runner-up.
vllm: loads MODEL_DIR as it is (float32; the bf16 weights widen exactly), checks that its tokenizer
gives the same prompt ids, generates greedily from those ids, and scores transformers' tokens
teacher-forced (prompt_logprobs) at every position of prompt + those tokens, so the numbers are
compared even where greedy paths part.
compare: the teacher-forced logprobs agree within TOL; greedy tokens and their logprobs agree up to
the first step where transformers' top two are within 2*TOL (a near-tie may break either way).
Exit status: 0 when all agree, 1 otherwise.
"""
import json
import sys

PROMPT = "Alice was beginning to get very tired of sitting by her sister on the bank"
GREEDY = 8
TOL = 1e-3  # float32 both sides; vLLM's CPU kernels differ from torch's in summation order only


def run_hf(model_dir, out_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(model_dir)(PROMPT, add_special_tokens=False)["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    seq, tokens, logprobs, leads = list(ids), [], [], []
    with torch.no_grad():
        for _ in range(GREEDY):
            logits = model(torch.tensor([seq])).logits[0, -1].float()
            top = torch.log_softmax(logits, -1).topk(2)
            tokens.append(int(top.indices[0]))
            logprobs.append(float(top.values[0]))
            leads.append(float(top.values[0] - top.values[1]))
            seq.append(tokens[-1])
        # Every position's next-token logprob over prompt + greedy tokens, for the teacher-forced
        # comparison: the prompt's varied tokens test more than a random model's repeated pick.
        lp = torch.log_softmax(model(torch.tensor([seq])).logits[0].float(), -1)
        forced = [float(lp[j - 1, seq[j]]) for j in range(1, len(seq))]
    json.dump({"prompt_ids": ids, "tokens": tokens, "logprobs": logprobs, "leads": leads,
               "forced_logprobs": forced}, open(out_path, "w"))


def run_vllm(model_dir, hf_path, out_path):
    import vllm
    from vllm import LLM, SamplingParams

    hf = json.load(open(hf_path))
    llm = LLM(model=model_dir, dtype="float32", max_model_len=128, enforce_eager=True, seed=0)
    vllm_ids = llm.get_tokenizer().encode(PROMPT, add_special_tokens=False)
    # detokenize=False: the padded vocabulary has ids the tokenizer has no text for.
    greedy = SamplingParams(temperature=0, max_tokens=GREEDY, logprobs=1, ignore_eos=True,
                            detokenize=False)
    out = llm.generate([{"prompt_token_ids": hf["prompt_ids"]}], greedy)[0].outputs[0]
    tokens = list(out.token_ids)
    logprobs = [out.logprobs[i][t].logprob for i, t in enumerate(tokens)]
    forced = SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=1, detokenize=False)
    seq = hf["prompt_ids"] + hf["tokens"]
    plp = llm.generate([{"prompt_token_ids": seq}], forced)[0].prompt_logprobs
    forced_lp = [plp[j][seq[j]].logprob for j in range(1, len(seq))]
    json.dump({"version": vllm.__version__, "arch": llm.model_config.architecture,
               "prompt_ids": vllm_ids, "tokens": tokens, "logprobs": logprobs,
               "forced_logprobs": forced_lp}, open(out_path, "w"))


def compare(hf_path, vllm_path):
    hf, vl = json.load(open(hf_path)), json.load(open(vllm_path))
    problems = []
    if vl["prompt_ids"] != hf["prompt_ids"]:
        problems.append(f"prompt ids differ: vLLM {vl['prompt_ids']} vs {hf['prompt_ids']}")
    if len(vl["forced_logprobs"]) != len(hf["forced_logprobs"]):
        problems.append("teacher-forced logprobs: the position counts differ")
    diff = max(abs(a - b) for a, b in zip(vl["forced_logprobs"], hf["forced_logprobs"]))
    if diff > TOL:
        problems.append(f"teacher-forced logprobs differ by {diff:.2e} > {TOL}")
    same, tail = 0, ""
    for i, (a, b) in enumerate(zip(vl["tokens"], hf["tokens"])):
        if a != b:
            if hf["leads"][i] > 2 * TOL:
                problems.append(f"greedy token {i}: vLLM {a}, transformers {b} "
                                f"(lead {hf['leads'][i]:.3g})")
            else:
                tail = f" (then a near-tie, lead {hf['leads'][i]:.2e})"
            break
        if abs(vl["logprobs"][i] - hf["logprobs"][i]) > TOL:
            problems.append(f"greedy token {i}: logprob {vl['logprobs'][i]:.6g} vs "
                            f"{hf['logprobs'][i]:.6g}")
        same += 1
    summary = (f"vLLM {vl['version']} ({vl['arch']}): greedy tokens {same} of {GREEDY} equal"
               f"{tail}, teacher-forced logprobs ({len(hf['forced_logprobs'])} positions) "
               f"max |diff| {diff:.1e}, min greedy lead {min(hf['leads']):.2e}")
    print(("MISMATCH " + "; ".join(problems) + " — " if problems else "OK ") + summary)
    return 1 if problems else 0


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "hf":
        run_hf(*args)
    elif mode == "vllm":
        run_vllm(*args)
    elif mode == "compare":
        return compare(*args)
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
