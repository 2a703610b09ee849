// The HLO text parser: module header, computations, instructions, shapes with layouts, tiling
// and memory spaces, attributes kept as written, and errors with file:line:column.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "input/diagnostics.h"
#include "workloads/hlo/hlo_parser.h"

using namespace racksim;
using namespace racksim::workloads::hlo;

namespace {

const std::string kCorpus = std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/hlo_corpus/";

std::string diag_of(const std::string& text) {
  try {
    parse_hlo_text(text, "t.hlo");
  } catch (const input::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// C strings: std::string temporaries would make GCC 13 warn that the reference may dangle (-Wdangling-reference).
const Instruction& inst(const Module& m, const char* comp, const char* name) {
  const Computation* c = m.find(comp);
  EXPECT_NE(c, nullptr) << comp;
  return c->instructions.at(static_cast<std::size_t>(c->index.at(name)));
}

}  // namespace

TEST(HloParser, ModuleHeaderAndSchedule) {
  const Module m = load_hlo_file(kCorpus + "loop_gemm.hlo");
  EXPECT_EQ(m.name, "jit_loop");
  EXPECT_TRUE(m.is_scheduled);
  EXPECT_EQ(m.entry_computation().name, "main");
  EXPECT_TRUE(m.entry_computation().is_entry);
  ASSERT_EQ(m.computations.size(), 6u);
  // The entry's parameters in number order, and the root.
  const Computation& e = m.entry_computation();
  ASSERT_EQ(e.parameters.size(), 2u);
  EXPECT_EQ(e.instructions[static_cast<std::size_t>(e.parameters[0])].name, "w.1");
  EXPECT_EQ(e.root_instruction().name, "out");
  EXPECT_EQ(inst(m, "main", "w.1").op_name, "p['w']");
  // A while names its condition and body; attribute values are kept as written.
  const Instruction& w = inst(m, "main", "loop");
  EXPECT_EQ(w.opcode, "while");
  ASSERT_EQ(w.called.size(), 2u);
  EXPECT_EQ(*w.attr("condition"), "%cond");
  EXPECT_EQ(*w.attr("backend_config"), R"({"known_trip_count":{"n":"4"}})");
  const Instruction& g = inst(m, "body", "gemm");
  EXPECT_EQ(g.custom_call_target, "__cublas$lt$matmul");
  ASSERT_EQ(g.operands.size(), 2u);
  EXPECT_TRUE(g.shape.is_tuple);
  EXPECT_EQ(g.shape.tuple.at(1).element_type, "s8");
}

TEST(HloParser, ShapesLayoutsAndMemorySpaces) {
  const Module m = parse_hlo_text(R"(HloModule t
ENTRY %e (a: bf16[2,3]) -> (f32[], bf16[2,3]) {
  %a = bf16[2,3]{0,1:T(8,128)(2,1)S(5)} parameter(0)
  %c = f32[] constant(1.5)
  ROOT %t = (f32[], bf16[2,3]{1,0}) tuple(%c, %a)
}
)",
                                  "t.hlo");
  const Instruction& a = inst(m, "e", "a");
  EXPECT_EQ(a.shape.element_type, "bf16");
  EXPECT_EQ(a.shape.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.shape.minor_to_major, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(a.shape.memory_space, 5);
  EXPECT_TRUE(a.shape.on_host());
  EXPECT_DOUBLE_EQ(a.shape.bytes(), 12.0);
  const Instruction& t = inst(m, "e", "t");
  EXPECT_EQ(t.shape.leaf_count(), 2);
  EXPECT_EQ(t.shape.leaf_offset(1), 1);
  EXPECT_DOUBLE_EQ(t.shape.bytes(), 16.0);
  EXPECT_EQ(inst(m, "e", "c").literal, "1.5");
  // Sub-byte and fp8 types.
  EXPECT_DOUBLE_EQ(*element_bytes("f8e4m3fn"), 1.0);
  EXPECT_DOUBLE_EQ(*element_bytes("s4"), 0.5);
  EXPECT_DOUBLE_EQ(*element_bytes("pred"), 1.0);
  EXPECT_FALSE(element_bytes("float32").has_value());
}

TEST(HloParser, SectionsCommentsMetadataAndUnknownOpcodes) {
  const Module m = load_hlo_file(kCorpus + "misc.hlo");
  EXPECT_FALSE(m.is_scheduled);
  const Instruction& x = inst(m, "main", "x");
  EXPECT_EQ(x.op_name, "x['a']");  // escaped quotes in metadata
  EXPECT_EQ(x.shape.memory_space, 0);
  const Instruction& weird = inst(m, "main", "weird");
  EXPECT_EQ(weird.opcode, "frobnicate");  // parsed, not rejected
  EXPECT_EQ(*weird.attr("some_attr"), R"({a=[1,2], b="x,y"})");
  const Instruction& cond = inst(m, "main", "cond");
  EXPECT_EQ(cond.called, (std::vector<std::string>{"then", "else"}));
  EXPECT_EQ(inst(m, "main", "out").is_root, true);  // after a /*index=5*/ comment
}

TEST(HloParser, TypedOperandsAndNamesWithoutPercent) {
  const Module m = parse_hlo_text(R"(HloModule t, replica_count=2, num_partitions=4
ENTRY e {
  a = f32[4]{0} parameter(0)
  b = f32[4]{0} add(f32[4]{0} a, a)
  ROOT r = f32[4]{0} multiply(b, b), sharding={replicated}
}
)",
                                  "t.hlo");
  EXPECT_EQ(m.replica_count, 2);
  EXPECT_EQ(m.num_partitions, 4);
  EXPECT_EQ(inst(m, "e", "b").operands, (std::vector<int>{0, 0}));
  EXPECT_EQ(m.entry_computation().root, 2);
}

TEST(HloParser, GzipFilesAreRead) {
  const std::string text = "HloModule g\nENTRY %e (a: f32[2]) -> f32[2] {\n  ROOT %a = f32[2]{0} parameter(0)\n}\n";
  const std::string path = ::testing::TempDir() + "/m.hlo.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  EXPECT_EQ(read_hlo_text(path), text);
  EXPECT_EQ(load_hlo_file(path).name, "g");
  // A truncated gzip stream is an input error, not a crash.
  std::ifstream in(path, std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = ::testing::TempDir() + "/cut.hlo.gz";
  std::ofstream(cut, std::ios::binary) << raw.substr(0, raw.size() / 2);
  EXPECT_THROW(read_hlo_text(cut), input::InputError);
  EXPECT_THROW(load_hlo_file(::testing::TempDir() + "/missing.hlo"), input::InputError);
}

TEST(HloParser, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(diag_of("garbage"), "t.hlo:1:1: error: HLO: expected 'HloModule' at the start of the module");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n"),
            "t.hlo:2:1: error: HLO: computation 'e' is never closed with '}'");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f33[] constant(1)\n}\n"),
            "t.hlo:3:13: error: HLO: unknown element type 'f33'");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] add(%x, %x)\n}\n"),
            "t.hlo:3:3: error: HLO: operand 'x' of 'c' is not defined in computation 'e'");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] call(), to_apply=%nowhere\n}\n"),
            "t.hlo:3:3: error: HLO: instruction 'c' calls computation 'nowhere', which is not defined");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  %c = f32[] constant(1), metadata={op_name=\"x\"\n"),
            "t.hlo:3:36: error: HLO: unbalanced value: '{' is never closed");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[2,3 {\n}\n"),
            "t.hlo:2:24: error: HLO: expected ',' or ']' in dimensions, found '{'");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  %c = f32[] constant(1)\n  %c = f32[] constant(2)\n}\n"),
            "t.hlo:4:3: error: HLO: instruction 'c' is defined twice in 'e'");
  EXPECT_EQ(diag_of("HloModule m\n%a () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n%a () -> f32[] {\n  ROOT "
                    "%c = f32[] constant(1)\n}\n"),
            "t.hlo:5:1: error: HLO: computation 'a' is defined twice");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(1)\n}\n"),
            "t.hlo:2:1: error: HLO: computation 'e' has no parameter(0)");
  EXPECT_EQ(diag_of("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[99999999999999999999] constant(1)\n}\n"),
            "t.hlo:3:17: error: HLO: a dimension is out of range");
}

