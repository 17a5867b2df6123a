# Issue 15, session 3, call B: ncu on the 2^20-2^24 reductions (with and without the tail,
# stall sampling per instruction, CUB's main kernel), then the default bench.
set -u; start=$(date +%s)
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L/ncu
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
M="--metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,gpc__cycles_elapsed.max,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size"
[ "${SKIP_BENCH:-0}" = 1 ] || {
start=$(date +%s)
timeout 60 bin/ferrocuda bench --sizes 2^28 --types i64 --variants fast --no-baselines --api-sizes none --out $L/i64-2p28 > $L/i64-2p28.txt 2>&1
start=$(date +%s)
timeout 420 bin/ferrocuda bench --out $root/target/bl/bench > $L/bench.txt 2>&1
}
echo "bench: rc $? $(( $(date +%s) - start )) s" >> $L/time.txt
mkdir -p $L/bench && cp $root/target/bl/bench/*.* $L/bench/ 2>/dev/null
cd $OUT && tar czf bench.tgz logs/bench logs/bench.txt logs/time.txt logs/i64-2p28* ; cd $root/.gpu
start=$(date +%s)
for n in 2^20 2^22 2^24; do
  for b in ferrocuda ferrocuda-notail; do
    exe=bin/ferrocuda; [ $b = ferrocuda-notail ] && exe=$root/target/ab/ferrocuda-notail
    echo "=== $b $n" >> $L/ncu/tail.txt
    timeout 40 $NCU $M --clock-control none --print-units base -k regex:reduce_fast_sum_f32 --launch-skip 3 --launch-count 3 $exe reduce --variant fast --type f32 --n $n --reps 3 2>&1 | grep -E "reduce_fast|gpu__|sm__|gpc__|dram__|launch__" >> $L/ncu/tail.txt
  done
done
cub=$root/target/bl/large-i64/baselines/cub_reduce
timeout 40 $NCU $M --clock-control none --print-units base -k regex:DeviceReduce --launch-skip 6 --launch-count 4 $cub sum f32 1048576 3 2>&1 | grep -E "Reduce|gpu__|sm__|gpc__|dram__|launch__" > $L/ncu/cub-tail.txt
S="--section WarpStateStats --section SourceCounters --section LaunchStats"
timeout 40 $NCU $S --clock-control none -k regex:reduce_fast_sum_f32 --launch-skip 3 --launch-count 1 -o $L/ncu/ours-2p20 bin/ferrocuda reduce --variant fast --type f32 --n 2^20 --reps 1 > $L/ncu/ours-2p20.log 2>&1
timeout 40 $NCU $S --clock-control none -k regex:DeviceReduceKernel --launch-skip 3 --launch-count 1 -o $L/ncu/cub-2p20 $cub sum f32 1048576 1 > $L/ncu/cub-2p20.log 2>&1
for r in ours-2p20 cub-2p20; do
  $NCU -i $L/ncu/$r.ncu-rep --page source --csv --print-source sass > $L/ncu/$r-sass.csv 2>&1
  $NCU -i $L/ncu/$r.ncu-rep --page details --print-details all > $L/ncu/$r-details.txt 2>&1
done
echo "ncu: $(( $(date +%s) - start )) s" >> $L/time.txt
cd $OUT && tar czf logs.tgz logs && rm -rf logs
