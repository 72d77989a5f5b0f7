#!/usr/bin/env bash
# End-to-end benchmark on the GPU machine: builds nothing (BIN= holds binaries built elsewhere),
# makes the random-init Llama-3.1-8B checkpoint there with transformers, then trains it for each
# configuration SEQxBATCH given (default: the issue's five) and prints one summary line each:
# tok/s (median of steps 2..), TFLOPS (6P + 6·L·H·S per token), the engine's device buffer, the
# device-wide peak (NVML via nvidia-smi, sampled every 200 ms), the host peak RSS, the plan's M,
# and the start-up time.
# usage: BIN=dir [GPU_MEM=24GiB] [STEPS=4] [LAYERS=32] [CLIP=0] [TRACE_DIR=dir] [EXTRA=args]
#        [TAG=name] bash bench/e2e/run.sh 1024x8 ...   (TRACE_DIR: an engine trace per
#        configuration; TAG: added to the logs' names, for runs of one configuration with EXTRA)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-build}
work=${WORK:-/tmp/sf_e2e}
log=${OUT:-$work}
gpu_mem=${GPU_MEM:-24GiB}
steps=${STEPS:-4}
clip=${CLIP:-0}
mkdir -p "$work" "$log"
# `plan` measures this machine's constants once per shape and M, and predicts each configuration's
# peaks and step time; `train` reads the same cache and prints measured / predicted.
export SLIDEFORMER_MACHINE_FILE=${SLIDEFORMER_MACHINE_FILE:-$work/machine.json}
if [ ! -f "$work/model/config.json" ]; then
  python3 bench/e2e/make_inputs.py "$work/model" "$work/data.jsonl" "${LAYERS:-32}" || exit 1
