# Issue 15, session 3, call A: the full suite and the sanitizer on the final code, then the
# 16 GiB i64 row (2^31+1) with CUB at the same size.
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/logs/gpu.txt
start=$(date +%s)
EXTRA='bin/ferrocuda sanitize --out $OUT/logs/sanitize.md' timeout 330 ./run.sh $OUT/logs/suite > $OUT/logs/run.txt 2>&1
echo "suite+sanitize: rc $? $(( $(date +%s) - start )) s" >> $OUT/logs/gpu.txt
start=$(date +%s)
timeout 200 bin/ferrocuda bench --sizes '2^31+1' --types i64 --variants fast --reps 10 --rounds 2 --api-sizes none --out $root/target/bl/large-i64 > $OUT/logs/large-i64.txt 2>&1
echo "large i64: rc $? $(( $(date +%s) - start )) s" >> $OUT/logs/gpu.txt
mkdir -p $OUT/logs/large-i64 && cp $root/target/bl/large-i64/*.* $OUT/logs/large-i64/ 2>/dev/null
ls $root/target/bl/large-i64/baselines >> $OUT/logs/gpu.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
