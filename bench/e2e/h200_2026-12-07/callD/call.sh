#!/usr/bin/env bash
# Call D (any GPU). Carry .dev/e2e: slideformer and bench_adamw (stripped) of this HEAD, and in
# .dev/e2e/old/ the same two built before the thread pool handed out chunks dynamically
# (static shares) and before a fresh run's weights were read while the host memory is pinned
# (so the start-up lines of the two compare too). One call for what is most wanted when machines
# are scarce:
# (0) the CPU AdamW with 0, 1, 2 threads spinning beside it, static shares against dynamic chunks
#     (bench_adamw, 16 threads, 16 M params as one ring piece and 256 M);
# (1) 1024x8 (traced) and 1024x16 at 24 GiB in three arms, each with its own machine-constant
#     cache: static pool with CUDA's spinning waits (the old binary), dynamic pool with spinning
#     waits, dynamic pool with blocking waits (SF_CUDA_SYNC=blocking);
# (2) exact clipping at 1.0 against unclipped in the same call at 1024x32 and 2048x32 (24 GiB).
set -uo pipefail
R=$OUT/d; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA|Model name"; } > $R/machine.txt
for n in 16 256; do for sp in 0 1 2; do
  $B/old/bench_adamw $n 16 $sp | sed 's/^/static  /'; $B/bench_adamw $n 16 $sp | sed 's/^/dynamic /'
done; done > $R/adamw_spinners.txt 2>&1
arms() {
  for cfg in 1024x8 1024x16; do
    for arm in static_spin dynamic_spin dynamic_blocking; do
      bin=$B; [ $arm = static_spin ] && bin=$B/old
      mode=${arm#*_}
      mkdir -p $R/$arm
      tr=""; [ $cfg = 1024x8 ] && tr=$R/traces
      SF_CUDA_SYNC=$mode SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine_$arm.json OUT=$R/$arm BIN=$bin STEPS=4 \
        TRACE_DIR=$tr bash bench/e2e/run.sh $cfg >> $R/e2e_$arm.txt 2>&1
      [ -n "$tr" ] && mv $R/traces/${cfg}_24GiB_clip0.json $R/traces/${arm}_$cfg.json
    done
  done
}
clip_ab() {
  for cfg in 1024x32 2048x32; do
    OUT=$R/clip BIN=$B STEPS=3 CLIP=1.0 bash bench/e2e/run.sh $cfg >> $R/e2e_clip.txt 2>&1
    OUT=$R/clip BIN=$B STEPS=3 bash bench/e2e/run.sh $cfg >> $R/e2e_unclipped.txt 2>&1
  done
}
export -f arms clip_ab; export R B
timeout 400 bash -c arms
for t in $R/traces/*.json; do
  [ -f "$t" ] || continue
  python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
  python3 bench/e2e/trace_gaps.py $t --top 10 > ${t%.json}.gaps.txt 2>&1; gzip $t
done
timeout 150 bash -c clip_ab
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
