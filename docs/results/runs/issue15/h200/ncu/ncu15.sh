#!/usr/bin/env bash
# Issue 15: Nsight Compute evidence for the rows of the target table.
#   target/ab/ncu15.sh OUT_DIR BASELINES_DIR(with textbook, cub_reduce built by the bench)
set -u
B="$PWD/.gpu/bin/ferrocuda"
out="$1"; base="$2"
mkdir -p "$out"
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
echo "ncu: $NCU"; "$NCU" --version | tail -1
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
M="--metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,lts__t_sector_hit_rate.pct"
# prof NAME KERNEL_REGEX SKIP COMMAND...: one launch, clocks left alone (as the bench runs).
prof() {
  local name="$1" k="$2" skip="$3"; shift 3
  echo "=== $name: $*" | tee "$out/$name.txt"
  timeout 240 "$NCU" $S $M --clock-control none --print-units base -k "regex:$k" \
    --launch-skip "$skip" --launch-count "${COUNT:-1}" "$@" >> "$out/$name.txt" 2>&1
  echo "rc $?" >> "$out/$name.txt"
  grep -E "gpu__time_duration.sum|dram__throughput.avg.pct|dram__bytes_read.sum |Grid Size |Achieved Occupancy|long_scoreboard" "$out/$name.txt" | head -8
}
prof fast-f32-2p20 reduce_fast_sum_f32 3 "$B" reduce --variant fast --type f32 --n 2^20 --reps 1
prof fast-f32-2p24 reduce_fast_sum_f32 3 "$B" reduce --variant fast --type f32 --n 2^24 --reps 1
prof cg_vector4-f32-2p28 reduce_cg_vector4_f32 3 "$B" reduce --variant cg_vector4 --type f32 --n 2^28 --reps 1
[ -x "$base/textbook" ] && prof cg_vector4-cudac-f32-2p28 sum_kernel_block 3 "$base/textbook" reduce f32 268435456 2 cg_vector4:256
for n in 2^24 2^28; do
  prof "stencil-fast-r3-f32-${n/^/p}" stencil_1d_fast_r3_f32 3 "$B" stencil --variant fast --type f32 --n "$n" --radius 3 --reps 1
done
if [ -x "$base/textbook" ]; then
  for b in 67108864 1073741824; do
    prof "copy_float4-$b" copy_float4 3 "$base/textbook" copy $b 2
  done
fi
[ -x "$base/cub_reduce" ] && COUNT=2 prof cub-f32-1048576 DeviceReduce 6 "$base/cub_reduce" sum f32 1048576 1
[ -x "$base/cub_reduce" ] && COUNT=2 prof cub-f32-16777216 DeviceReduce 6 "$base/cub_reduce" sum f32 16777216 1
prof fast-f32-2p28 reduce_fast_sum_f32 3 "$B" reduce --variant fast --type f32 --n 2^28 --reps 1
prof stencil-fast-r3-f32-2p22 stencil_1d_fast_r3_f32 3 "$B" stencil --variant fast --type f32 --n 2^22 --radius 3 --reps 1
prof fast-f32-2p22 reduce_fast_sum_f32 3 "$B" reduce --variant fast --type f32 --n 2^22 --reps 1
prof neighbored-f32-n1 reduce_neighbored 3 "$B" reduce --variant neighbored --type f32 --n 1 --reps 1
prof fast-f32-n1 reduce_fast_sum_f32 3 "$B" reduce --variant fast --type f32 --n 1 --reps 1
prof fast-f32-2p32p3 reduce_fast_sum_f32 3 "$B" reduce --variant fast --type f32 --n '2^32+3' --reps 1
