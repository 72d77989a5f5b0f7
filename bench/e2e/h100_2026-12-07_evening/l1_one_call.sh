#!/usr/bin/env bash
# Call L1: what J1 and G2 ask, in one call of at most 590 s, for whichever GPU comes (carry
# .dev/e2e: slideformer, sf_cuda_tests and bench_layer of this HEAD, stripped). In order, each
# stage only where the time left allows it:
#  1. the CUDA golden cases, the optimizer's tests, NoAllocationInStep, the resident layers;
#  2. bench_layer: the probe's layer timing after 0, 2 and 6 s back to back, the SM clock and
#     power sampled beside it;
#  3. the five at 24 GiB, unclipped (the probe now times a hot layer);
#  4. on a GPU that holds it (an H200), the PyTorch control at 1024x8;
#  5. clipped at 1.0: 1024x16 (traced), 1024x32, 1024x8 (the ratios to 3's runs, same machine).
set -uo pipefail
R=$OUT/l1; mkdir -p $R/traces
B=.dev/e2e
END=${END_S:-590}
left() { echo $((END - SECONDS)); }
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 60 $B/sf_cuda_tests \
  --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 150 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
sleep 5
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 \
  > $R/bench_layer.smi.txt &
smi=$!
timeout 60 $B/bench_layer /tmp/sf_e2e/model 16384 1024 0 2 6 > $R/bench_layer.txt 2>&1
kill $smi
echo "after bench_layer: $(left) s left" >> $R/stages.txt
timeout $(( $(left) - 20 )) env OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh > $R/e2e_24.txt 2>&1
echo "after the five: $(left) s left" >> $R/stages.txt
if [ "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)" -ge 130000 ] &&
   [ $(left) -gt 130 ]; then
  timeout 110 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
else
  echo "not run: the control needs ~106 GiB of GPU memory and ~110 s" > $R/torch_1024x8.txt
fi
echo "after the control: $(left) s left" >> $R/stages.txt
for cfg in 1024x16 1024x32 1024x8; do
  [ $(left) -gt 75 ] || break
  trace=""; [ $cfg = 1024x16 ] && trace=$R/traces
  timeout $(( $(left) - 15 )) env OUT=$R/clip BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$trace \
    bash bench/e2e/run.sh $cfg >> $R/e2e_clip.txt 2>&1
done
echo "at the end: $(left) s left" >> $R/stages.txt
for t in $R/traces/*.json; do
  [ -f "$t" ] || continue
  timeout 20 python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1
  timeout 20 python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
  timeout 20 python3 bench/e2e/trace_layers.py $t $R/clip/$(basename ${t%.json}).plan.log \
    > ${t%.json}.layers.txt 2>&1
  gzip $t
done
tar czf $OUT/l1.tgz -C $OUT l1 && rm -rf $R
