#!/usr/bin/env python3
"""TensorBoard itself reads the event files of `slideformer train --report-to tensorboard`, with
the values of metrics.jsonl. Exit 77 (skipped) where the tensorboard package is not installed."""
import json, math, os, subprocess, sys, tempfile

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError:
    print("skipped: python3 has no tensorboard package (pip install tensorboard)")
    sys.exit(77)

binary = sys.argv[1]
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with tempfile.TemporaryDirectory() as d:
    subprocess.run([binary, "init-model", "--out", f"{d}/m", "--hidden", "32", "--layers", "2",
                    "--heads", "2", "--kv-heads", "1", "--intermediate", "64"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([binary, "train", f"model_name_or_path={d}/m",
                    f"train_data={src}/assets/data/carroll-alice.txt", f"output_dir={d}/out",
                    "--max-steps", "6", "--batch-size", "2", "--cutoff-len", "32", "--lr", "1e-3",
                    "--val-size", "0.01", "--eval-steps", "3", "--report-to", "tensorboard",
                    "--backend", "cpu"], check=True, stdout=subprocess.DEVNULL)
    acc = event_accumulator.EventAccumulator(f"{d}/out/runs")
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for t in ("train/loss", "train/grad_norm", "train/learning_rate", "eval/loss"):
        assert t in tags, f"{t} not among TensorBoard's scalars {tags}"
    metrics = [json.loads(l) for l in open(f"{d}/out/metrics.jsonl")]
    losses = {m["step"]: m["loss"] for m in metrics if "loss" in m}
    evals = {m["step"]: m["eval_loss"] for m in metrics if "eval_loss" in m}
    tb = {e.step: e.value for e in acc.Scalars("train/loss")}
    assert sorted(tb) == sorted(losses) == list(range(1, 7)), (tb, losses)
    for step, v in losses.items():
        assert math.isclose(tb[step], v, rel_tol=1e-6), (step, tb[step], v)
    tbe = {e.step: e.value for e in acc.Scalars("eval/loss")}
    assert sorted(tbe) == [3, 6] and all(math.isclose(tbe[s], evals[s], rel_tol=1e-6) for s in tbe)
    print(f"TensorBoard {tags}: train/loss at steps 1..6 and eval/loss at 3, 6 equal metrics.jsonl")
