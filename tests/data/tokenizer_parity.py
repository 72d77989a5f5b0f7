#!/usr/bin/env python3
"""Token-for-token parity of `slideformer tokenize` with the Hugging Face `tokenizers` package.

For every tokenizer folder under DATA/tokenizers (llama3, mistral, qwen2.5, qwen3, gpt2) and every
input — each line of DATA/text/*.txt, each whole file, tests/data/adversarial/cases.jsonl and
generated cases (the tokenizer's special tokens inside text, very long words) — checks:
  * ids with add_special_tokens=False and =True are identical to HF's;
  * our decode of those ids equals HF's decode of the same ids (skip_special_tokens False for the
    first run, True for the second).
The binary runs once per tokenizer and mode, streaming every input as JSONL.

Exit 0: all equal; 1: a mismatch (details printed); 77: skipped (no `tokenizers` in this python,
or DATA absent), with the reason printed.

  python3 tests/data/tokenizer_parity.py --binary build/slideformer [--data ../shared/data]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def build_inputs(data, tok_json):
    """(label, text) pairs for one tokenizer."""
    inputs = []
    text_dir = os.path.join(data, "text")
    for name in sorted(os.listdir(text_dir)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(text_dir, name), "rb") as f:
            whole = f.read().decode("utf-8", errors="replace")
        for i, line in enumerate(whole.split("\n")):
            inputs.append((f"{name}:{i + 1}", line))
        inputs.append((f"{name}:whole", whole))
    with open(os.path.join(HERE, "adversarial", "cases.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            inputs.append((f"adversarial:{i + 1}", json.loads(line)["text"]))
    specials = [t["content"] for t in tok_json.get("added_tokens", [])][:12]
    for s in specials:
        for tmpl in ["hello {} world", "{}{}", " {}\n", "x{}y", "{} leading", "trailing {}",
                     "  {}  {}  ", "\n{}\n\n", "<{}>", "{}".join(["a", "b", "c"])]:
            inputs.append((f"special:{s}", tmpl.replace("{}", s)))
    long_cases = ["a" * 5000, "supercalifragilistic" * 300, "🙂" * 1000, " " * 3000, "\n" * 2000,
                  "9" * 4000, "日本" * 2000, "x" * 100000, ("word " * 20000).strip(),
                  "ab" * 30000 + " end"]
    for i, c in enumerate(long_cases):
        inputs.append((f"long:{i}", c))
    return inputs


def start_ours(binary, folder, texts, add_special, skip_special):
    """Starts the binary on a background thread (it overlaps with HF's encoding); returns a
    function that waits and gives (ids, decoded) per input."""
    cmd = [binary, "tokenize", "--tokenizer", folder, "--decode"]
    if add_special:
        cmd.append("--add-special-tokens")
    if skip_special:
        cmd.append("--skip-special-tokens")
    payload = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode("utf-8")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    result = {}
    t0 = time.time()

    def talk():
        result["out"], result["err"] = proc.communicate(payload)
        result["seconds"] = time.time() - t0

    worker = threading.Thread(target=talk)
    worker.start()

    def wait():
        worker.join()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: "
                               f"{result['err'].decode(errors='replace')[-2000:]}")
        # split on "\n" only: decoded text may hold U+2028 and friends, which splitlines() cuts at
        rows = [json.loads(l) for l in result["out"].decode("utf-8").split("\n") if l]
        if len(rows) != len(texts):
            raise RuntimeError(f"{' '.join(cmd)}: {len(rows)} output lines for {len(texts)} inputs")
        return [r["ids"] for r in rows], [r["decoded"] for r in rows], result["seconds"]

    return wait


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.environ.get("SLIDEFORMER", "slideformer"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "shared", "data"))
    ap.add_argument("--only", default="", help="comma-separated tokenizer folders")
    ap.add_argument("--show", type=int, default=5, help="mismatches printed per tokenizer")
    args = ap.parse_args()

    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        print(f"skipped: the Hugging Face `tokenizers` package is not importable ({e})")
        return SKIP
    tok_root = os.path.join(args.data, "tokenizers")
    if not os.path.isdir(tok_root) or not os.path.isdir(os.path.join(args.data, "text")):
        print(f"skipped: {args.data} (tokenizers/ and text/) is absent")
        return SKIP

    names = sorted(d for d in os.listdir(tok_root) if os.path.isdir(os.path.join(tok_root, d)))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    total_bad = 0
    t_start = time.time()
    for name in names:
        folder = os.path.join(tok_root, name)
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            tok_json = json.load(f)
        hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        inputs = build_inputs(args.data, tok_json)
        texts = [t for _, t in inputs]
        bad = 0
        shown = 0
        hf_encodings = None
        for add_special, skip_special in [(False, False), (True, True)]:
            wait_ours = start_ours(args.binary, folder, texts, add_special, skip_special)
            if hf_encodings is None:
                hf_encodings = hf.encode_batch(texts, add_special_tokens=False)
                hf_ids = [e.ids for e in hf_encodings]
            else:
                # HF's encode(add_special_tokens=True) is encode(False) followed by its
                # post-processor; run that step on the encodings we have (halves HF's time), and
                # check it against a direct encode on a sample.
                hf_ids = [hf.post_process(e, None, True).ids for e in hf_encodings]
                sample = texts[:500] + texts[-200:]
                direct = [e.ids for e in hf.encode_batch(sample, add_special_tokens=True)]
                assert direct == hf_ids[:500] + hf_ids[-200:], "post_process shortcut differs"
            our_ids, our_text, t_ours = wait_ours()
            # Decode parity on the same ids: HF's decode of OUR ids (when the ids are equal, this is
            # HF's decode of its own ids).
            hf_text_ours = hf.decode_batch(our_ids, skip_special_tokens=skip_special)
            for (label, text), a, b, da, db in zip(inputs, our_ids, hf_ids, our_text, hf_text_ours):
                ok_ids = a == b
                ok_dec = da == db
                if ok_ids and ok_dec:
                    continue
                bad += 1
                if shown < args.show:
                    shown += 1
                    mode = f"add_special_tokens={add_special}"
                    if not ok_ids:
                        k = first_diff(a, b)
                        print(f"  MISMATCH ids [{name}] {label} {mode}: text={text[:120]!r} "
                              f"at {k}: ours={a[max(0, k - 3):k + 5]} hf={b[max(0, k - 3):k + 5]} "
                              f"hf tokens={[hf.id_to_token(i) for i in b[max(0, k - 3):k + 5]]}")
                    if not ok_dec:
                        k = first_diff(da, db)
                        print(f"  MISMATCH decode [{name}] {label} {mode}: at char {k}: "
                              f"ours={da[max(0, k - 20):k + 20]!r} hf={db[max(0, k - 20):k + 20]!r}")
            print(f"{name:8s} add_special_tokens={str(add_special):5s}: {len(texts)} inputs, "
                  f"binary {t_ours:.2f}s")
        print(f"{name:8s} summary: {len(texts)} inputs x 2 modes, mismatches: {bad}")
        total_bad += bad
    print(f"total mismatches: {total_bad} ({time.time() - t_start:.1f}s)")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
