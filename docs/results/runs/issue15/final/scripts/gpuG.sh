# Issue 15, session 3, call G (H100): the n = 1 and 2^10 rows with the textbook kernels and
# CUB, and the f64/i64/u64 rows at 2^24 and 2^28.
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt
timeout 200 bin/ferrocuda bench --sizes 1,2^10 --types f32 --api-sizes none --out $root/target/bl/small > $L/small.txt 2>&1
mkdir -p $L/small && cp $root/target/bl/small/*.* $L/small/
timeout 200 bin/ferrocuda bench --sizes 2^24,2^28 --types f64,i64,u64 --variants fast --no-baselines --api-sizes none --out $L/types > $L/types.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
