// A new user's sweep of the command line for bad input (an audit of 2026-12-06): two crashes, three ways a command
// destroyed or silently misread its input, and a sweep that "succeeded" with an error in every row. Each case pins
// the exit code and the message's file:line:column or key, and checks that the inputs are intact.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "input/diagnostics.h"
#include "sim/scenario/scenario.h"

using racksim::testing::read_file;
using racksim::testing::run_cli;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = RACKSIM_SOURCE_DIR;

std::string temp_dir(const std::string& name) {
  const std::string dir = (fs::path(::testing::TempDir()) / ("input_audit_" + name)).lexically_normal().string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
// A small GPT's Megatron arguments after --num-layers, for the launch scripts the importer cases write.
const std::string kGptArgsAfterLayers = " --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                                        "--micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16\n";
}  // namespace

// `import maxtext` on a config that does not reach MaxText's base.yml divided by its model dimensions' default of 0
// (SIGFPE); now the first missing dimension is named.
TEST(InputAudit, MaxTextConfigWithoutTheModelDimensionsIsAnError) {
  const std::string dir = temp_dir("maxtext");
  write(dir + "/mt.yml", "foo: 1\n");
  const auto r = run_cli({"import", "maxtext", dir + "/mt.yml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, dir + "/mt.yml: error: base_num_decoder_layers: base_num_decoder_layers is not set: MaxText's "
                         "base.yml sets it"))
      << r.err;
  // num_slices 0 is not "unset" (it had read as -1 and warned that none was given).
  write(dir + "/slices.yml", "base_config: " + kSrc + "/tests/data/maxtext/base.yml\nnum_slices: 0\n");
  const auto s = run_cli({"import", "maxtext", dir + "/slices.yml"});
  EXPECT_EQ(s.code, 1);
  EXPECT_TRUE(has(s.err, "slices.yml:2:13: error: num_slices: 0 slices")) << s.err;
}

// JSON nested 100,000 deep overflowed the stack when the error message printed the value (SIGSEGV); a repeated key
// was taken silently (the last), where a YAML file is refused.
TEST(InputAudit, HfConfigsNestedTooDeepOrWithRepeatedKeysAreRefused) {
  const std::string dir = temp_dir("hf");
  const int n = 100000;
  write(dir + "/deep.json", "{\"num_hidden_layers\": " + std::string(n, '[') + std::string(n, ']') + "}");
  const auto deep = run_cli({"models", "import", dir + "/deep.json"});
  EXPECT_EQ(deep.code, 1);
  // At the bracket past the bound: the '{' and 21 characters, then the 64th '['.
  EXPECT_EQ(deep.err, dir + "/deep.json:1:86: error: not accepted: nested more than 64 levels deep (racksim's bound for "
                            "JSON input)\n");
  write(dir + "/dup.json", "{\n  \"hidden_size\": 4096,\n  \"hidden_size\": 8192}");
  const auto dup = run_cli({"models", "import", dir + "/dup.json"});
  EXPECT_EQ(dup.code, 1);
  EXPECT_TRUE(has(dup.err, "dup.json:3:3: error: not accepted: key \"hidden_size\" appears twice in one object")) << dup.err;
}

// The importers wrote --out over the file they had read (exit 0); sweep --merge over one of its shards.
TEST(InputAudit, ImportersAndMergesDoNotOverwriteWhatTheyRead) {
  const std::string dir = temp_dir("overwrite");
  fs::copy(kSrc + "/tests/data/hf/llama-3.1-8b-instruct.json", dir + "/hf.json");
  const std::string hf = read_file(dir + "/hf.json");
  ASSERT_FALSE(hf.empty());
  const auto models = run_cli({"models", "import", dir + "/hf.json", "--out", dir + "/hf.json"});
  EXPECT_EQ(models.code, 1);
  EXPECT_EQ(models.err, dir + "/hf.json: error: --out: is the config (" + dir + "/hf.json): writing the output would destroy it\n");
  EXPECT_EQ(read_file(dir + "/hf.json"), hf);

  fs::copy(kSrc + "/tests/data/megatron/train_llama3_8b_h100_fp8.sh", dir + "/args.sh");
  const auto meg = run_cli({"import", "megatron", dir + "/args.sh", "--out", dir + "/args.sh"});
  EXPECT_EQ(meg.code, 1);
  EXPECT_TRUE(has(meg.err, "--out: is the arguments file")) << meg.err;

  fs::copy(kSrc + "/tests/data/maxtext", dir + "/mx", fs::copy_options::recursive);
  const std::string base = read_file(dir + "/mx/base.yml");
  const auto mx = run_cli({"import", "maxtext", dir + "/mx/gpu/models/llama3_8b.yml", "--out", dir + "/mx/base.yml"});
  EXPECT_EQ(mx.code, 1);
  EXPECT_TRUE(has(mx.err, "--out: is a config the import read")) << mx.err;
  EXPECT_EQ(read_file(dir + "/mx/base.yml"), base);
  for (const char* importer : {"maxtext", "megatron"}) {
    const auto empty = run_cli({"import", importer, dir + "/args.sh", "--out", ""});
    EXPECT_EQ(empty.code, 1) << importer;
    EXPECT_TRUE(has(empty.err, "--out: an empty path: name a file")) << empty.err;
  }

  fs::copy(kSrc + "/scenarios/quickstart.yaml", dir + "/q.yaml");
  write(dir + "/sweep.yaml", "base: q.yaml\nvary:\n  training.micro_batch: [1, 2]\n");
  for (const char* shard : {"0/2", "1/2"})
    ASSERT_EQ(run_cli({"sweep", dir + "/sweep.yaml", "--shard", shard, "--out", dir + "/sh" + shard[0] + ".csv"}).code, 0);
  const std::string sh0 = read_file(dir + "/sh0.csv");
  const auto merge = run_cli({"sweep", dir + "/sweep.yaml", "--merge", dir + "/sh0.csv", dir + "/sh1.csv", "--out", dir + "/sh0.csv"});
  EXPECT_EQ(merge.code, 1);
  EXPECT_TRUE(has(merge.err, "--out: is a CSV --merge reads")) << merge.err;
  EXPECT_EQ(read_file(dir + "/sh0.csv"), sh0);
}

// torchrun's "--nproc_per_node=8" form was not read (1 GPU, with a warning that no count was given), and bad counts
// were truncated, wrapped at 32 bits or dropped.
TEST(InputAudit, TorchrunCountsAreReadInEitherFormOrRefused) {
  const std::string dir = temp_dir("torchrun");
  const std::string tail = " pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                           "--micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16\n";
  write(dir + "/eq.sh", "torchrun --nproc_per_node=8 --nnodes=2" + tail);
  const auto eq = run_cli({"import", "megatron", dir + "/eq.sh", "--system", "h100-sxm"});
  EXPECT_EQ(eq.code, 0) << eq.err;
  EXPECT_TRUE(has(eq.out, "gpus: 16")) << eq.out;
  // The launcher's flags from an unquoted string variable, which bash splits into words (Megatron-LM's own
  // examples/t5/train_t5_220m_distributed.sh): it had been one word, and the job 1 GPU.
  write(dir + "/var.sh", "DISTRIBUTED_ARGS=\"--nproc_per_node 8 --nnodes 4\"\ntorchrun $DISTRIBUTED_ARGS" + tail);
  const auto var = run_cli({"import", "megatron", dir + "/var.sh", "--system", "h100-sxm"});
  EXPECT_EQ(var.code, 0) << var.err;
  EXPECT_TRUE(has(var.out, "gpus: 32")) << var.out;
  for (const char* bad : {"4294967297", "abc", "8.5", "0", "-8", "1:4"}) {
    write(dir + "/bad.sh", "# launch\ntorchrun --nproc_per_node 8 --nnodes " + std::string(bad) + tail);
    const auto r = run_cli({"import", "megatron", dir + "/bad.sh", "--system", "h100-sxm"});
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_EQ(r.err, dir + "/bad.sh:2: error: torchrun --nnodes '" + bad +
                         "': not a count of 1 to 1,048,576; give the job's GPUs with --gpus\n");
    // --gpus says the count: the launcher's is not needed.
    EXPECT_EQ(run_cli({"import", "megatron", dir + "/bad.sh", "--system", "h100-sxm", "--gpus", "16"}).code, 0) << bad;
  }
  // Only the launcher's command is held to it: a script that parses its own --nnodes, or a usage text, is read as before.
  write(dir + "/own.sh", "case $1 in --nnodes) NNODES=\"$2\"; shift 2;; esac\necho \"  --nnodes N   number of nodes\"\n"
                         "torchrun --nproc_per_node ${GPUS:-8} --nnodes ${NNODES:-2}" + tail);
  const auto own = run_cli({"import", "megatron", dir + "/own.sh", "--system", "h100-sxm"});
  EXPECT_EQ(own.code, 0) << own.err;
  EXPECT_TRUE(has(own.out, "gpus: 16")) << own.out;
  // A Megatron log's NUL padding after its arguments block (a killed job's) is not its arguments.
  std::string log = "------------------------ arguments ------------------------\n";
  for (const char* kv : {"num_layers 4", "hidden_size 1024", "num_attention_heads 16", "seq_length 2048", "micro_batch_size 1",
                         "global_batch_size 64", "vocab_size 32000", "world_size 16", "bf16 True"}) {
    const std::string pair = kv;
    log += "  " + pair.substr(0, pair.find(' ')) + " ........................ " + pair.substr(pair.find(' ') + 1) + "\n";
  }
  log += "-------------------- end of arguments ---------------------\n iteration 1 ...\n" + std::string(4096, '\0');
  write(dir + "/train.log", log);
  const auto padded = run_cli({"import", "megatron", dir + "/train.log", "--system", "h100-sxm"});
  EXPECT_EQ(padded.code, 0) << padded.err;
  EXPECT_TRUE(has(padded.out, "gpus: 16")) << padded.out;
}

