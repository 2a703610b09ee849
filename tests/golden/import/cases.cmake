# Golden cases of the importers (included by tests/golden/CMakeLists.txt; run in tests/golden).
# Regenerate after an intended change: see tests/golden/README.md (-DUPDATE=1).

# `racksim models import` of every real Hugging Face config in tests/data/hf: the model file, exact.
file(GLOB hf_configs CONFIGURE_DEPENDS ${GOLDEN_DIR}/../data/hf/*.json)
foreach(f ${hf_configs})
  get_filename_component(n ${f} NAME_WE)
  get_filename_component(fn ${f} NAME)
  string(REGEX REPLACE "\\.json$" "" n "${fn}")
  golden_case(import.hf.${n} 0 stdout import/hf/${n}.yaml models import ../data/hf/${fn})
endforeach()

# `racksim import megatron` of real Megatron-LM launch scripts: the scenario, exact.
golden_case(import.megatron.llama3_8b_h100_fp8 0 stdout import/megatron/train_llama3_8b_h100_fp8.yaml
            import megatron ../data/megatron/train_llama3_8b_h100_fp8.sh --system h100-sxm)
golden_case(import.megatron.mixtral_8x7b 0 stdout import/megatron/train_mixtral_8x7b_distributed.yaml
            import megatron ../data/megatron/train_mixtral_8x7b_distributed.sh --system h100-sxm --vocab 32000)

# Imported files run: reports of scenarios built on them (import/runs/*.yaml), exact.
golden_case(import.run.qwen3_30b_a3b 0 stdout import/runs/qwen3-30b-a3b-h200.json run import/runs/qwen3-30b-a3b-h200.yaml --json)
golden_case(import.run.deepseek_v3 0 stdout import/runs/deepseek-v3-gb200.json run import/runs/deepseek-v3-gb200.yaml --json)
golden_case(import.run.megatron_llama3 0 stdout import/runs/megatron-llama3-8b.json
            run import/megatron/train_llama3_8b_h100_fp8.yaml --json)

# Expected errors (exit 1, the exact message).
golden_case(import.error.hf_not_json 1 stderr import/errors/hf_not_json.stderr models import import/errors/not_json.json)
golden_case(import.error.hf_missing_keys 1 stderr import/errors/hf_missing_keys.stderr
            models import import/errors/missing_keys.json)
golden_case(import.error.megatron_no_model 1 stderr import/errors/megatron_no_model.stderr
            import megatron import/errors/no_model_args.txt --system h100-sxm --gpus 8)
golden_case(import.error.megatron_no_vocab 1 stderr import/errors/megatron_no_vocab.stderr
            import megatron ../data/megatron/train_mixtral_8x7b_distributed.sh --system h100-sxm)
golden_case(import.error.megatron_invalid 1 stderr import/errors/megatron_invalid.stderr
            import megatron import/errors/tp3_args.txt --system h100-sxm --gpus 6)

# `racksim import maxtext` of MaxText's GPU run config for Llama 3 8B (base_config, model_name) with
# command-line overrides: the scenario, exact; and an unknown override key: the message and exit code.
golden_case(import.maxtext.llama3_8b_gpu 0 stdout import/maxtext/llama3_8b_gpu.yaml
            import maxtext ../data/maxtext/gpu/models/llama3_8b.yml --system h100-sxm --gpus 16
            per_device_batch_size=4 quantization=fp8 dcn_data_parallelism=2)
golden_case(import.error.maxtext_unknown_key 1 stderr import/errors/maxtext_unknown_key.stderr
            import maxtext ../data/maxtext/base.yml model_name=llama3-8b ici_fsdp_paralelism=8)
# A per-device batch past the scenario's bound (1e9 sequences a step): refused as written, not a wrapped integer.
golden_case(import.error.maxtext_batch_past_bound 1 stderr import/errors/maxtext_batch_past_bound.stderr
            import maxtext ../data/maxtext/gpu/models/llama3_8b.yml --system h100-sxm --gpus 16
            per_device_batch_size=1e300)
