#!/usr/bin/env bash
# Regenerates the golden files in tests/golden after an intended change of output. Review the
# diff (git diff tests/golden) before committing: every change must be explainable.
set -euo pipefail
cd "$(dirname "$0")/../tests/golden"
R=${RACKSIM:-../../build/sim/cli/racksim}
export RACKSIM_DATA_DIR="$(cd ../.. && pwd)"
for f in errors/*.yaml; do
  n=$(basename "$f" .yaml)
  "$R" run "$f" > /dev/null 2> "errors/$n.stderr" || true
done
"$R" run ../../scenarios/quickstart.yaml --set training.parallelism.tpp=2 2> errors/cli_set_unknown_key.stderr || true
"$R" run ../../scenarios/quickstart.yaml --set training.seq_len=long 2> errors/cli_set_bad_value.stderr || true
"$R" run errors/no_such_file.yaml 2> errors/cli_missing_file.stderr || true
"$R" collective --system h200-sxm --gpus 8 --op all_reduce --bytes 1 2> errors/cli_collective_bad_size.stderr || true
for a in cli/*.args; do
  n=$(basename "$a" .args)
  IFS=';' read -r -a args < "$a"
  "$R" "${args[@]}" > /dev/null 2> "cli/$n.stderr" || true
done
for a in reports/*.args; do
  n=$(basename "$a" .args)
  IFS=';' read -r -a args < "$a"
  "$R" "${args[@]}" > "reports/$n.json"
done
# import goldens of `racksim models import` on every Hugging Face config (tests/golden/import/cases.cmake, import.hf.*); first: the
# import.run scenarios below read them)
for f in ../data/hf/*.json; do
  "$R" models import "$f" > "import/hf/$(basename "$f" .json).yaml"
done
# reports of scenarios built on imported files (tests/golden/import/cases.cmake, import.run.*)
"$R" run import/runs/qwen3-30b-a3b-h200.yaml --json > import/runs/qwen3-30b-a3b-h200.json
"$R" run import/runs/deepseek-v3-gb200.yaml --json > import/runs/deepseek-v3-gb200.json
"$R" run import/megatron/train_llama3_8b_h100_fp8.yaml --json > import/runs/megatron-llama3-8b.json
# import goldens of `racksim import maxtext` (tests/golden/import/cases.cmake)
"$R" import maxtext ../data/maxtext/gpu/models/llama3_8b.yml --system h100-sxm --gpus 16 \
    per_device_batch_size=4 quantization=fp8 dcn_data_parallelism=2 > import/maxtext/llama3_8b_gpu.yaml
"$R" import maxtext ../data/maxtext/base.yml model_name=llama3-8b ici_fsdp_paralelism=8 \
    2> import/errors/maxtext_unknown_key.stderr || true