fi
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(1024x8 1024x16 1024x32 1024x64 2048x32)
for cfg in "${configs[@]}"; do
  S=${cfg%x*}
  B=${cfg#*x}
  name="${cfg}_${gpu_mem}_clip${clip}${TAG:+_$TAG}"
  args=(--model "$work/model" --data "$work/data.jsonl" --steps "$steps" --batch-size "$B"
    --cutoff-len "$S" --lr 1e-5 --max-grad-norm "$clip" --gpu-memory "$gpu_mem" --backend cuda
    --no-cache --no-save)
  "$bin/slideformer" plan "${args[@]}" ${EXTRA:-} >"$log/$name.plan.log" 2>&1
  # memory in use, the SM clock and the power, every 200 ms while it trains (kept beside its log)
  nvidia-smi --query-gpu=memory.used,clocks.sm,power.draw --format=csv,noheader,nounits -lms 200 \
    >"$log/$name.smi.txt" &
  smi=$!
  start=$(date +%s.%N)
  "$bin/slideformer" train "${args[@]}" ${TRACE_DIR:+--trace "$TRACE_DIR/$name.json"} \
    ${EXTRA:-} >"$log/$name.log" 2>&1
  rc=$?
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  peak=$(cut -d, -f1 "$log/$name.smi.txt" | sort -n | tail -1)
  python3 - "$log/$name.log" "$cfg" "$gpu_mem" "$clip" "$rc" "${peak:-0}" "$start" <<'PY'
import os, re, statistics, sys
path, cfg, cap, clip, rc, peak_mib, start = sys.argv[1:]
# The SM clock while the GPU worked (samples over 300 W; nvidia-smi's columns: MiB, MHz, W).
clocks = []
for line in open(path[:-len(".log")] + ".smi.txt"):
    f = [x.strip() for x in line.split(",")]
    try:
        if len(f) == 3 and float(f[2]) > 300:
            clocks.append(float(f[1]))
    except ValueError:
        pass
clock = f", SM clock {statistics.median(clocks):.0f} MHz (median of {len(clocks)} samples over 300 W)" if clocks else ""
text = open(path).read()
S = int(cfg.split("x")[0])
m = re.search(r"model \S+: (\d+) layers, hidden (\d+), (\d+) parameters", text)
rates = [float(x) for x in re.findall(r"tokens \d+\s+([0-9.e+]+) tok/s", text)]
if rc != "0" or not m or not rates:
    tail = " | ".join(l for l in text.strip().splitlines()[-3:])
    print(f"{cfg} cap {cap} clip {clip}: FAILED rc={rc}: {tail[:600]}")
    sys.exit(0)
L, H, P = int(m.group(1)), int(m.group(2)), int(m.group(3))
tok = statistics.median(rates[1:] or rates)
tflops = tok * (6 * P + 6 * L * H * S) / 1e12
mm = re.search(r"micro-batches of ≤ (\d+) tokens", text)
dev = re.search(r"engine device buffer ([0-9.]+) GiB", text)
rss = re.search(r"host peak RSS ([0-9.]+) GiB (?:\(start-up ([0-9.]+) GiB, steps ([0-9.]+) GiB\) )?"
                r"\(planned ([0-9.]+) GiB\)", text)
rss_text = (f"host peak RSS {rss.group(1)} GiB"
            + (f" (start-up {rss.group(2)}, steps {rss.group(3)})" if rss.group(2) else "")
            + f" (planned {rss.group(4)})") if rss else "host peak RSS ?"
su = re.search(r"start-up: ([0-9.]+) s", text)
busy = re.findall(r"GPU busy ([0-9.]+) %", text)
plan_path = path[:-len(".log")] + ".plan.log"
plan = open(plan_path).read() if os.path.exists(plan_path) else ""
p_step = re.search(r"^predicted step ([0-9.]+) s", plan, re.M)  # not a weighing's "predicted step … with"
p_dev = re.search(r"device peak: ([0-9.]+) GiB", plan)
p_host = re.search(r"host peak: ([0-9.]+) GiB", plan)
ratio = re.search(r"measured / predicted ([0-9.]+)", text)
floor = re.search(r"the disk floor of a step is ([0-9.e+-]+) s", text)
# The issue's three floors, from the constants `plan` measured in this call: the GPU work alone
# (the layer's measured rate with its weights resident, the head's), the step's PCIe bytes at
# 50 GB/s, the CPU AdamW of the host-updated parameters at the rate measured under copies.
per = re.search(r"per step: compute ([0-9.]+) s, H2D ([0-9.]+) GB \(([0-9.]+) s\), D2H ([0-9.]+) GB "
                r"\(([0-9.]+) s\), CPU AdamW ([0-9.]+) G params \(([0-9.]+) s\)", plan)
floors = ""
if per:
    gpu_s, h2d_gb, d2h_gb, adam_s = (float(per.group(i)) for i in (1, 2, 4, 7))
    floors = (f"; floors: GPU work {gpu_s:.2f} s, PCIe {h2d_gb:.1f} GB H2D + {d2h_gb:.1f} GB D2H at 50 GB/s "
              f"{max(h2d_gb, d2h_gb) / 50:.2f} s, CPU AdamW {float(per.group(6)):.2f} G params {adam_s:.2f} s")
    host = re.search(r"host memory ([0-9.]+) GB(?: \(([0-9.]+) s\))?", plan)
    if host:  # the bytes through host memory, and the prediction's floor for them where measured
        floors += f", host memory {float(host.group(1)):.0f} GB" + (
            f" {float(host.group(2)):.2f} s" if host.group(2) else "")
def plan_block(out):  # the "plan: " line and its indented lines (EnginePlan::describe)
    b = out.find("plan: ")
    if b < 0:
        return []
    lines = out[b:].splitlines()
    n = 1
    while n < len(lines) and lines[n].startswith("  "):
        n += 1
    return lines[:n]
# item 5: the plan train allocates is the one `plan` printed
same = ""
if plan:
    pb, tb = plan_block(plan), plan_block(text)
    diff = [(a, b) for a, b in zip(pb, tb) if a != b]
    # train adds its own lines after the plan (the optimizer threads' CPUs): plan's block is a prefix
    same = ("; train's plan = plan's" if pb and tb[:len(pb)] == pb else
            f"; train's plan DIFFERS from plan's ({len(pb)} vs {len(tb)} lines"
            + (f"; first: '{diff[0][0].strip()}' vs '{diff[0][1].strip()}'" if diff else "") + ")")
pred = ""
if p_step:
    meas_step = S * int(cfg.split("x")[1]) / tok
    pred = (f"; predicted step {float(p_step.group(1)):.3f} s vs {meas_step:.3f} s measured "
            f"({meas_step / float(p_step.group(1)):.3f}; train's own mean ratio "
            f"{ratio.group(1) if ratio else '?'}), predicted device {p_dev.group(1) if p_dev else '?'} GiB"
            f" vs {int(peak_mib) / 1024:.1f}, predicted host {p_host.group(1) if p_host else '?'} GiB"
            f" vs {rss.group(1) if rss else '?'}")
print(f"{cfg} cap {cap} clip {clip}: {tok:,.0f} tok/s, {tflops:.0f} TFLOPS, M {mm.group(1) if mm else '?'}, "
      f"engine device {dev.group(1) if dev else '?'} GiB, device peak (NVML) {int(peak_mib) / 1024:.1f} GiB, "
      f"{rss_text}, "
      f"start-up {su.group(1) if su else '?'} s, steps {[round(r) for r in rates]}"
      + (f", GPU busy {busy[-1]} %" if busy else "") + clock + pred + same + floors
      + (f"; NVMe disk floor {float(floor.group(1)):.2f} s a step, measured step "
         f"{S * int(cfg.split('x')[1]) / tok:.2f} s: {float(floor.group(1)) / (S * int(cfg.split('x')[1]) / tok):.0%} "
         f"of the floor's rate" if floor else ""))
PY
done