// A sweep whose base exists but is not a scenario file exited 0 with the same error in every row.
TEST(InputAudit, ASweepsBaseThatCannotBeReadFailsTheSweep) {
  const std::string dir = temp_dir("sweep_base");
  write(dir + "/empty.yaml", "");
  write(dir + "/list.yaml", "[1, 2]\n");
  write(dir + "/a.yaml", "base: empty.yaml\nvary:\n  training.micro_batch: [1, 2]\n");
  write(dir + "/b.yaml", "base: list.yaml\nvary:\n  training.micro_batch: [1, 2]\n");
  write(dir + "/c.yaml", "base: c.yaml\nvary:\n  training.micro_batch: [1, 2]\n");
  const auto a = run_cli({"sweep", dir + "/a.yaml"});
  EXPECT_EQ(a.code, 1);
  EXPECT_EQ(a.err, dir + "/empty.yaml: error: file is empty: expected a mapping of keys\n");
  const auto b = run_cli({"sweep", dir + "/b.yaml"});
  EXPECT_EQ(b.code, 1);
  EXPECT_EQ(b.err, dir + "/b.yaml:1:7: error: base: the base scenario 'list.yaml' is not a mapping of scenario keys (a list)\n");
  const auto c = run_cli({"sweep", dir + "/c.yaml"});
  EXPECT_EQ(c.code, 1);
  EXPECT_TRUE(has(c.err, "c.yaml:1:7: error: base: the base scenario 'c.yaml' is this sweep file")) << c.err;
}

// A damaged dot (a contracting dimension past its operand's rank) was costed as some other GEMM, and a trip count
// that is not a number fell back to the loop condition, both silently; a negative count was "beyond" the bound.
TEST(InputAudit, DamagedHloConfigsAreErrorsAtTheirInstruction) {
  const std::string dir = temp_dir("hlo");
  const std::string gemm = read_file(kSrc + "/tests/fuzz/hlo_corpus/loop_gemm.hlo");
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = gemm;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    return t;
  };
  write(dir + "/dims.hlo", replace("\"lhs_contracting_dimensions\":[\"1\"]", "\"lhs_contracting_dimensions\":[\"7\"]"));
  const auto dims = run_cli({"replay", dir + "/dims.hlo", "--system", "h200-sxm"});
  EXPECT_EQ(dims.code, 1);
  EXPECT_TRUE(has(dims.err, "dims.hlo:30:3: error: HLO: lhs dimension 7 of the dot is outside its operand of rank 2"))
      << dims.err;
  const auto trip = gemm.find("\"known_trip_count\":{\"n\":\"");
  ASSERT_NE(trip, std::string::npos);
  const auto value = trip + std::string("\"known_trip_count\":{\"n\":\"").size();
  const std::string count = gemm.substr(value, gemm.find('"', value) - value);
  for (const auto& [to, message] : {std::pair<std::string, std::string>{"abc", "known_trip_count n is \"abc\", not an integer"},
                                    {"12abc", "known_trip_count n is \"12abc\", not an integer"},
                                    {"-4", "has a negative trip count (-4)"}}) {
    write(dir + "/trip.hlo", replace("\"n\":\"" + count + "\"", "\"n\":\"" + to + "\""));
    const auto r = run_cli({"replay", dir + "/trip.hlo", "--system", "h200-sxm"});
    EXPECT_EQ(r.code, 1) << to;
    EXPECT_TRUE(has(r.err, "trip.hlo:49:3: error: HLO: while loop 'loop'")) << r.err;
    EXPECT_TRUE(has(r.err, message)) << r.err;
  }
}

// The dimension check is the config's: a cuBLAS triangular solve states none and still replays (the review's case).
TEST(InputAudit, CublasCallsWithoutDotDimensionsStillReplay) {
  const std::string dir = temp_dir("trsm");
  write(dir + "/trsm.hlo",
        "HloModule jit_trsm, entry_computation_layout={(f32[4,256,256]{2,1,0}, f32[4,256,64]{2,1,0})->f32[4,256,64]{2,1,0}}\n\n"
        "ENTRY %main (a: f32[4,256,256], b: f32[4,256,64]) -> f32[4,256,64] {\n"
        "  %a = f32[4,256,256]{2,1,0} parameter(0)\n"
        "  %b = f32[4,256,64]{2,1,0} parameter(1)\n"
        "  %custom-call = (f32[4,256,64]{2,1,0}, s8[0]{0}) custom-call(%a, %b), custom_call_target=\"__cublas$triangularSolve\", "
        "backend_config={\"operation_queue_id\":\"0\",\"wait_on_operation_queues\":[],\"triangular_solve_options\":"
        "{\"left_side\":true,\"lower\":true,\"unit_diagonal\":false,\"transpose_a\":\"NO_TRANSPOSE\"}}\n"
        "  ROOT %gte = f32[4,256,64]{2,1,0} get-tuple-element(%custom-call), index=0\n}\n");
  const auto r = run_cli({"replay", dir + "/trsm.hlo", "--system", "h200-sxm"});
  EXPECT_EQ(r.code, 0) << r.err;
}

