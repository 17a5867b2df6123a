# Issue 15, session 3, call H (H200): the fast reduction's tail split in two. base = the
# committed kernel; notail = no fence, ticket or last block; nolast = fence and ticket, but the
# last block does not combine; acqrel = one atom.acq_rel.gpu instead of fence + atomic, and no
# fence in the last block. ncu on 5 launches each, then event-timed runs, alternating.
set -u
root=$PWD
L=$OUT/logs; mkdir -p $L
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
M="--metrics gpu__time_duration.sum,sm__cycles_active.max"
for n in 2^20 2^22 2^24; do
  for v in base notail nolast acqrel; do
    echo "=== $v $n" >> $L/ncu.txt
    timeout 40 $NCU $M --clock-control none --print-units base -k regex:reduce_fast_sum_f32 --launch-skip 3 --launch-count 5 $root/target/ab/ferrocuda-$v reduce --variant fast --type f32 --n $n --reps 5 2>&1 | grep -E "gpu__|sm__" >> $L/ncu.txt
  done
done
for round in 1 2; do
  for v in base notail nolast acqrel; do
    for n in 2^20 2^22; do
      $root/target/ab/ferrocuda-$v reduce --variant fast --type f32 --n $n --reps 50 2>&1 | grep -E "^fast" | sed "s/^/$v $n r$round /" >> $L/timed.txt
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
