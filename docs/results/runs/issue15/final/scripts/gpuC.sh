# Issue 15, session 3, call C (H200): the default bench on the final code; then ncu on the
# reduction's tail (2^20-2^24, with and without it), the stencil against a copy kernel at 2^22,
# cg_vector4 against its twin at 2^28; the copy kernel event-timed; the reproducible bits.
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L/ncu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
start=$(date +%s)
timeout 330 bin/ferrocuda bench --out $root/target/bl/bench > $L/bench.txt 2>&1
echo "bench: rc $? $(( $(date +%s) - start )) s" >> $L/gpu.txt
mkdir -p $L/bench && cp $root/target/bl/bench/*.* $L/bench/ 2>/dev/null
base=$root/target/bl/bench/baselines
start=$(date +%s)
M="--metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,gpc__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active"
prof() { # prof FILE KERNEL SKIP COUNT CMD...
  local f=$1 k=$2 s=$3 c=$4; shift 4
  echo "=== $*" >> $L/ncu/$f
  timeout 40 $NCU $M --clock-control none --print-units base -k regex:$k --launch-skip $s --launch-count $c "$@" 2>&1 | grep -E "^  [a-zA-Z_]|gpu__|sm__|gpc__|dram__|launch__" >> $L/ncu/$f
}
for n in 2^20 2^22 2^24; do
  prof tail.txt reduce_fast_sum_f32 3 3 bin/ferrocuda reduce --variant fast --type f32 --n $n --reps 3
  prof tail.txt reduce_fast_sum_f32 3 3 $root/target/ab/ferrocuda-notail reduce --variant fast --type f32 --n $n --reps 3
done
prof cub.txt DeviceReduce 6 4 $base/cub_reduce sum f32 1048576 3
prof stencil.txt stencil_1d_fast_r3_f32 3 3 bin/ferrocuda stencil --variant fast --type f32 --n 2^22 --radius 3 --reps 3
prof stencil.txt copy_float4 3 3 $base/textbook copy 16777216 3
prof cg.txt reduce_cg_vector4_f32 3 3 bin/ferrocuda reduce --variant cg_vector4 --type f32 --n 2^28 --reps 3
prof cg.txt sum_kernel_block 3 3 $base/textbook reduce f32 268435456 3 cg_vector4:256
echo "ncu: $(( $(date +%s) - start )) s" >> $L/gpu.txt
for b in 16777216 67108864 268435456 1073741824; do $base/textbook copy $b 20 >> $L/copy-kernel.txt 2>&1; done
for t in bin/*gpu_reproducible*; do timeout 120 $t > $L/gpu_reproducible.log 2>&1; done
grep -h "reproducible-bits" $L/gpu_reproducible.log > $L/bits.txt
cd $OUT && tar czf logs.tgz logs && rm -rf logs