// --out over the --system preset file an import reads.
TEST(InputAudit, ImportsDoNotOverwriteTheirSystemPresetFile) {
  const std::string dir = temp_dir("system_file");
  fs::copy(kSrc + "/hardware_models/presets/h100-sxm.yaml", dir + "/mysys.yaml");
  const std::string preset = read_file(dir + "/mysys.yaml");
  const auto r = run_cli({"import", "megatron", kSrc + "/tests/data/megatron/train_llama3_8b_h100_fp8.sh", "--system",
                          dir + "/mysys.yaml", "--out", dir + "/mysys.yaml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "--out: is the --system preset file")) << r.err;
  EXPECT_EQ(read_file(dir + "/mysys.yaml"), preset);
}

// An empty system preset surfaced as "training.precision:  () has no bf16 tensor cores".
TEST(InputAudit, AnEmptySystemPresetIsNamedAtItsKey) {
  const std::string dir = temp_dir("preset");
  std::string q = read_file(kSrc + "/scenarios/quickstart.yaml");
  const auto at = q.find("preset: h200-sxm");
  ASSERT_NE(at, std::string::npos);
  q.replace(at, std::string("preset: h200-sxm").size(), "preset: \"\"");
  write(dir + "/q.yaml", q);
  const auto r = run_cli({"run", dir + "/q.yaml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "q.yaml:7:11: error: system.preset: an empty name: name a system preset (available: b200,")) << r.err;
  const auto set = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "system.preset="});
  EXPECT_EQ(set.code, 1);
  EXPECT_TRUE(has(set.err, "system.preset: an empty name")) << set.err;
}

// Validation tolerances: a negative one was "must be between 0 and 1000000" (the cap is 1), and a tolerance map for
// a case that measures only `fits` listed no valid keys.
TEST(InputAudit, ValidationTolerancesSayTheirRange) {
  const std::string dir = temp_dir("validate");
  fs::copy(kSrc + "/scenarios/quickstart.yaml", dir + "/q.yaml");
  auto suite = [&](const std::string& measured, const std::string& tolerance) {
    write(dir + "/v.yaml", "cases:\n  - name: a\n    scenario: q.yaml\n    measured: " + measured + "\n    tolerance: " +
                               tolerance + "\n");
    return run_cli({"validate", dir + "/v.yaml"});
  };
  const auto negative = suite("{step_time_s: 1.0}", "-0.1");
  EXPECT_EQ(negative.code, 1);
  EXPECT_TRUE(has(negative.err, "v.yaml:5:16: error: cases[0].tolerance: a tolerance is a fraction of the measured value "
                                "between 0 and 1 (0.10 is 10%); got -0.1"))
      << negative.err;
  const auto fits_only = suite("{fits: true}", "{fits: 0.1}");
  EXPECT_EQ(fits_only.code, 1);
  EXPECT_TRUE(has(fits_only.err, "cases[0].tolerance: no measured figure to give a tolerance to")) << fits_only.err;
}

// Importers read their files bounded, as the YAML reader does: a directory is said to be one, a device or binary data
// is refused (the HF and Megatron importers had read /dev/zero without bound).
TEST(InputAudit, ImportersReadTheirFilesBounded) {
  const std::string dir = temp_dir("import_files");
  EXPECT_EQ(run_cli({"models", "import", dir}).err, dir + ": error: is a directory; expected a JSON file\n");
  EXPECT_EQ(run_cli({"import", "megatron", dir}).err, dir + ": error: is a directory; expected a launch script, argument list or Megatron log\n");
  EXPECT_EQ(run_cli({"import", "maxtext", dir}).err, dir + ": error: is a directory; expected a MaxText YAML config\n");
  write(dir + "/nul.sh", std::string("--num-layers 4\n--hidden-size 8\0\n", 32));
  const auto nul = run_cli({"import", "megatron", dir + "/nul.sh"});
  EXPECT_EQ(nul.code, 1);
  EXPECT_EQ(nul.err, dir + "/nul.sh:2: error: binary data (a NUL byte): expected a launch script, argument list or Megatron log\n");
}

// nccl-tests' -J JSON skipped the text reader's checks: a device other than the base preset's, a time that disagrees with
// its bandwidth (x1000: a calibration 130 times too slow, exit 0), nwrong != 0; and a non-numeric ngpus was an internal
// error (exit 2). A second audit of 2026-12-06.
TEST(InputAudit, NcclTestsJsonIsCheckedAsTheTextLogIs) {
  const std::string dir = temp_dir("nccl_json");
  const std::string src = read_file(kSrc + "/tests/data/nccl-tests-formats/alltoall.json");
  auto edited = [&](const std::string& name, const std::string& from, const std::string& to, bool all) {
    std::string t = src;
    for (auto at = t.find(from); at != std::string::npos; at = all ? t.find(from, at + to.size()) : std::string::npos)
      t.replace(at, from.size(), to);
    fs::create_directories(dir + "/" + name);
    write(dir + "/" + name + "/alltoall.json", t);
    return dir + "/" + name + "/alltoall.json";
  };
  edited("device", "\"SYNTHETIC GPU\"", "\"NVIDIA A100-SXM4-80GB\"", true);
  const auto fit = run_cli({"calibrate", "fit", "--from", dir + "/device", "--base", "h200-sxm", "--out", dir + "/c.yaml"});
  EXPECT_EQ(fit.code, 1);
  EXPECT_TRUE(has(fit.err, "the device measured is 'NVIDIA A100-SXM4-80GB', the base preset h200-sxm is")) << fit.err;
  const auto slow = run_cli({"calibrate", "read", edited("time", "\"time\": 35.006827", "\"time\": 35006.827", false)});
  EXPECT_EQ(slow.code, 1);
  EXPECT_TRUE(has(slow.err, "nccl-tests JSON row of 1024 bytes: time 35006.8") && has(slow.err, "the fields disagree")) << slow.err;
  const auto wrong = run_cli({"calibrate", "read", edited("wrong", "\"nwrong\": 0", "\"nwrong\": 7", false)});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_TRUE(has(wrong.err, "has nwrong = 7")) << wrong.err;
  std::string no_devices = src;
  const auto d0 = no_devices.find("\"devices\": [");
  ASSERT_NE(d0, std::string::npos);
  no_devices.replace(d0, no_devices.find(']', d0) + 1 - d0, "\"devices\": []");
  const auto gpus_at = no_devices.find("\"ngpus\": 8");
  ASSERT_NE(gpus_at, std::string::npos);
  no_devices.replace(gpus_at, std::string("\"ngpus\": 8").size(), "\"ngpus\": \"eight\"");
  write(dir + "/ngpus.json", no_devices);
  const auto ngpus = run_cli({"calibrate", "read", dir + "/ngpus.json"});
  EXPECT_EQ(ngpus.code, 1);
  EXPECT_TRUE(has(ngpus.err, "ngpus.json: error: nccl-tests JSON: 'ngpus' is not a number: \"eight\"")) << ngpus.err;
}

// A FIFO with no writer held open() forever; a trace named .JSON.GZ was written uncompressed.
TEST(InputAudit, FifosWithoutAWriterAndUpperCaseGzipNames) {
  const std::string dir = temp_dir("fifo");
  ASSERT_EQ(::mkfifo((dir + "/ff.log").c_str(), 0600), 0);
  const auto r = run_cli({"calibrate", "read", dir + "/ff.log"});
  EXPECT_EQ(r.code, 1);
  ASSERT_EQ(run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--trace", dir + "/t.JSON.GZ"}).code, 0);
  const std::string gz = read_file(dir + "/t.JSON.GZ");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
}

// --set overrides are bounded (16,000 distinct keys had taken 17 s, quadratic in their number).
TEST(InputAudit, SetOverridesAreBounded) {
  std::vector<std::string> args = {"run", kSrc + "/scenarios/quickstart.yaml"};
  for (int i = 0; i <= 1000; ++i) args.insert(args.end(), {"--set", "training.k" + std::to_string(i) + "=1"});
  const auto r = run_cli(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "--set: error: 1001 overrides, more than racksim's bound of 1000 (docs/decisions.md, \"Input limits\"): "
                   "put them in a scenario file\n");
}

// YAML text that does not come from a file (a Python dict scenario) is held to the file's 16 MiB bound.
TEST(InputAudit, YamlTextIsBoundedAsAFileIs) {
  const std::string big = "name: x\njunk: '" + std::string((std::size_t{16} << 20) + 1, 'y') + "'\n";
  try {
    (void)racksim::sim::load_scenario_text(big, "<scenario dict>");
    ADD_FAILURE() << "accepted";
  } catch (const racksim::input::InputError& e) {
    EXPECT_TRUE(has(e.what(), "<scenario dict>: error: too large for a YAML text: ")) << e.what();
  }
}

// Errors inside a file a scenario names carry that file's location; one more names the key that named it.
TEST(InputAudit, ErrorsInANamedFileNameTheKeyThatNamedIt) {
  const std::string dir = temp_dir("named_file");
  write(dir + "/bad.yaml", "a: [\n");
  std::string q = read_file(kSrc + "/scenarios/quickstart.yaml");
  const auto at = q.find("preset: llama3-8b");
  ASSERT_NE(at, std::string::npos);
  q.replace(at, std::string("preset: llama3-8b").size(), "preset: " + dir + "/bad.yaml");
  write(dir + "/q.yaml", q);
  const auto r = run_cli({"run", dir + "/q.yaml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, dir + "/bad.yaml:2:1: error: malformed YAML")) << r.err;
  EXPECT_TRUE(has(r.err, dir + "/q.yaml:10:11: error: model.preset: the model file it names has errors (above)")) << r.err;
  const auto c = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "system.calibration=" + dir + "/bad.yaml"});
  EXPECT_EQ(c.code, 1);
  EXPECT_TRUE(has(c.err, "system.calibration: the calibration file it names has errors (above)")) << c.err;
}

// A second pass (2026-12-07, about 420 adversarial inputs): no crash or hang, but these answers were silently wrong.
// Launch scripts: shell arithmetic as bash reads it, division by 0 refused; a variable set on two branches of one if
// said; a Megatron log's world_size held to a count.
TEST(InputAudit, LaunchScriptArithmeticBranchesAndWorldSize) {
  const std::string dir = temp_dir("shell2");
  const std::string& tail = kGptArgsAfterLayers;
  auto layers = [&](const std::string& expr) {
    write(dir + "/a.sh", "X=0\nY=1+2\npython pretrain_gpt.py --num-layers " + expr + tail);
    return run_cli({"import", "megatron", dir + "/a.sh", "--system", "h100-sxm", "--gpus", "8"});
  };
  // Parentheses, %, **, a variable holding an expression (bash reads Y=1+2 as 3 inside $((Y*8))), a unary sign
  // before ** (bash: -2**2 is 4).
  for (const auto& [expr, want] : std::vector<std::pair<std::string, std::string>>{
           {"$(( (1+1)*16 ))", "layers: 32"}, {"$((Y*8))", "layers: 24"}, {"$((100 % 34))", "layers: 32"},
           {"$((2**5))", "layers: 32"}, {"$((-2**2+36))", "layers: 40"}}) {
    const auto r = layers(expr);
    EXPECT_EQ(r.code, 0) << expr << r.err;
    EXPECT_TRUE(has(r.out, want)) << expr << r.out;
  }
  // $((32 + 1/0)) had read as 32; $((1024/X)) as 0.
  for (const auto& [expr, why] : std::vector<std::pair<std::string, std::string>>{
           {"$((32 + 1/0))", "division by 0"}, {"$((1024/X))", "division by 0"}, {"$((2**62*4))", "the result passes 64 bits"}}) {
    const auto r = layers(expr);
    EXPECT_EQ(r.code, 1) << expr;
    EXPECT_EQ(r.err, dir + "/a.sh:3:1: error: " + expr + ": " + why + "\n");
  }
  // What racksim does not evaluate stays as written, so the flag's error shows it.
  EXPECT_TRUE(has(layers("$((i++))").err, "got '$((i++))'"));
  // An if/else: racksim reads both branches and keeps the last, now saying so.
  write(dir + "/if.sh", "MODEL=big\nif [ \"$MODEL\" == \"big\" ]; then\n  TP=8\nelse\n  TP=1\nfi\n"
                        "python pretrain_gpt.py --num-layers 4 --tensor-model-parallel-size $TP" + tail);
  const auto branch = run_cli({"import", "megatron", dir + "/if.sh", "--system", "h100-sxm", "--gpus", "8"});
  EXPECT_EQ(branch.code, 0) << branch.err;
  EXPECT_TRUE(has(branch.err, "TP is set on two branches of the if at line 2 ('8' at line 3, '1' at line 5): racksim "
                              "cannot tell which the run took, reads every branch and keeps the last"))
      << branch.err;
  // The same value on both branches, or one branch alone, is nothing to say.
  write(dir + "/if1.sh", "if [ -n \"$X\" ]; then TP=2; else TP=2; fi\nif [ -n \"$Y\" ]; then PP=1; fi\n"
                         "python pretrain_gpt.py --num-layers 4 --tensor-model-parallel-size $TP" + tail);
  EXPECT_FALSE(has(run_cli({"import", "megatron", dir + "/if1.sh", "--system", "h100-sxm", "--gpus", "8"}).err,
                   "two branches"));
  // world_size: 4294967304 had wrapped to 8, 8.9 read as 8, -8 and abc as no count.
  for (const char* bad : {"4294967304", "8.9", "-8", "abc", "99999999999"}) {
    std::string log = "------------------------ arguments ------------------------\n";
    for (const std::string kv : {"num_layers 4", "hidden_size 1024", "num_attention_heads 16", "seq_length 2048",
                                 "micro_batch_size 1", "global_batch_size 64", "vocab_size 32000", "bf16 True"})
      log += "  " + kv.substr(0, kv.find(' ')) + " ........................ " + kv.substr(kv.find(' ') + 1) + "\n";
    log += "  world_size ........................ " + std::string(bad) + "\n";
    log += "-------------------- end of arguments ---------------------\n";
    write(dir + "/train.log", log);
    const auto r = run_cli({"import", "megatron", dir + "/train.log", "--system", "h100-sxm"});
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_EQ(r.err, dir + "/train.log:10: error: world_size '" + std::string(bad) +
                         "': not a count of 1 to 1,048,576; give the job's GPUs with --gpus\n");
  }
}

// collective --bytes 0.1B had timed a tenth of a byte; validate took mfu 51.1 (a percentage) and failed the case at
// -99%; a MoE model whose every layer is dense ran its scenario with ep 64 and routing warnings.
TEST(InputAudit, FractionalBytesPercentMfuAndAMoeModelWithoutMoeLayers) {
  const std::string dir = temp_dir("pass2");
  const auto frac = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8", "--op", "all_reduce", "--bytes", "0.1B"});
  EXPECT_EQ(frac.code, 1);
  EXPECT_EQ(frac.err, "--bytes: error: 0.1B is 0.1 bytes: a collective moves whole bytes\n");
  const auto g = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8", "--op", "all_reduce", "--bytes", "1G"});
  EXPECT_EQ(g.code, 1);
  EXPECT_EQ(g.err, "--bytes: error: '1G': --bytes takes a size with its unit: 1GiB (what nccl-tests' 1G, which -b and -e "
                   "read, means) or 1GB\n");
  // -e that does not parse is one error, not also "smaller than -b".
  const auto e = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8", "--op", "all_reduce", "-b", "8", "-e", "1P"});
  EXPECT_EQ(e.code, 1);
  EXPECT_FALSE(has(e.err, "smaller than -b")) << e.err;

  write(dir + "/suite.yaml", "cases:\n  - name: q\n    scenario: " + kSrc + "/scenarios/quickstart.yaml\n"
                             "    measured: {mfu: 51.1}\n    tolerance: 0.1\n");
  const auto v = run_cli({"validate", dir + "/suite.yaml"});
  EXPECT_EQ(v.code, 1);
  EXPECT_EQ(v.err, dir + "/suite.yaml:4:21: error: cases[0].measured.mfu: mfu is a fraction of the peak (0.511 for "
                   "51.1%), at most 1; got '51.1'\n");

  std::string model = read_file(kSrc + "/workloads/models/deepseek-v3.yaml");
  const auto at = model.find("first_dense_layers:");
  ASSERT_NE(at, std::string::npos);
  model.replace(at, model.find('\n', at) - at, "first_dense_layers: 61");
  write(dir + "/dense.yaml", model);
  write(dir + "/s.yaml", "name: s\nsystem: {preset: gb200-nvl72, gpus: 64}\nmodel: {preset: dense.yaml}\n"
                         "training: {seq_len: 4096, global_batch: 64, micro_batch: 1, precision: bf16, "
                         "parallelism: {tp: 1, pp: 1, cp: 1, ep: 64, dp: auto}}\n");
  const auto m = run_cli({"run", dir + "/s.yaml"});
  EXPECT_EQ(m.code, 1);
  EXPECT_TRUE(has(m.err, "first_dense_layers (61) equals layers: no layer is a mixture of experts; leave moe out for a "
                         "dense model"))
      << m.err;
}

// sweep --merge had taken a shard's damaged figures: 'abc' became an empty cell, 'NaN' and -5 were written through.
TEST(InputAudit, MergedShardsHoldReportFiguresOnly) {
  const std::string dir = temp_dir("merge_figures");
  fs::copy(kSrc + "/scenarios/quickstart.yaml", dir + "/q.yaml");
  write(dir + "/sweep.yaml", "base: q.yaml\nvary:\n  training.micro_batch: [1, 2]\n");
  for (const char* shard : {"0/2", "1/2"})
    ASSERT_EQ(run_cli({"sweep", dir + "/sweep.yaml", "--shard", shard, "--out", dir + "/sh" + shard[0] + ".csv"}).code, 0);
  const std::string good = read_file(dir + "/sh0.csv");
  EXPECT_EQ(run_cli({"sweep", dir + "/sweep.yaml", "--merge", dir + "/sh0.csv", dir + "/sh1.csv"}).code, 0);
  // The second line's step_time_s (column 3: point, the one varied key, then the report's figures).
  const std::size_t row = good.find('\n') + 1;
  const std::size_t c1 = good.find(',', row), c2 = good.find(',', c1 + 1), c3 = good.find(',', c2 + 1);
  for (const char* bad : {"abc", "NaN", "-5", "inf"}) {
    write(dir + "/sh0.csv", good.substr(0, c2 + 1) + bad + good.substr(c3));
    const auto r = run_cli({"sweep", dir + "/sweep.yaml", "--merge", dir + "/sh0.csv", dir + "/sh1.csv"});
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_EQ(r.err, dir + "/sh0.csv:2: error: column 3 (step_time_s): '" + bad +
                         "' is not a report figure (a finite number, not negative)\n");
  }
  // A point that ran says true or false in `fits` (a red-team pass, 2026-12-07: TRUE or maybe became an empty cell).
  const std::size_t fits = good.find(",true,", row);
  ASSERT_NE(fits, std::string::npos);
  const std::size_t fits_column = 2 + std::count(good.begin() + row, good.begin() + fits, ',');
  for (const char* bad : {"TRUE", "maybe", ""}) {
    write(dir + "/sh0.csv", good.substr(0, fits + 1) + bad + good.substr(fits + 5));
    const auto r = run_cli({"sweep", dir + "/sweep.yaml", "--merge", dir + "/sh0.csv", dir + "/sh1.csv"});
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_EQ(r.err, dir + "/sh0.csv:2: error: column " + std::to_string(fits_column) + " (fits): '" + bad +
                         "' is not true or false\n");
  }
}

// Messages the second pass found unclear: an empty path or name, a folder named as a model file, two cases of one name,
// the suggestion for a preset's short name, and a command-line --set located as if it were a file (":1:1").
TEST(InputAudit, EmptyNamesFoldersTwinCasesAndSuggestionsAreSaidPlainly) {
  const std::string dir = temp_dir("messages2");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"run", ""}, {"validate", ""}, {"sweep", ""}}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_TRUE(has(r.err, ": an empty path: name a file")) << r.err;
  }
  for (const char* what : {"hw", "models"}) {
    const auto r = run_cli({what, "show", ""});
    EXPECT_EQ(r.code, 1) << what;
    EXPECT_TRUE(has(r.err, "an empty name: name a preset")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;  // (it had printed the whole list)
  }
  fs::create_directories(dir + "/m.yaml");
  write(dir + "/s.yaml", "name: s\nsystem: {preset: h200-sxm, gpus: 8}\nmodel: {preset: m.yaml}\n"
                         "training: {seq_len: 8192, global_batch: 128, micro_batch: 1, precision: bf16, "
                         "parallelism: {tp: 1, pp: 1, cp: 1, dp: auto}}\n");
  const auto folder = run_cli({"run", dir + "/s.yaml"});
  EXPECT_EQ(folder.code, 1);
  EXPECT_TRUE(has(folder.err, "s.yaml:3:17: error: model.preset: model file '" + dir + "/m.yaml' is a directory: name "
                              "the model YAML file in it"))
      << folder.err;
  write(dir + "/suite.yaml", "cases:\n  - name: a\n    scenario: " + kSrc + "/scenarios/quickstart.yaml\n"
                             "    measured: {step_time_s: 1.0}\n    tolerance: 0.1\n  - name: a\n    scenario: " + kSrc +
                             "/scenarios/quickstart.yaml\n    measured: {step_time_s: 2.0}\n    tolerance: 0.1\n");
  const auto twins = run_cli({"validate", dir + "/suite.yaml"});
  EXPECT_EQ(twins.code, 1);
  EXPECT_EQ(twins.err, dir + "/suite.yaml:6:11: error: cases[1].name: a case named 'a' is at line 2: give each case its "
                       "own name\n");
  const auto h100 = run_cli({"hw", "show", "h100"});
  EXPECT_EQ(h100.code, 1);
  EXPECT_TRUE(has(h100.err, "unknown system preset 'h100'; did you mean 'h100-sxm'?")) << h100.err;
  // A key path of 120 KB had been echoed three times (240 KB of stderr).
  const auto huge = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "training." + std::string(120000, 'a') + "=1"});
  EXPECT_EQ(huge.code, 1);
  EXPECT_LT(huge.err.size(), 400u);
  EXPECT_TRUE(has(huge.err, "a key path of 120009 characters: no scenario key is longer than 512")) << huge.err;
  const auto set = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "system.overrides.gpu.tdp=-1 W"});
  EXPECT_EQ(set.code, 1);
  EXPECT_TRUE(has(set.err, "--set system.overrides.gpu.tdp=-1 W: error: ")) << set.err;
}