TEST(HloParser, CallCyclesAndDeepNestingAreRejected) {
  // A cycle through a fusion's calls= (two computations), named with its path at the call that closes it.
  EXPECT_EQ(diag_of("HloModule m\n%a (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %f = f32[] fusion(%x), "
                    "kind=kLoop, calls=%b\n}\n%b (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %g = f32[] "
                    "call(%x), to_apply=%a\n}\nENTRY %e (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %c = "
                    "f32[] call(%p), to_apply=%a\n}\n"),
            "t.hlo:8:3: error: HLO: computation 'a' calls itself (a -> b -> a): recursion, which XLA's HLO verifier "
            "rejects");
  // A chain of calls: 64 computations deep is read, 65 is an error that names the limit, not recursion.
  const auto chain = [](int depth) {
    std::string t = "HloModule m\n";
    for (int k = depth - 1; k >= 1; --k) {
      t += fmt::format("%c{} (x: f32[]) -> f32[] {{\n  %x = f32[] parameter(0)\n", k);
      t += k == depth - 1 ? "  ROOT %r = f32[] negate(%x)\n}\n"
                          : fmt::format("  ROOT %r = f32[] call(%x), to_apply=%c{}\n}}\n", k + 1);
    }
    return t + "ENTRY %e (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %r = f32[] call(%p), to_apply=%c1\n}\n";
  };
  EXPECT_EQ(diag_of(chain(64)), "(no error)");
  const std::string deep = diag_of(chain(65));
  EXPECT_NE(deep.find("error: HLO: calls from computation 'e' nest 65 deep, more than the 64 racksim follows"),
            std::string::npos)
      << deep;
}

TEST(HloParser, ParsesEveryReferenceModule) {
  const std::string dir = std::string(RACKSIM_SOURCE_DIR) + "/tests/data/reference/hlo";  // README.md one up
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << "reference data missing: " << dir;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const Module m = load_hlo_file(e.path().string());
    EXPECT_TRUE(m.is_scheduled) << e.path();
    EXPECT_GT(m.computations.size(), 100u) << e.path();
    ++n;
  }
  EXPECT_EQ(n, 5);
}
