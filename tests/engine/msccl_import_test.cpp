// MSCCL algorithm files: the examples of docs/examples import, verify and run exactly in
// process; the one with a wrong dependency is refused naming its step; malformed files are
// refused with their line and reason; random damage never crashes the reader.
#include "schedule/msccl_import.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>

#include "base/input_file.h"
#include "exec/local_run.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

std::string example(const std::string& name) {
  return std::string(ARL_SOURCE_DIR) + "/docs/examples/" + name;
}

std::string exampleText(const std::string& name) {
  return readInputFile(example(name), kMscclMaxFileBytes);
}

// The refusal of `text`, or "" when it parses.
std::string refusal(const std::string& text) {
  try {
    parseMscclProgram(text, "f.xml");
  } catch (const MscclImportError& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* file;
  int ranks;
  uint64_t count;
  uint64_t slice;
};

class MscclExamples : public ::testing::TestWithParam<Case> {};

TEST_P(MscclExamples, VerifyAndRunExactly) {
  const Case c = GetParam();
  const MscclProgram p = readMscclProgram(example(c.file));
  ASSERT_EQ(p.ngpus, c.ranks);
  Schedule s = mscclSchedule(p, c.count, c.slice);
  EXPECT_EQ(s.algorithm, mscclAlgorithmName(p));
  const VerifyResult v = verify(s);
  ASSERT_TRUE(v.ok) << v.message;
  LocalRunOptions opt;
  opt.iterations = 2;
  opt.check = 2;
  const LocalRunResult r = runLocal(s, opt);
  EXPECT_EQ(r.wrong, 0U);
  opt.inPlace = true;
  EXPECT_EQ(runLocal(s, opt).wrong, 0U);
}

INSTANTIATE_TEST_SUITE_P(Files, MscclExamples,
                         ::testing::Values(Case{"msccl-ring-4.xml", 4, 4096, 1024},
                                           Case{"msccl-ring-4.xml", 4, 4000, 3},
                                           Case{"msccl-ring-4.xml", 4, 4, 1},
                                           Case{"msccl-ring-8.xml", 8, 8192, 256},
                                           Case{"msccl-hierarchical-4.xml", 4, 4096, 512},
                                           Case{"msccl-hierarchical-4.xml", 4, 998, 100}));

TEST(MscclImport, RingMatchesTheLabRingStepByStep) {
  const Schedule s = mscclSchedule(readMscclProgram(example("msccl-ring-4.xml")), 4096, 4096);
  // Two ops per message step (a receive and a send) but the messages' steps are the ring's.
  EXPECT_EQ(s.nsteps, 2U * (4 - 1));
  for (const auto& ops : s.ranks) {
    ASSERT_EQ(ops.size(), 2U * 2 * (4 - 1));
    uint64_t sent = 0;
    for (const Op& op : ops) sent += opSends(op.kind) ? op.count : 0;
    EXPECT_EQ(sent, 2U * (4 - 1) * 1024);  // 2(n-1)/n of the vector, as the lab's ring
  }
}

// The lab's order of this file happens to be right; the race check finds that MSCCL's
// concurrent thread blocks may run gpu 2's send before the receive that writes its chunk.
TEST(MscclImport, WrongDependencyIsRefusedAsARaceNamingTheStep) {
  try {
    readMscclProgram(example("msccl-ring-4-wrong-dep.xml"));
    FAIL() << "accepted";
  } catch (const MscclImportError& e) {
    const std::string why = e.what();
    EXPECT_EQ(e.line, 53);
    EXPECT_NE(why.find(":53: gpu 2 tb 1 step 3 (line 53) and gpu 2 tb 0 step 2 (line 44) both "
                       "use chunk 2 of buffer o"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("a race"), std::string::npos) << why;
  }
}

// A file that pairs and orders well but computes the wrong sum: the verifier's message names
// the lab's op and, after it, the file's step.
TEST(MscclImport, VerifierFailuresNameTheFilesStep) {
  std::string t = exampleText("msccl-ring-4.xml");
  t.replace(t.find("type=\"rrc\""), 10, "type=\"r\"");  // gpu 0 forgets its own input
  std::vector<std::vector<MscclOrigin>> origins;
  const Schedule s = mscclSchedule(parseMscclProgram(t, "f.xml"), 4096, 1024, &origins);
  const VerifyResult v = verify(s);
  ASSERT_FALSE(v.ok);
  const std::string why = withMscclOrigins(v.message, origins);
  EXPECT_NE(why.find("missing {0}"), std::string::npos) << why;
  EXPECT_TRUE(std::regex_search(
      why,
      std::regex(
          R"(rank 0 op [0-9]+ \(step [0-9]+, Recv\) \[gpu 0 tb 0 step [0-9]+, line [0-9]+\])")))
      << why;
}

TEST(MscclImport, CountMustBeAMultipleOfTheChunks) {
  const MscclProgram p = readMscclProgram(example("msccl-ring-4.xml"));
  try {
    mscclSchedule(p, 4097, 1024);
    FAIL() << "accepted";
  } catch (const MscclImportError& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of the 4 chunks"), std::string::npos)
        << e.what();
  }
}

TEST(MscclImport, MalformedFilesAreRefusedWithLineAndReason) {
  const std::string ring = exampleText("msccl-ring-4.xml");
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = ring;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  struct Bad {
    std::string text;
    std::string want;
  };
  const std::vector<Bad> bad{
      {ring.substr(0, ring.size() / 2), "(truncated?)"},
      {replaced("<tb id=\"1\"", "<tbx id=\"1\""), "unexpected <tbx>"},
      {replaced("cnt=\"1\"", "cnt=\"one\""), "cnt=\"one\": not a whole number"},
      {replaced("cnt=\"1\"", "cnt=\"99999999999\""), "out of range"},
      {replaced("ngpus=\"4\"", "ngpus=\"100000\""), "must be in 1..64"},
      {replaced(" srcbuf=\"i\"", ""), "lacks the attribute srcbuf"},
      {replaced("type=\"rrc\"", "type=\"rrx\""), "unknown step type \"rrx\""},
      {replaced("type=\"rrc\"", "type=\"re\""), "step type re (a local reduce) is not supported"},
      {replaced("depid=\"0\" deps=\"0\"", "depid=\"0\" deps=\"9\""), "depends on step 9 of tb 0"},
      {replaced("depid=\"0\" deps=\"0\"", "depid=\"5\" deps=\"0\""), "depends on tb 5"},
      {replaced("srcoff=\"3\"", "srcoff=\"4\""), "(chunk out of range)"},
      {replaced("type=\"r\"", "type=\"s\""), "the step sends, but its tb has send=-1"},
      {replaced("<tb id=\"1\" send=\"1\"", "<tb id=\"1\" send=\"2\""),
       "no tb of gpu 0 sends to it"},
      {replaced("coll=\"allreduce\"", "coll=\"alltoall\""), "is not supported"},
      {replaced("<gpu id=\"3\"", "<gpu id=\"2\""), "gpu 2 given twice"},
      {replaced("<!--", "<!DOCTYPE x><!--"), "DOCTYPE"},
      {"<algo name=\"x\" coll=\"allreduce\" ngpus=\"2\" nchunksperloop=\"2\"></algo>",
       "no <gpu id=\"0\">"},
      {"", "no <algo> element"},
  };
  for (const Bad& b : bad) {
    const std::string why = refusal(b.text);
    EXPECT_TRUE(std::regex_search(why, std::regex("^f\\.xml:[0-9]+: "))) << why;
    EXPECT_NE(why.find(b.want), std::string::npos) << "want \"" << b.want << "\" in: " << why;
  }
}

TEST(MscclImport, ReportsTheLineOfTheBadStep) {
  std::string t = exampleText("msccl-ring-4.xml");
  const size_t at = t.find("type=\"rrc\"");
  t.replace(at, 10, "type=\"zz\"");
  const int line =
      1 + static_cast<int>(std::count(t.begin(), t.begin() + static_cast<long>(at), '\n'));
  EXPECT_EQ(refusal(t).rfind("f.xml:" + std::to_string(line) + ": ", 0), 0U) << refusal(t);
}

TEST(MscclImport, CyclesAreRefused) {
  std::string t = exampleText("msccl-ring-4.xml");
  // gpu 0's first receive waits for its own tb 1's last send, which waits for it.
  const std::string first =
      "srcoff=\"2\" dstbuf=\"o\" dstoff=\"2\" cnt=\"1\" depid=\"-1\" deps=\"-1\"";
  t.replace(t.find(first), first.size(),
            "srcoff=\"2\" dstbuf=\"o\" dstoff=\"2\" cnt=\"1\" depid=\"1\" deps=\"5\"");
  EXPECT_NE(refusal(t).find("in a cycle"), std::string::npos) << refusal(t);
}

TEST(MscclImport, ReadsOnlyRegularFilesUnderTheCap) {
  EXPECT_THROW(readMscclProgram("/dev/zero"), MscclImportError);
  EXPECT_THROW(readMscclProgram(example("no-such-file.xml")), MscclImportError);
}

// Random damage to the examples: every outcome is a program or a refusal with a line.
// A program whose GPUs have no thread blocks has no steps: it imports to a schedule the
// verifier refuses (found by libFuzzer: the op bound divided by its zero steps, SIGFPE).
TEST(MscclImport, AProgramWithoutThreadBlocksIsTheVerifiersToRefuse) {
  const std::string t =
      "<algo name=\"ring2\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"8\" ngpus=\"2\" "
      "coll=\"allreduce\" inplace=\"1\">\n"
      "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\">\n  </gpu>\n"
      "  <gpu id=\"1\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\">\n  </gpu>\n"
      "</algo>\n";
  const Schedule s = mscclSchedule(parseMscclProgram(t, "f.xml"), 4096, 512);
  const VerifyResult v = verify(s);
  EXPECT_FALSE(v.ok);
  EXPECT_FALSE(v.message.empty());
}

TEST(MscclImport, FuzzedFilesNeverCrash) {
  const std::vector<std::string> seeds{exampleText("msccl-ring-4.xml"),
                                       exampleText("msccl-hierarchical-4.xml")};
  const std::string alphabet = "<>/=\"' \n0123456789-abcdefghijklmnopqrstuvwxyz!?&";
  std::mt19937_64 rng(42);
  const std::regex located("^f\\.xml:[0-9]+: .+");
  int refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string t = seeds[static_cast<size_t>(i) % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % t.size();
      switch (rng() % 4) {
        case 0: t[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: t.erase(at, 1 + rng() % 16); break;
        case 2: t.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        default: t.resize(at); break;
      }
      if (t.empty()) t = "<";
    }
    try {
      const MscclProgram p = parseMscclProgram(t, "f.xml");
      const Schedule s = mscclSchedule(p, 4096, 512);
      (void)verify(s);
    } catch (const MscclImportError& e) {
      ++refused;
      EXPECT_TRUE(std::regex_match(std::string(e.what()), located)) << e.what();
    }
  }
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace arl