// models import: an unknown model_type's missing keys now say why they are missing (gpt2 names its layers n_layer); an
// invalid imported model is named as the imported model, with its text, where its line numbers had been given under
// the config's name.
TEST(InputAudit, HfImportErrorsNameWhatTheyAreAbout) {
  const std::string dir = temp_dir("hf2");
  write(dir + "/gpt2.json", "{\"model_type\": \"gpt2\", \"n_layer\": 12, \"n_embd\": 768, \"n_head\": 12, \"vocab_size\": 50257}\n");
  const auto g = run_cli({"models", "import", dir + "/gpt2.json"});
  EXPECT_EQ(g.code, 1);
  EXPECT_TRUE(has(g.err, "num_hidden_layers: missing: this key is needed for the model (model_type 'gpt2' is not one "
                         "racksim knows: it reads the Llama-style keys of llama"))
      << g.err;
  std::string ds = read_file(kSrc + "/tests/data/hf/deepseek-v3.json");
  const auto at = ds.find("\"first_k_dense_replace\": 3");
  ASSERT_NE(at, std::string::npos);
  ds.replace(at, std::string("\"first_k_dense_replace\": 3").size(), "\"first_k_dense_replace\": 100");
  write(dir + "/ds.json", ds);
  const auto d = run_cli({"models", "import", dir + "/ds.json"});
  EXPECT_EQ(d.code, 1);
  EXPECT_TRUE(has(d.err, dir + "/ds.json: error: the imported model is not valid:\n" + dir +
                             "/ds.json (imported model):")) << d.err;
  EXPECT_TRUE(has(d.err, "first_dense_layers (100) exceeds layers (61)\n--- the model:\n")) << d.err;
}

