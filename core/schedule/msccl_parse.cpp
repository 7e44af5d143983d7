// Reading an MSCCL algorithm file into an MscclProgram and checking what can be checked
// without ordering it: tags, attributes, numbers, ranges and references.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "base/input_file.h"
#include "base/limits.h"
#include "schedule/msccl_import.h"
#include "schedule/msccl_xml.h"

namespace arl {

namespace {

using msccl::XmlTag;

// A value as an error message shows it: on one line, at most 40 characters.
std::string shown(const std::string& v) {
  std::string out;
  for (char c : v.substr(0, 40)) out += std::isprint(static_cast<unsigned char>(c)) != 0 ? c : '?';
  return v.size() > 40 ? out + "..." : out;
}

class Attrs {
 public:
  Attrs(const XmlTag& tag, const std::string& file, std::initializer_list<std::string_view> known)
      : tag_(tag), file_(file) {
    for (const auto& [k, v] : tag.attrs) {
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        fail("<" + tag.name + "> has an unknown attribute " + k);
      }
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw MscclImportError(file_, tag_.line, why);
  }

  const std::string* find(std::string_view key) const {
    for (const auto& [k, v] : tag_.attrs) {
      if (k == key) return &v;
    }
    return nullptr;
  }

  std::string text(std::string_view key) const {
    const std::string* v = find(key);
    if (v == nullptr) fail("<" + tag_.name + "> lacks the attribute " + std::string(key));
    return *v;
  }

  int number(std::string_view key, int lo, int hi) const { return parse(key, text(key), lo, hi); }

  int number(std::string_view key, int lo, int hi, int fallback) const {
    const std::string* v = find(key);
    return v == nullptr ? fallback : parse(key, *v, lo, hi);
  }

 private:
  int parse(std::string_view key, const std::string& v, int lo, int hi) const {
    int out = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    const std::string where = "<" + tag_.name + "> " + std::string(key) + "=\"" + shown(v) + "\"";
    if (ec == std::errc::result_out_of_range) fail(where + ": out of range " + range(lo, hi));
    if (ec != std::errc() || end != v.data() + v.size()) fail(where + ": not a whole number");
    if (out < lo || out > hi) fail(where + ": must be in " + range(lo, hi));
    return out;
  }

  static std::string range(int lo, int hi) {
    return std::to_string(lo) + ".." + std::to_string(hi);
  }

  const XmlTag& tag_;
  const std::string& file_;
};

MscclStepType stepType(const Attrs& a, const std::string& t) {
  if (t == "s") return MscclStepType::Send;
  if (t == "r") return MscclStepType::Recv;
  if (t == "rrc") return MscclStepType::RecvReduceCopy;
  if (t == "rcs") return MscclStepType::RecvCopySend;
  if (t == "rrs") return MscclStepType::RecvReduceSend;
  if (t == "rrcs") return MscclStepType::RecvReduceCopySend;
  if (t == "cpy") return MscclStepType::Copy;
  if (t == "nop") return MscclStepType::Nop;
  if (t == "re") {
    a.fail(
        "step type re (a local reduce) is not supported: the lab's executor reduces only what "
        "it receives");
  }
  a.fail("unknown step type \"" + shown(t) + "\" (known: s, r, rrc, rcs, rrs, rrcs, cpy, nop)");
}

MscclBuffer buffer(const Attrs& a, std::string_view key) {
  const std::string b = a.text(key);
  if (b == "i") return MscclBuffer::Input;
  if (b == "o") return MscclBuffer::Output;
  if (b == "s") return MscclBuffer::Scratch;
  a.fail(std::string(key) + "=\"" + shown(b) + "\": not a buffer (i, o or s)");
}

Collective collective(const Attrs& a) {
  const std::string c = a.text("coll");
  if (c == "allreduce") return Collective::AllReduce;
  if (c == "allgather") return Collective::AllGather;
  if (c == "reduce_scatter" || c == "reducescatter") return Collective::ReduceScatter;
  a.fail("coll=\"" + shown(c) + "\" is not supported (allreduce, allgather, reduce_scatter)");
}

// Builds the program from the tags, keeping the nesting algo > gpu > tb > step.
class Builder {
 public:
  explicit Builder(const std::string& file) : file_(file) { p_.file = file; }

  void open(const XmlTag& tag) {
    const std::string parent = stack_.empty() ? "" : stack_.back();
    const std::string want = parent.empty()     ? "algo"
                             : parent == "algo" ? "gpu"
                             : parent == "gpu"  ? "tb"
                             : parent == "tb"   ? "step"
                                                : "";
    if (tag.name != want) {
      throw MscclImportError(
          file_, tag.line,
          "unexpected <" + tag.name + ">" +
              (parent.empty() ? " (the file must be one <algo>)"
               : want.empty() ? " inside <step>"
                              : " inside <" + parent + "> (expected <" + want + ">)"));
    }
    if (tag.name == "algo") algo(tag);
    if (tag.name == "gpu") gpu(tag);
    if (tag.name == "tb") tb(tag);
    if (tag.name == "step") step(tag);
    stack_.push_back(tag.name);
  }

  void close() { stack_.pop_back(); }

  MscclProgram finish() {
    if (!seenAlgo_) throw MscclImportError(file_, 0, "no <algo> element");
    for (int g = 0; g < p_.ngpus; ++g) {
      if (p_.gpus[static_cast<size_t>(g)].line == 0) {
        throw MscclImportError(
            file_, p_.line,
            "ngpus=" + std::to_string(p_.ngpus) + " but no <gpu id=\"" + std::to_string(g) + "\">");
      }
    }
    return std::move(p_);
  }

