# Sourced by the device scripts: sets NCCL_ROOT to the NCCL that racksim-bench builds against, the toolkit's or the pip
# package's (nvidia-nccl-cu13), or to "" when there is none (racksim-bench then builds without its NCCL section).
find_nccl_root() {
  local d h r
  for d in /usr/local/cuda /usr $(python3 -c 'import nvidia, os; print(" ".join(os.path.abspath(p) for p in nvidia.__path__))' 2>/dev/null); do
    h=$(find "$d" -maxdepth 4 -name nccl.h 2>/dev/null | head -1)
    if [ -n "$h" ]; then
      r=$(dirname "$(dirname "$h")")
      if ls "$r"/lib*/libnccl.so* >/dev/null 2>&1; then echo "$r"; return; fi
    fi
  done
}
NCCL_ROOT=$(find_nccl_root)
