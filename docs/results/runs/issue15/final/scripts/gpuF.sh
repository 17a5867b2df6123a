# Issue 15, session 3, call F (H200): cg_vector4 with its atomic target moved (EXP_OUT
# elements past a fresh 1 MiB buffer; timing only: the result check then fails).
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L
for n in 2^26 2^28; do
for off in 0 32 64 96 128 160 192 224 256 288 320 352 384 416 448 480 1024 4096 16384; do
  EXP_OUT=$off $root/target/ab/ferrocuda-exp reduce --variant cg_vector4 --type f32 --n $n --reps 10 > $L/one.txt 2>&1
  echo "n=$n off=$off $(grep -m1 'exp out' $L/one.txt) $(grep -E '^cg_vector4' $L/one.txt)" >> $L/offsets.txt
done
done
tail -5 $L/one.txt >> $L/offsets.txt
cd $OUT && tar czf logs.tgz logs && rm -rf logs
