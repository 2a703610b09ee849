#!/bin/bash
# Device-side driver for this call: nccl-tests captures (real formats) + PyTorch host-overhead measurements.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > $OUT/env_before.txt 2>&1
lscpu > $OUT/lscpu.txt 2>&1
NH=""
for d in /usr/local/cuda /usr/local/cuda/targets/x86_64-linux /usr; do [ -e $d/include/nccl.h ] && ls $d/lib*/libnccl.so* >/dev/null 2>&1 && NH=$d && break; done
if [ -z "$NH" ]; then
  P=$(python3 -c "import nvidia.nccl,os;print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null || python3 -c "import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])")
  mkdir -p /tmp/nccl/lib && ln -sf $P/include /tmp/nccl/include && for f in $P/lib/libnccl.so*; do ln -sf $f /tmp/nccl/lib/; done
  ln -sf $(ls $P/lib/libnccl.so.* | head -1) /tmp/nccl/lib/libnccl.so; NH=/tmp/nccl
fi
echo "NCCL_HOME=$NH" > $OUT/nccl_home.txt; ls -l $NH/lib*/libnccl* >> $OUT/nccl_home.txt 2>&1
export LD_LIBRARY_PATH=$NH/lib:$LD_LIBRARY_PATH
(cd .tmp_nccl && make -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=$NH NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $OUT/nccl_tests_build.log 2>&1) || tail -20 $OUT/nccl_tests_build.log
B=.tmp_nccl/build
$B/all_reduce_perf -b 8 -e 256M -f 2 -g 1 -C 1 > $OUT/all_reduce_perf_g1_C1.log 2>&1
$B/all_gather_perf -b 8 -e 256M -f 2 -g 1 -J $OUT/all_gather_perf_g1.json > $OUT/all_gather_perf_g1_J.log 2>&1
$B/alltoall_perf -b 8 -e 64M -f 4 -g 1 > $OUT/alltoall_perf_g1.log 2>&1
tail -5 $OUT/all_reduce_perf_g1_C1.log; head -c 600 $OUT/all_gather_perf_g1.json; echo
python3 calibration/torch/host_overhead.py --out $OUT/host_overhead.jsonl > $OUT/host_overhead.log 2>&1; tail -30 $OUT/host_overhead.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > $OUT/env_after.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $OUT/versions.txt; nvcc --version >> $OUT/versions.txt 2>&1
