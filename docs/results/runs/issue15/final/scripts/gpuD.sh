# Issue 15, session 3, call D (H200): cg_vector4 against its CUDA C twin at 2^28: the twin's
# SASS, instruction counts and issue activity of ours, ours reordered (cgfix) and the twin.
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
NVCC=/usr/local/cuda/bin/nvcc; [ -x $NVCC ] || NVCC=nvcc
$NVCC -O3 -std=c++17 -arch=sm_90 -o /tmp/textbook $root/host-crate/cli/baselines/textbook.cu > $L/nvcc.txt 2>&1
/usr/local/cuda/bin/cuobjdump -sass -fun sum_kernel_block /tmp/textbook > $L/twin-sass.txt 2>&1 || cuobjdump -sass /tmp/textbook | grep -A200 sum_kernel_block > $L/twin-sass.txt
M="--metrics gpu__time_duration.sum,sm__cycles_active.max,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_no_instruction_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
for exe in bin/ferrocuda $root/target/ab/ferrocuda-cgfix; do
  echo "=== $exe" >> $L/cg.txt
  timeout 60 $NCU $M --clock-control none --print-units base -k regex:reduce_cg_vector4_f32 --launch-skip 3 --launch-count 2 $exe reduce --variant cg_vector4 --type f32 --n 2^28 --reps 3 2>&1 | grep -E "^  [a-zA-Z_]|smsp__|sm__|gpu__|dram__|launch__" >> $L/cg.txt
done
echo "=== twin" >> $L/cg.txt
timeout 60 $NCU $M --clock-control none --print-units base -k regex:sum_kernel_block --launch-skip 3 --launch-count 2 /tmp/textbook reduce f32 268435456 3 cg_vector4:256 2>&1 | grep -E "^  [a-zA-Z_]|smsp__|sm__|gpu__|dram__|launch__" >> $L/cg.txt
for exe in bin/ferrocuda $root/target/ab/ferrocuda-cgfix; do
  $exe reduce --variant cg_vector4 --type f32 --n 2^28 --reps 20 >> $L/cg-timed.txt 2>&1
done
/tmp/textbook reduce f32 268435456 20 cg_vector4:256 >> $L/cg-timed.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
