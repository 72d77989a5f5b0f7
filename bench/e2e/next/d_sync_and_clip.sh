#!/usr/bin/env bash
# Call D (any GPU; rebuild and carry .dev/e2e: slideformer, stripped). One call for what is most
# wanted when machines are scarce: (1) call C's A/B of host waits that spin (CUDA's default) against
# blocking ones (SF_CUDA_SYNC=blocking), 1024x8 traced and 1024x16, each arm with its own
# machine-constant cache; (2) exact clipping at 1.0 against unclipped in the same call at 1024x32
# and 2048x32 (24 GiB), the configurations whose clipped ratio was measured only across calls.
set -uo pipefail
R=$OUT/d; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA|Model name"; } > $R/machine.txt
sync_ab() {
  for cfg in 1024x8 1024x16; do
    for mode in spin blocking; do
      mkdir -p $R/$mode
      tr=""; [ $cfg = 1024x8 ] && tr=$R/traces
      SF_CUDA_SYNC=$mode SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine_$mode.json OUT=$R/$mode BIN=$B STEPS=4 TRACE_DIR=$tr \
        bash bench/e2e/run.sh $cfg >> $R/e2e_$mode.txt 2>&1
      [ -n "$tr" ] && mv $R/traces/${cfg}_24GiB_clip0.json $R/traces/${mode}_$cfg.json
    done
  done
}
clip_ab() {
  for cfg in 1024x32 2048x32; do
    OUT=$R/clip BIN=$B STEPS=3 CLIP=1.0 bash bench/e2e/run.sh $cfg >> $R/e2e_clip.txt 2>&1
    OUT=$R/clip BIN=$B STEPS=3 bash bench/e2e/run.sh $cfg >> $R/e2e_unclipped.txt 2>&1
  done
}
export -f sync_ab clip_ab; export R B
timeout 310 bash -c sync_ab
for t in $R/traces/*.json; do
  [ -f "$t" ] || continue
  python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
  python3 bench/e2e/trace_gaps.py $t --top 10 > ${t%.json}.gaps.txt 2>&1; gzip $t
done
timeout 250 bash -c clip_ab
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
