#!/usr/bin/env python3
"""Tokenizer speed: `slideformer tokenize` vs the Hugging Face `tokenizers` package, same input,
same run.

Input: every line of DATA/text/*.txt (one JSONL record per line) — the "lines" workload — and
each whole file as one record — the "files" workload. For each tokenizer folder it reports MB/s:
  hf-1t   : tokenizers' encode_batch with TOKENIZERS_PARALLELISM=false (one thread)
  ours-1t : slideformer tokenize with SF_THREADS=1
  ours-Nt : slideformer tokenize with all hardware threads
Ours is timed end to end through the binary (JSONL parse + encode + JSON print) minus the time
of the same command on empty input (the tokenizer.json load), so it is a conservative figure.
The best of --repeat runs is kept.

  python3 bench/tokenizer/bench.py --binary build/slideformer [--data ../shared/data]
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before importing tokenizers
HERE = os.path.dirname(os.path.abspath(__file__))


def run(binary, folder, payload, threads):
    env = dict(os.environ)
    if threads:
        env["SF_THREADS"] = str(threads)
    else:
        env.pop("SF_THREADS", None)
    t0 = time.perf_counter()
    p = subprocess.run([binary, "tokenize", "--tokenizer", folder], input=payload, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace"))
    return dt, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.environ.get("SLIDEFORMER", "slideformer"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "shared", "data"))
    ap.add_argument("--only", default="")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    text_dir = os.path.join(args.data, "text")
    files = [open(os.path.join(text_dir, n), "rb").read().decode("utf-8", errors="replace")
             for n in sorted(os.listdir(text_dir)) if n.endswith(".txt")]
    lines = [l for f in files for l in f.split("\n")]
    mb = sum(len(f.encode("utf-8")) for f in files) / 1e6
    workloads = {"lines": lines, "files": files}
    payloads = {k: "".join(json.dumps({"text": t}) + "\n" for t in v).encode()
                for k, v in workloads.items()}
    nthreads = os.cpu_count()
    print(f"input: {len(files)} files, {len(lines)} lines, {mb:.2f} MB; cores: {nthreads}")
    print(f"{'tokenizer':9s} {'workload':8s} {'hf-1t MB/s':>11s} {'ours-1t MB/s':>13s} "
          f"{'ours-{}t MB/s'.format(nthreads):>13s} {'1t ratio':>9s}")
    tok_root = os.path.join(args.data, "tokenizers")
    names = sorted(d for d in os.listdir(tok_root) if os.path.isdir(os.path.join(tok_root, d)))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    for name in names:
        folder = os.path.join(tok_root, name)
        hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        load = min(run(args.binary, folder, b"", 1)[0] for _ in range(args.repeat))
        for wl, texts in workloads.items():
            hf_t = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                hf.encode_batch(texts, add_special_tokens=False)
                hf_t = min(hf_t, time.perf_counter() - t0)
            o1 = min(run(args.binary, folder, payloads[wl], 1)[0] for _ in range(args.repeat))
            on = min(run(args.binary, folder, payloads[wl], 0)[0] for _ in range(args.repeat))
            o1, on = max(o1 - load, 1e-6), max(on - load, 1e-6)
            print(f"{name:9s} {wl:8s} {mb / hf_t:11.2f} {mb / o1:13.2f} {mb / on:13.2f} "
                  f"{hf_t / o1:8.2f}x")
        print(f"{name:9s} load: ours {load:.2f}s (tokenizer.json parse, process start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