// --fp8-format with --fp4-format had been imported as NVFP4 with "--fp8-format hybrid: not an argument racksim knows";
// Megatron-LM refuses the pair. And import's --gpus takes what a scenario takes (its help had said 10,000,000).
TEST(InputAudit, Fp8AndFp4FormatsTogetherAreRefusedAsMegatronRefusesThem) {
  const std::string dir = temp_dir("fp4fp8");
  write(dir + "/a.sh", "python pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                       "--micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16 --fp8-format hybrid "
                       "--fp4-format e2m1\n");
  const auto r = run_cli({"import", "megatron", dir + "/a.sh", "--system", "b200", "--gpus", "8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, dir + "/a.sh:1:1: error: --fp8-format: --fp4-format and --fp8-format together: Megatron-LM refuses the "
                         "pair (choose one)\n");
  const auto g = run_cli({"import", "megatron", dir + "/a.sh", "--system", "b200", "--gpus", "2000000"});
  EXPECT_EQ(g.code, 1);
  EXPECT_TRUE(has(g.err, "--gpus: Value 2000000 not in range 1 to 1048576")) << g.err;
}

// --bf16 with --fp16 had been imported as bf16 with "--fp16: not an argument racksim knows" (a new user's probe,
// 2026-12-07); Megatron-LM refuses the pair (arguments.py: with fp16, `assert not args.bf16`).
TEST(InputAudit, Bf16AndFp16TogetherAreRefusedAsMegatronRefusesThem) {
  const std::string dir = temp_dir("bf16fp16");
  write(dir + "/a.txt", "--num-layers 4\n--hidden-size 1024\n--num-attention-heads 16\n--seq-length 2048\n"
                        "--micro-batch-size 1\n--global-batch-size 64\n--vocab-size 32000\n--fp16\n--bf16\n");
  const auto r = run_cli({"import", "megatron", dir + "/a.txt", "--system", "h200-sxm", "--gpus", "8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, dir + "/a.txt:8:1: error: --fp16: --bf16 and --fp16 together: Megatron-LM refuses the pair (choose "
                         "one)\n");
}

// A flag inside a "\"-continued command is reported at its own line (it had the command's first line: a probe's
// unknown flag on line 11 said line 3); a flag a variable expands to keeps the command's line.
TEST(InputAudit, ContinuedCommandsNameEachFlagsOwnLine) {
  const std::string dir = temp_dir("contlines");
  write(dir + "/a.sh", "#!/bin/bash\nX=\"--bogus-var 1\"\ntorchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
                       "  --num-layers 4 --hidden-size 1024 --num-attention-heads 16 \\\n"
                       "  --seq-length 2048 --micro-batch-size 1 --global-batch-size 64 \\\n"
                       "  --vocab-size 32000 --bf16 $X \\\n"
                       "  --bogus-flag 7 \\\n"
                       "  --num-layers-bogus 3\n");
  const auto r = run_cli({"import", "megatron", dir + "/a.sh", "--system", "h200-sxm"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "--bogus-flag 7 (line 7): not an argument racksim knows")) << r.err;
  EXPECT_TRUE(has(r.err, "--num-layers-bogus 3 (line 8): not an argument racksim knows")) << r.err;
  EXPECT_TRUE(has(r.err, "--bogus-var 1 (line 3): not an argument racksim knows")) << r.err;  // from $X
  // A flag a variable gives and the script also writes is ambiguous: both keep the command's line, and the flags between
  // keep theirs (a review found them all sent to the first line); CRLF line ends and a flag before ';' are found.
  write(dir + "/b.sh", "EXTRA=\"--lr 1e-4\"\r\ntorchrun --nproc_per_node 8 pretrain_gpt.py $EXTRA \\\r\n"
                       "  --num-layers 4 --hidden-size 1024 --num-attention-heads 16 \\\r\n"
                       "  --bogus-flag 7 \\\r\n"
                       "  --seq-length 2048 --micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16 \\\r\n"
                       "  --lr 3e-4 --bogus-end 1;\r\n");
  const auto b = run_cli({"import", "megatron", dir + "/b.sh", "--system", "h200-sxm"});
  EXPECT_EQ(b.code, 0) << b.err;
  EXPECT_TRUE(has(b.err, "--bogus-flag 7 (line 4): not an argument racksim knows")) << b.err;
  EXPECT_TRUE(has(b.err, "--bogus-end 1 (line 6): not an argument racksim knows")) << b.err;
}

// A review of the pass above: an sbatch script's unset Slurm variables are 0 where racksim reads the script, so a
// division by one of them is not the script's error (it had stopped the import); "))" closing nested parentheses; bash's
// octal and hex constants, ${VAR:-default} and a name naming a name inside $((...)); ++X left as written; a set inside a
// nested if, and `else if`, seen on every enclosing if.
TEST(InputAudit, LaunchScriptArithmeticAsBashReadsIt) {
  const std::string dir = temp_dir("shell3");
  const std::string& tail = kGptArgsAfterLayers;
  write(dir + "/slurm.sh", "export GPUS_PER_NODE=$((SLURM_NTASKS / SLURM_JOB_NUM_NODES))\n"
                           "python pretrain_gpt.py --num-layers 4" + tail);
  const auto slurm = run_cli({"import", "megatron", dir + "/slurm.sh", "--system", "h100-sxm", "--gpus", "16"});
  EXPECT_EQ(slurm.code, 0) << slurm.err;
  // Each against bash's own value (bash -c 'A=2; B=A; X=5; Y=1+2; GBS=1024; MBS=2; DP=8; echo EXPR').
  for (const auto& [expr, bash] : std::vector<std::pair<std::string, std::string>>{
           {"$((2*(3+4)))", "14"}, {"$((GBS/(MBS*DP)))", "64"}, {"$((-(-3)))", "3"}, {"$((${TP:-4}*2))", "8"},
           {"$((010))", "8"}, {"$((0x10))", "16"}, {"$((B*3))", "6"}, {"$(($Y*8))", "17"}, {"$((Y*8))", "24"},
           {"$((2**3**2))", "512"}, {"$((-7/2+10))", "7"}, {"$((-7%3+5))", "4"}}) {
    write(dir + "/a.sh", "A=2\nB=A\nX=5\nY=1+2\nGBS=1024\nMBS=2\nDP=8\npython pretrain_gpt.py --num-layers 4 --seed " +
                             expr + tail);
    const auto r = run_cli({"import", "megatron", dir + "/a.sh", "--system", "h100-sxm", "--gpus", "8"});
    EXPECT_EQ(r.code, 0) << expr << r.err;
    EXPECT_TRUE(has(r.out, "--seed " + bash + ";")) << expr << "\n" << r.out;
  }
  for (const std::string expr : {"$((--X))", "$((++X))", "$((08))"}) {  // bash: 4, 6, an error; racksim: as written
    write(dir + "/a.sh", "X=5\npython pretrain_gpt.py --num-layers 4 --seed " + expr + tail);
    const auto r = run_cli({"import", "megatron", dir + "/a.sh", "--system", "h100-sxm", "--gpus", "8"});
    EXPECT_TRUE(has(r.out, "--seed " + expr + ";")) << expr << "\n" << r.out;
  }
  write(dir + "/nest.sh", "if [ \"$A\" ]; then\n  if [ \"$B\" ]; then\n    TP=8\n  fi\nelse\n  TP=4\nfi\n"
                          "if [ \"$C\" ]; then PP=1; else if [ \"$D\" ]; then PP=2; fi; fi\n"
                          "python pretrain_gpt.py --num-layers 4 --tensor-model-parallel-size $TP" + tail);
  const auto nest = run_cli({"import", "megatron", dir + "/nest.sh", "--system", "h100-sxm", "--gpus", "8"});
  EXPECT_EQ(nest.code, 0) << nest.err;
  EXPECT_TRUE(has(nest.err, "TP is set on two branches of the if at line 1 ('8' at line 3, '4' at line 6)")) << nest.err;
  EXPECT_TRUE(has(nest.err, "PP is set on two branches of the if at line 8")) << nest.err;
  // A case block: before, every branch was read and the last set TP without a word (a 7b script imported as 70b's
  // TP8). With its word known, bash's branch is taken: the first match, glob and '|' patterns, one-line or not, nested
  // blocks in the branches not taken skipped; with an unset word, every branch is read and the two-branch warning given.
  const std::string cases = "case \"$SIZE\" in\n  7b|8b)\n    TP=2\n    if [ \"$X\" ]; then TP=1; fi\n    ;;\n"
                            "  70b) TP=8; case $A in x) PP=9;; esac ;;\n  *) TP=4 ;;\nesac\n"
                            "python pretrain_gpt.py --num-layers 4 --tensor-model-parallel-size $TP" + tail;
  for (const auto& [size, tp] : std::vector<std::pair<std::string, std::string>>{{"SIZE=8b\n", "--tensor-model-parallel-size 1"},
                                                                                {"SIZE=70b\n", "--tensor-model-parallel-size 8"},
                                                                                {"SIZE=13b\n", "--tensor-model-parallel-size 4"}}) {
    write(dir + "/case.sh", size + cases);
    const auto r = run_cli({"import", "megatron", dir + "/case.sh", "--system", "h100-sxm", "--gpus", "8"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "# " + tp + "\n")) << size << r.out;
    EXPECT_FALSE(has(r.err, "two branches of the case")) << size << r.err;
  }
  write(dir + "/case.sh", cases);
  const auto unknown = run_cli({"import", "megatron", dir + "/case.sh", "--system", "h100-sxm", "--gpus", "8"});
  EXPECT_TRUE(has(unknown.err, "TP is set on two branches of the case at line 1 ('1' at line 4, '8' at line 6): racksim "
                               "cannot tell which the run took")) << unknown.err;
}

// The same review: a command-line --set's warnings and its system.overrides errors had kept a place it does not have
// (":0:0", ":1:1"); a two-letter key had been offered a longer key it begins ("tp" -> tp_comm_overlap).
TEST(InputAudit, CommandLineSetsHaveNoLineAnywhere) {
  const auto alias = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "training.recompute=dots_saveable"});
  EXPECT_EQ(alias.code, 0) << alias.err;
  EXPECT_TRUE(has(alias.err, "warning: --set training.recompute=dots_saveable: training.recompute: 'dots_saveable' is "
                             "modelled as"))
      << alias.err;
  for (const char* set : {"system.overrides.gpu.bogus=1", "system.overrides.bf16=1"}) {
    const auto r = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", set});
    EXPECT_EQ(r.code, 1) << set;
    EXPECT_TRUE(r.err.starts_with(std::string("--set ") + set + ": error: ")) << r.err;
  }
  const auto tp = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "training.tp=2"});
  EXPECT_EQ(tp.code, 1);
  EXPECT_FALSE(has(tp.err, "did you mean 'tp_comm_overlap'")) << tp.err;
  const auto gb = run_cli({"hw", "show", "gb200"});
  EXPECT_TRUE(has(gb.err, "did you mean 'gb200-nvl72'?")) << gb.err;
}