 private:
  void algo(const XmlTag& tag) {
    if (seenAlgo_) throw MscclImportError(file_, tag.line, "a second <algo>");
    seenAlgo_ = true;
    const Attrs a(tag, file_,
                  {"name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace",
                   "outofplace", "minBytes", "maxBytes", "redop"});
    p_.line = tag.line;
    p_.name = a.text("name");
    const bool nameOk = !p_.name.empty() && p_.name.size() <= 64 &&
                        std::all_of(p_.name.begin(), p_.name.end(), [](char c) {
                          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' ||
                                 c == '-' || c == '.';
                        });
    // The name labels the runs (msccl:NAME) and travels as an identifier.
    if (!nameOk)
      a.fail("name \"" + shown(p_.name) + "\" must be 1 to 64 letters, digits, '_', '-' or '.'");
    p_.collective = collective(a);
    p_.ngpus = a.number("ngpus", 1, kMaxRanks);
    p_.nchunksperloop = a.number("nchunksperloop", 1, kMscclMaxChunks);
    p_.nchannels = a.number("nchannels", 1, kMscclMaxChannels, 1);
    p_.inPlace = a.number("inplace", 0, 1, 0) == 1;
    p_.gpus.resize(static_cast<size_t>(p_.ngpus));
  }

  void gpu(const XmlTag& tag) {
    const Attrs a(tag, file_, {"id", "i_chunks", "o_chunks", "s_chunks"});
    const int id = a.number("id", 0, p_.ngpus - 1);
    MscclGpu& g = p_.gpus[static_cast<size_t>(id)];
    if (g.line != 0) a.fail("gpu " + std::to_string(id) + " given twice");
    g.id = id;
    g.line = tag.line;
    g.iChunks = a.number("i_chunks", 0, kMscclMaxChunks);
    g.oChunks = a.number("o_chunks", 0, kMscclMaxChunks);
    g.sChunks = a.number("s_chunks", 0, kMscclMaxChunks, 0);
    gpu_ = &g;
  }

  void tb(const XmlTag& tag) {
    const Attrs a(tag, file_, {"id", "send", "recv", "chan"});
    if (static_cast<int>(gpu_->tbs.size()) >= kMscclMaxTbsPerGpu) {
      a.fail("more than " + std::to_string(kMscclMaxTbsPerGpu) + " thread blocks on gpu " +
             std::to_string(gpu_->id));
    }
    MscclTb t;
    t.id = a.number("id", 0, kMscclMaxTbsPerGpu - 1);
    if (t.id != static_cast<int>(gpu_->tbs.size())) {
      a.fail("tb id " + std::to_string(t.id) + " out of order (expected " +
             std::to_string(gpu_->tbs.size()) + ")");
    }
    t.send = a.number("send", -1, p_.ngpus - 1);
    t.recv = a.number("recv", -1, p_.ngpus - 1);
    if (t.send == gpu_->id || t.recv == gpu_->id)
      a.fail("a thread block cannot send to or receive from its own gpu");
    t.chan = a.number("chan", 0, p_.nchannels - 1, 0);
    t.line = tag.line;
    gpu_->tbs.push_back(std::move(t));
  }

  void step(const XmlTag& tag) {
    const Attrs a(
        tag, file_,
        {"s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"});
    MscclTb& t = gpu_->tbs.back();
    if (++totalSteps_ > kMscclMaxSteps)
      a.fail("more than " + std::to_string(kMscclMaxSteps) + " steps in all");
    if (static_cast<int>(t.steps.size()) >= kMscclMaxStepsPerTb) {
      a.fail("more than " + std::to_string(kMscclMaxStepsPerTb) + " steps in one thread block");
    }
    const int s = a.number("s", 0, kMscclMaxStepsPerTb - 1);
    if (s != static_cast<int>(t.steps.size())) {
      a.fail("step s=" + std::to_string(s) + " out of order (expected " +
             std::to_string(t.steps.size()) + ")");
    }
    MscclStep st;
    st.line = tag.line;
    st.type = stepType(a, a.text("type"));
    st.srcbuf = buffer(a, "srcbuf");
    st.dstbuf = buffer(a, "dstbuf");
    st.srcoff = a.number("srcoff", -1, kMscclMaxChunks - 1);
    st.dstoff = a.number("dstoff", -1, kMscclMaxChunks - 1);
    st.cnt = a.number("cnt", 0, kMscclMaxChunks);
    st.depid = a.number("depid", -1, kMscclMaxTbsPerGpu - 1, -1);
    st.deps = a.number("deps", -1, kMscclMaxStepsPerTb - 1, -1);
    a.number("hasdep", 0, 1, 0);
    if ((st.depid < 0) != (st.deps < 0))
      a.fail("depid and deps must both be -1 or both name a step");
    t.steps.push_back(st);
  }

  const std::string& file_;
  MscclProgram p_;
  std::vector<std::string> stack_;
  MscclGpu* gpu_ = nullptr;
  bool seenAlgo_ = false;
  int totalSteps_ = 0;
};

}  // namespace

MscclImportError::MscclImportError(const std::string& file, int l, const std::string& r)
    : ConfigError(file + ":" + std::to_string(l) + ": " + r), line(l), reason(r) {}

MscclProgram parseMscclProgram(std::string_view text, const std::string& file) {
  Builder b(file);
  msccl::readXml(
      text, file, [&](const XmlTag& t) { b.open(t); }, [&](const std::string&, int) { b.close(); });
  MscclProgram p = b.finish();
  checkMscclProgram(p);
  return p;
}

MscclProgram readMscclProgram(const std::string& path) {
  std::string text;
  try {
    text = readInputFile(path, kMscclMaxFileBytes);
  } catch (const InputFileError& e) {
    throw MscclImportError(path, 0, e.what());
  }
  return parseMscclProgram(text, path);
}

}  // namespace arl
