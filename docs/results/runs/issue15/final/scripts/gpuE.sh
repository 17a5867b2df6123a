# Issue 15, session 3, call E (H200): is cg_vector4 bound by its same-address atomics?
# Block size sweep (fewer blocks = fewer atomics) for ours and the twin, and ours with the
# atomic target moved (EXP_OUT elements further, timing only: the result check then fails).
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name --format=csv,noheader > $L/gpu.txt
NVCC=/usr/local/cuda/bin/nvcc; [ -x $NVCC ] || NVCC=nvcc
$NVCC -O3 -std=c++17 -arch=sm_90 -o /tmp/textbook $root/host-crate/cli/baselines/textbook.cu > $L/nvcc.txt 2>&1
for n in 2^26 2^28; do
  for b in 256 512 1024; do
    bin/ferrocuda reduce --variant cg_vector4 --type f32 --n $n --block $b --reps 20 2>&1 | grep -E "^cg_vector4" | sed "s/^/ours n=$n /" >> $L/blocks.txt
    nn=$(( n == 0 ? 0 : 1 )); [ $n = 2^26 ] && nn=67108864 || nn=268435456
    /tmp/textbook reduce f32 $nn 20 cg_vector4:$b 2>&1 | grep median | sed "s/^/twin n=$n /" >> $L/blocks.txt
  done
done
for off in 0 32 64 96 128 160 192 224 256 512 1024 4096; do
  EXP_OUT=$off $root/target/ab/ferrocuda-exp reduce --variant cg_vector4 --type f32 --n 2^26 --reps 20 2>&1 | grep -E "^cg_vector4" | sed "s/^/off=$off /" >> $L/offsets.txt
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