// Found by the importers' fuzzer (test_fuzz_importers.cpp, 2026-12-07): a config.json number past a double's range
// was an internal error (exit 2, nlohmann's out_of_range); a line break in a config's architecture name ended the
// model file's comment and was read as YAML; a byte that is not UTF-8 in a launch script's flag value or in its file's
// name made the importer's own scenario fail to load (a Latin-1 name was an internal error: nlohmann's dump threw).
TEST(InputAudit, ImportersWriteLoadableFilesWhateverBytesTheirInputHolds) {
  const std::string dir = temp_dir("import_bytes");
  write(dir + "/big.json", "{\"model_type\": \"llama\", \"vocab_size\": 1e400}");
  const auto big = run_cli({"models", "import", dir + "/big.json"});
  EXPECT_EQ(big.code, 1) << big.err;
  EXPECT_TRUE(has(big.err, dir + "/big.json:1:39: error: the number 1e400 is out of range (beyond a double's)")) << big.err;

  std::ifstream in(kSrc + "/tests/data/hf/qwen3-8b.json");
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto arch = cfg.find("Qwen3ForCausalLM");
  ASSERT_NE(arch, std::string::npos);
  write(dir + "/nl.json", cfg.substr(0, arch) + "Qwen3\\nlayers: 1" + cfg.substr(arch + 16));
  const auto nl = run_cli({"models", "import", dir + "/nl.json", "--out", dir + "/nl.yaml"});
  EXPECT_EQ(nl.code, 0) << nl.err;
  std::ifstream m(dir + "/nl.yaml");
  std::string model((std::istreambuf_iterator<char>(m)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(model, "architectures Qwen3\\x0alayers: 1). Each field's source")) << model;

  const std::string latin1 = dir + "/caf\xe9.sh";
  write(latin1, "python pretrain_gpt.py --lr 1e-4\xe9 --num-layers 4" + kGptArgsAfterLayers);
  const auto sh = run_cli({"import", "megatron", latin1, "--system", "h100-sxm", "--gpus", "8", "--out", dir + "/s.yaml"});
  EXPECT_EQ(sh.code, 0) << sh.err;
  const auto run = run_cli({"run", dir + "/s.yaml"});
  EXPECT_EQ(run.code, 0) << run.err;
  std::ifstream s(dir + "/s.yaml");
  std::string scenario((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(scenario, "--lr 1e-4\\xe9;")) << scenario;
  EXPECT_TRUE(has(scenario, "name: \"caf\xef\xbf\xbd\"")) << scenario;  // U+FFFD for the name's 0xE9
}

// A review of the case reading (2026-12-07) found it taking branches bash would not: a word copied from $1 or from a
// command's output read as known, a multi-line array's closing ')' read as a pattern, `$A)` and `7b | 8b)` patterns
// missed, quoted glob characters and `${X#pat}` misread, `;&` / `;;&` ignored, a case inside a one-line if missed,
// `in` on the next line missed, and an unclosed case swallowing the script. Each expectation is what bash does
// (checked with bash 5), or, where the word cannot be told, every branch read with the two-branch warning.
TEST(InputAudit, LaunchScriptCaseBlocksAsBashReadsThem) {
  const std::string dir = temp_dir("case");
  struct Case {
    std::string body;
    int tp, pp;
    bool untold;  // read like an if: the two-branch warning
  };
  const std::vector<Case> cases = {
      {"M=$1\ncase $M in 7b) TP=2; PP=1 ;; 70b) TP=8; PP=2 ;; *) TP=1; PP=1 ;; esac\n", 1, 1, true},
      {"N=${SLURM_NNODES}\ncase $N in 1) TP=8; PP=1 ;; *) TP=8; PP=4 ;; esac\n", 8, 4, true},
      {"case \"$(echo 70b)\" in 70b) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 4, 4, true},
      {"H=`hostname`\ncase $H in *dgx*) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 4, 4, true},
      {"case $# in 0) TP=1; PP=1 ;; *) TP=4; PP=4 ;; esac\n", 4, 4, true},
      {"S=7b\ncase $S in\n  7b)\n    EXTRA=(\n      --use-distributed-optimizer\n    )\n    TP=2; PP=1 ;;\n"
       "  *) TP=4; PP=4 ;;\nesac\n",
       2, 1, false},
      {"A=7b\ncase 7b in $A) TP=2; PP=1 ;; *) TP=4; PP=4 ;; esac\n", 2, 1, false},
      {"P='7*'\ncase 70b in $P) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 8, 2, false},
      {"M=llama-70b\ncase ${M#*-} in 7b) TP=2; PP=1 ;; 70b) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 8, 2, false},
      {"M=llama-70b-v2\ncase ${M%-*} in llama-70b) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 8, 2, false},
      {"S=70B\ncase ${S,,} in 70b) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 8, 2, false},
      {"M=llama-70b\ncase ${M: -3} in 70b) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 8, 2, false},
      {"M=llama-70b\ncase ${M:0:5} in llama) TP=2; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 2, 2, false},
      {"M=llama_70b_x\ncase ${M//_/-} in llama-70b-x) TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 8, 2, false},
      {"case 8b in \"*\") TP=2; PP=1 ;; *) TP=4; PP=2 ;; esac\n", 4, 2, false},
      {"case 8b in \"7b|8b\") TP=8; PP=2 ;; *) TP=4; PP=4 ;; esac\n", 4, 4, false},
      {"case 8b in 7b | 8b) TP=2; PP=1 ;; *) TP=4; PP=4 ;; esac\n", 2, 1, false},
      {"case 8b in\n  8b )\n    TP=2; PP=1 ;;\n  * ) TP=4; PP=4 ;;\nesac\n", 2, 1, false},
      {"PP=1\ncase 7b in 7b) TP=2 ;& 70b) PP=4 ;; *) PP=8 ;; esac\n", 2, 4, false},
      {"PP=1\ncase 7b in 7b) TP=2 ;;& 70b) PP=4 ;; 7*) PP=2 ;; esac\n", 2, 2, false},
      {"S=70b; TP=1; PP=1\nif true; then case $S in 7b) TP=2;; 70b) TP=8; PP=2;; esac; fi\n", 8, 2, false},
      {"S=70b\ncase $S\nin\n  70b) TP=8; PP=2 ;;\n  *) TP=4; PP=4 ;;\nesac\n", 8, 2, false},
      {"S=70b\ncase $S in\n  [0-9]b) TP=2; PP=1 ;;\n  [0-9][0-9]b) TP=8; PP=2 ;;\nesac\n", 8, 2, false},
      // A second review's (2026-12-07): a nested case after `do` in a branch not taken; a line of text that begins
      // with the word case (a heredoc's); a default used only when needed; the options loop over "$@", whose
      // branches racksim cannot tell were taken and whose values it cannot tell, keeping the defaults.
      {"M=b\ncase $M in\n  a)\n    for x in 1; do case $x in\n      1) TP=1;;\n    esac; done\n    ;;\n"
       "  b) TP=2; PP=2;;\nesac\n",
       2, 2, false},
      {"TP=4; PP=1\ncat <<EOF\ncase sizes: 7b or 70b\nEOF\n", 4, 1, false},
      // (and one beginning with `if`: not an if unless `then` follows, so what comes after is not on a branch)
      {"TP=1; PP=1\ncat <<EOF\nif you run 70b, set TP=8\nEOF\nS=70b\ncase $S in 7b) TP=2;; 70b) TP=8; PP=2;; esac\n", 8, 2,
       false},
      {"DP=0; TP=4; PP=${PP:-2}; TP=${TP:-$((256 / DP))}\n", 4, 2, false},
      {"TP=2; PP=1\nfor arg in \"$@\"; do\n  case $arg in\n    --tp=*) TP=\"${arg#*=}\" ;;\n    --pp=*) PP=\"${arg#*=}\" ;;\n"
       "  esac\ndone\n",
       2, 1, false},
  };
  const std::string launch = "torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                             "--num-attention-heads 32 --seq-length 4096 --vocab-size 32000 --micro-batch-size 1 "
                             "--global-batch-size 64 --bf16 --tensor-model-parallel-size $TP "
                             "--pipeline-model-parallel-size $PP ${EXTRA[@]}\n";
  for (const auto& c : cases) {
    write(dir + "/s.sh", c.body + launch);
    const auto r = run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"});
    ASSERT_EQ(r.code, 0) << c.body << r.err;
    EXPECT_TRUE(has(r.out, "    tp: " + std::to_string(c.tp) + " ")) << c.body << r.out;
    EXPECT_TRUE(has(r.out, "    pp: " + std::to_string(c.pp) + " ")) << c.body << r.out;
    EXPECT_EQ(has(r.err, "is set on two branches of the case"), c.untold) << c.body << r.err;
  }
  // The options loop says what it kept.
  write(dir + "/s.sh", cases.back().body + launch);
  EXPECT_TRUE(has(run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"}).err,
                  "TP=${arg#*=} (line 4): a value racksim cannot tell, on a branch it cannot tell the run took; TP keeps "
                  "'2'"));
  // A negative capacity factor is Megatron-Core's None (dropless).
  write(dir + "/s.sh", "TP=1; PP=1\n" + launch.substr(0, launch.size() - 1) +
                           " --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
                           "--moe-expert-capacity-factor -1\n");
  const auto neg = run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"});
  EXPECT_EQ(neg.code, 0) << neg.err;
  EXPECT_FALSE(has(neg.out, "capacity_factor")) << neg.out;
  // The array's flag inside the taken branch is read (its ')' is not a pattern).
  write(dir + "/s.sh", cases[5].body + launch);
  EXPECT_TRUE(has(run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"}).out,
                  "optimizer_sharding: zero1       # --use-distributed-optimizer"));
  // An unclosed case is refused at its line, as bash refuses the script.
  write(dir + "/s.sh", "S=7b\ncase $S in\n  7b) TP=2; PP=1 ;;\n" + launch);
  const auto open = run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"});
  EXPECT_EQ(open.code, 1);
  EXPECT_TRUE(has(open.err, dir + "/s.sh:2:1: error: this case has no esac; bash refuses the script")) << open.err;
  write(dir + "/s.sh", "TP=2; PP=1\nif [ -n \"$X\" ]; then\n  TP=4\n" + launch);
  const auto open_if = run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"});
  EXPECT_EQ(open_if.code, 1);
  EXPECT_TRUE(has(open_if.err, dir + "/s.sh:2:1: error: this if has no fi; bash refuses the script")) << open_if.err;
  // A capacity factor that is not a number is refused at its argument (it had been written into the scenario as given).
  write(dir + "/s.sh", "TP=1; PP=1\n" + launch.substr(0, launch.size() - 1) +
                           " --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
                           "--moe-expert-capacity-factor '{a'\n");
  const auto cf = run_cli({"import", "megatron", dir + "/s.sh", "--system", "h100-sxm"});
  EXPECT_EQ(cf.code, 1);
  EXPECT_TRUE(has(cf.err, "--moe-expert-capacity-factor: expected a positive number, a negative one or None (dropless), "
                          "got '{a'"))
      << cf.err;
  // A line break in the script's name or in a MaxText value stays inside the comment that shows it.
  const std::string nl = dir + "/a\nb.sh";
  write(nl, "TP=1; PP=1\n" + launch);
  const auto named = run_cli({"import", "megatron", nl, "--system", "h100-sxm", "--out", dir + "/nl.yaml"});
  EXPECT_EQ(named.code, 0) << named.err;
  write(dir + "/run.yml", "base_config: " + kSrc + "/tests/data/maxtext/base.yml\nmodel_name: llama2-7b\n"
                          "ici_fsdp_parallelism: 8\nhardware: \"gpu\\nsystem: 1\"\n");
  const auto mt = run_cli({"import", "maxtext", dir + "/run.yml", "--system", "h100-sxm"});
  EXPECT_EQ(mt.code, 0) << mt.err;
  EXPECT_TRUE(has(mt.out, "gpu\\x0asystem: 1")) << mt.out;
}

// A red-team pass's finding (2026-12-07): a calibration file's device.base_preset was not checked. A typo left the
// transfer on the target's cited ceilings and another GPU's preset on that GPU's, each silently (DeepSeek-V3 on GB200
// 3-5% faster). Another GPU's preset is refused, as `calibrate fit --base` refuses it; a name that is no shipped preset
// is said (a user's own preset, which `calibrate fit --base FILE` names by its `name:`, is one).
TEST(InputAudit, CalibrationBasePresetNamesThePresetOfTheGpuMeasured) {
  const std::string dir = temp_dir("calib_base");
  const std::string shipped = read_file(kSrc + "/hardware_models/calibrated/h200.yaml");
  const std::string line = "  base_preset: h200-sxm\n";
  ASSERT_NE(shipped.find(line), std::string::npos);
  const auto with_base = [&](const std::string& base) {
    std::string text = shipped;
    text.replace(text.find(line), line.size(), "  base_preset: " + base + "\n");
    const std::string path = dir + "/cal-" + base + ".yaml";
    write(path, text);
    return run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "system.calibration=" + path});
  };
  const auto typo = with_base("h200-sx");
  EXPECT_EQ(typo.code, 0) << typo.err;
  EXPECT_TRUE(has(typo.out, "cal-h200-sx.yaml: device.base_preset 'h200-sx' is no shipped preset (did you mean "
                            "'h200-sxm'?)"))
      << typo.out;
  const auto other = with_base("b200");
  EXPECT_EQ(other.code, 1);
  EXPECT_TRUE(has(other.err, "cal-b200.yaml:7:16: error: device.base_preset: the device measured ('H200 SXM 141GB') has "
                             "132 SMs, the base preset b200 (B200 (HGX, 1000 W)) has 148"))
      << other.err;
  EXPECT_EQ(with_base("h200-sxm").code, 0);
}

// The same pass: a file that parses but holds an error was parsed once per process and cloned after, and yaml-cpp's
// clone keeps no line or column, so the second load of it in one process (the Python module's next call, a second
// command in a test) placed the same error at 1:1. Each loader now drops such a file's parse.
TEST(InputAudit, AFileWithErrorsPlacesThemEveryTimeItIsLoaded) {
  const std::string dir = temp_dir("errors_again");
  std::string model = read_file(kSrc + "/workloads/models/llama3-8b.yaml");
  model.replace(model.find("layers: 32\n"), 11, "layers: 0\n");
  write(dir + "/bad-model.yaml", model);
  for (int load = 0; load < 2; ++load) {
    const auto r = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "model.preset=" + dir + "/bad-model.yaml"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(has(r.err, dir + "/bad-model.yaml:3:9: error: layers:")) << "load " << load << ": " << r.err;
  }
}

// The same pass: `hw show PATH.yaml` looked for presets/PATH.yaml.yaml, where a scenario's system.preset reads the file.
TEST(InputAudit, HwShowReadsAPresetFileAsAScenarioDoes) {
  const std::string dir = temp_dir("hw_show_file");
  fs::copy(kSrc + "/hardware_models/presets/h200-sxm.yaml", dir + "/mine.yaml", fs::copy_options::overwrite_existing);
  const auto r = run_cli({"hw", "show", dir + "/mine.yaml"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "gpu.model                                H200 SXM 141GB")) << r.out;
  EXPECT_EQ(r.out, run_cli({"hw", "show", "h200-sxm"}).out);
}

// The same pass: a scenario's name reached the terminal with its control bytes (an ANSI escape, a NUL written in the
// YAML), and a model file or calibration named as /dev/zero was said not to exist.
TEST(InputAudit, UserTextReachesTheTerminalEscapedAndSpecialFilesAreSaidToBeSo) {
  const std::string dir = temp_dir("terminal_text");
  std::string scen = read_file(kSrc + "/scenarios/quickstart.yaml");
  const std::size_t name = scen.find("\nname:");
  ASSERT_NE(name, std::string::npos);
  scen.replace(name + 1, scen.find('\n', name + 1) - name - 1, "name: \"\\e[31mred\\e[0m \\0\"");
  write(dir + "/s.yaml", scen);
  const auto r = run_cli({"run", dir + "/s.yaml"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "scenario            \\x1b[31mred\\x1b[0m \\x00\n")) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  const auto model = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "model.preset=/dev/zero"});
  EXPECT_EQ(model.code, 1);
  EXPECT_TRUE(has(model.err, "model file '/dev/zero' is not a regular file (a device, a pipe or a socket)")) << model.err;
  const auto cal = run_cli({"hw", "show", "h200-sxm", "--calibration", "/dev/zero"});
  EXPECT_EQ(cal.code, 1);
  EXPECT_TRUE(has(cal.err, "calibration file '/dev/zero' is not a regular file")) << cal.err;
}

// The same pass: `compare S S --variant-set tp=3` blamed S:8:9 (system.gpus) without saying that only the variant's
// set made it wrong.
TEST(InputAudit, CompareSaysWhichSidesErrorsTheyAre) {
  const std::string q = kSrc + "/scenarios/quickstart.yaml";
  const auto r = run_cli({"compare", q, q, "--variant-set", "training.parallelism.tp=3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, q + ": error: compare: the errors above are the variant scenario's\n")) << r.err;
  EXPECT_FALSE(has(r.err, "base scenario's")) << r.err;
}

// A new user's probe (2026-12-07), each of these fixed:
// - a key given with no value (`recompute:`, `nvls: ~`) had run as its default without a word, and a required one
//   given empty had read "required key is missing" (and, for system.preset, a second error on the next line);
// - a typo beside a model preset had been told to inline the model "with hiden changed": now the inline model's
//   unknown-key error with its nearest field;
// - expert_imbalance on a dense model had been taken and changed nothing: refused as training.moe is;
// - the tokens-per-step bound named `model`, not the global batch that crossed it;
// - the same --set key twice had kept the last silently: it still does, and says so.
TEST(InputAudit, EmptyValuesTyposBesideAPresetAndRepeatedSetsAreSaid) {
  const std::string dir = temp_dir("probe1207");
  write(dir + "/n.yaml", "name: n\nsystem:\n  preset:\n  gpus: 8\nmodel: {preset: llama3-8b}\ntraining:\n"
                         "  seq_len: 8192\n  global_batch: 128\n  micro_batch: 1\n  recompute:\n  nvls: ~\n");
  const auto n = run_cli({"run", dir + "/n.yaml"});
  EXPECT_EQ(n.code, 1);
  EXPECT_EQ(n.err, dir + "/n.yaml:3:3: error: system.preset: no value (empty or null): give one; this key is required\n" +
                       dir + "/n.yaml:10:3: error: training.recompute: no value (empty or null): give one, or leave the key "
                             "out for its default\n" +
                       dir + "/n.yaml:11:3: error: training.nvls: no value (empty or null): give one, or leave the key out "
                             "for its default\n")
      << n.err;

  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  // An override with no value, at its key and with its whole path (it had read "required key is missing").
  write(dir + "/o.yaml", "name: o\nsystem:\n  preset: h200-sxm\n  gpus: 8\n  overrides:\n    scale_up.domain_size:\n"
                         "model: {preset: llama3-8b}\ntraining: {seq_len: 4096, global_batch: 64, micro_batch: 1}\n");
  const auto o = run_cli({"run", dir + "/o.yaml"});
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(o.err, dir + "/o.yaml:6:5: error: system.overrides.scale_up.domain_size: no value (empty or null): give one, or "
                         "leave the field out for the preset's own\n");
  const auto typo = run_cli({"run", quick, "--set", "model.hiden=4096"});
  EXPECT_EQ(typo.code, 1);
  EXPECT_TRUE(has(typo.err, "model.hiden: unknown key 'hiden'; did you mean 'hidden'?")) << typo.err;
  const auto field = run_cli({"run", quick, "--set", "model.hidden=4096"});
  EXPECT_TRUE(has(field.err, "model.hidden: a model preset's fields are not set beside it")) << field.err;

  const auto dense = run_cli({"run", quick, "--set", "training.expert_imbalance=chance"});
  EXPECT_EQ(dense.code, 1);
  EXPECT_TRUE(has(dense.err, "training.expert_imbalance: expert_imbalance is the MoE routing's load on the busiest expert "
                             "rank: it needs a mixture-of-experts model")) << dense.err;
  EXPECT_EQ(run_cli({"run", quick, "--set", "training.expert_imbalance=1"}).code, 0);  // the default may stay

  const auto tokens = run_cli({"run", quick, "--set", "training.seq_len=100000000", "--set", "training.global_batch=16384"});
  EXPECT_EQ(tokens.code, 1);
  EXPECT_TRUE(has(tokens.err, "--set training.global_batch=16384: error: training.global_batch: training.global_batch x "
                              "training.seq_len = 1.64e+12 tokens per step")) << tokens.err;

  // The last of a key given twice is used, as before, and said (a wrapper's `--set k=default "$@"` relies on it).
  const auto twice = run_cli({"run", quick, "--json", "--set", "training.parallelism.tp=2", "--set",
                              "training.parallelism.tp=4", "--set", "training.parallelism.dp=auto"});
  EXPECT_EQ(twice.code, 0) << twice.err;
  EXPECT_TRUE(has(twice.err, "--set training.parallelism.tp=4: training.parallelism.tp was given before (--set "
                             "training.parallelism.tp=2): the last is used")) << twice.err;
  EXPECT_TRUE(has(twice.out, "\"tp\":4")) << twice.out;
}

// The wrong kind of file for a command says what it is and which command reads it, in one line (a probe had a wall of
// unknown-key errors, "name: unknown key 'name'; did you mean 'base'?" among them).
TEST(InputAudit, AnotherKindOfFileIsNamedWithItsCommand) {
  const std::string dir = temp_dir("kinds");
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  write(dir + "/sw.yaml", "base: " + quick + "\nvary:\n  training.parallelism.tp: [1, 2]\n");
  const auto run = run_cli({"run", dir + "/sw.yaml"});
  EXPECT_EQ(run.code, 1);
  EXPECT_EQ(run.err, dir + "/sw.yaml:1:1: error: this looks like a sweep file, not a scenario (base:, vary:): run it with "
                           "`racksim sweep FILE`\n");
  const auto sweep = run_cli({"sweep", quick});
  EXPECT_EQ(sweep.code, 1);
  EXPECT_EQ(sweep.err, quick + ":1:1: error: this looks like a scenario file, not a sweep (system:, training:): run "
                               "it with `racksim run FILE` (or name it as a sweep's base:)\n");
  const auto suite = run_cli({"validate", dir + "/sw.yaml"});
  EXPECT_EQ(suite.code, 1);
  EXPECT_TRUE(has(suite.err, "this looks like a sweep file, not a validation suite")) << suite.err;
  const auto preset = run_cli({"run", kSrc + "/hardware_models/presets/h100-sxm.yaml"});
  EXPECT_EQ(preset.code, 1);
  EXPECT_TRUE(has(preset.err, "this looks like a system preset file, not a scenario (gpu:, scale_up:)")) << preset.err;
}

// --model with architecture flags that describe another model: each disagreement said (they had been listed only as
// ignored); flags that agree with the preset say nothing.
TEST(InputAudit, ArchitectureFlagsThatContradictTheNamedModelAreSaid) {
  const std::string dir = temp_dir("modelflags");
  write(dir + "/a.txt", "--num-layers 32\n--hidden-size 4096\n--ffn-hidden-size 14336\n--num-attention-heads 32\n"
                        "--group-query-attention\n--num-query-groups 8\n--seq-length 4096\n--micro-batch-size 1\n"
                        "--global-batch-size 64\n--bf16\n");
  const auto other = run_cli({"import", "megatron", dir + "/a.txt", "--gpus", "8", "--system", "h200-sxm", "--model",
                              "llama3-70b"});
  EXPECT_EQ(other.code, 0) << other.err;
  EXPECT_TRUE(has(other.err, "--num-layers 32 disagrees with --model llama3-70b (80 there): the arguments describe another "
                             "model than the one named; the preset is used")) << other.err;
  EXPECT_TRUE(has(other.err, "--hidden-size 4096 disagrees with --model llama3-70b (8192 there)")) << other.err;
  const auto same = run_cli({"import", "megatron", dir + "/a.txt", "--gpus", "8", "--system", "h200-sxm", "--model",
                             "llama3-8b"});
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_FALSE(has(same.err, "disagrees")) << same.err;
}

// Megatron's GPT-3 example (examples/gpt3/train_gpt3_175b_distributed.sh at f2e5db40) passes --rampup-batch-size with
// three values (argparse nargs='*'); the importer had read the first as its value, called the flag unknown and dropped
// the other two. It is known now and ignored (the ramp's early batches, not the steady step racksim simulates).
TEST(InputAudit, RampupBatchSizeTakesItsThreeValuesAndIsIgnored) {
  const std::string dir = temp_dir("rampup");
  write(dir + "/a.txt", "--num-layers 4\n--hidden-size 1024\n--num-attention-heads 16\n--seq-length 2048\n"
                        "--micro-batch-size 1\n--global-batch-size 64\n--rampup-batch-size 16 16 5859375\n"
                        "--vocab-size 32000\n--bf16\n");
  const auto r = run_cli({"import", "megatron", dir + "/a.txt", "--system", "h200-sxm", "--gpus", "8"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(has(r.err, "rampup")) << r.err;
  EXPECT_TRUE(has(r.out, "--rampup-batch-size 16 16 5859375")) << r.out;
}
