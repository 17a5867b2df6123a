# Issue 15, session 3, call I: the fast reduction with its ticket as one atom.acq_rel.gpu.
# H100: the full suite and the sanitizer, then the fast rows of the default bench with CUB.
# H200 (SUITE=0): the fast rows only.
set -u
root=$PWD
cd .gpu && tar xzf bin.tar.gz
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt
if [ "${SUITE:-1}" = 1 ]; then
  start=$(date +%s)
  EXTRA='bin/ferrocuda sanitize --out $OUT/logs/sanitize.md' timeout 300 ./run.sh $L/suite > $L/run.txt 2>&1
  echo "suite+sanitize: rc $? $(( $(date +%s) - start )) s" >> $L/gpu.txt
fi
start=$(date +%s)
timeout 200 bin/ferrocuda bench --variants fast --types f32,i32 --api-sizes none --out $root/target/bl/fast > $L/fast.txt 2>&1
echo "fast bench: rc $? $(( $(date +%s) - start )) s" >> $L/gpu.txt
mkdir -p $L/fast && cp $root/target/bl/fast/*.* $L/fast/
cd $OUT && tar czf logs.tgz logs && rm -rf logs
