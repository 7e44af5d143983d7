#include "schedule/msccl_xml.h"

#include <cctype>

#include "schedule/msccl_import.h"

namespace arl::msccl {

namespace {

// Nesting deeper than an MSCCL file's four levels (algo, gpu, tb, step) is refused early, so
// a file of nested tags cannot grow the stack without bound.
constexpr size_t kMaxDepth = 8;
// MSCCL's values are numbers, letters and names; a longer value is not one of them.
constexpr size_t kMaxValueBytes = 256;

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == ':' ||
         c == '.';
}

// A character as an error message shows it: quoted when printable, else its code.
std::string shownChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (std::isprint(u) != 0) return "'" + std::string(1, c) + "'";
  return "byte " + std::to_string(u);
}

class Reader {
 public:
  Reader(std::string_view text, const std::string& file) : t_(text), file_(file) {}

  void run(const std::function<void(const XmlTag&)>& open,
           const std::function<void(const std::string&, int)>& close) {
    std::vector<std::pair<std::string, int>> stack;  // open tags and their lines
    for (;;) {
      skipSpace();
      if (pos_ >= t_.size()) break;
      if (t_[pos_] != '<') fail("text outside a tag (" + shownChar(t_[pos_]) + ")");
      if (startsWith("<?")) {
        skipPast("?>", "an unterminated <? ?> declaration");
      } else if (startsWith("<!--")) {
        skipPast("-->", "an unterminated comment");
      } else if (startsWith("<!")) {
        fail("DOCTYPE and CDATA are not supported");
      } else if (startsWith("</")) {
        closeTag(stack, close);
      } else {
        const XmlTag tag = openTag();
        if (stack.size() >= kMaxDepth) fail("tags nested deeper than " + std::to_string(kMaxDepth));
        open(tag);
        if (tag.selfClosing) {
          close(tag.name, tag.line);
        } else {
          stack.emplace_back(tag.name, tag.line);
        }
      }
    }
    if (!stack.empty()) {
      line_ = stack.back().second;
      fail("the file ends inside <" + stack.back().first + ">, opened here (truncated?)");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw MscclImportError(file_, line_, why);
  }

  bool startsWith(std::string_view s) const { return t_.substr(pos_, s.size()) == s; }

  void advance() {
    if (t_[pos_] == '\n') ++line_;
    ++pos_;
  }

  void skipSpace() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_])) != 0) advance();
  }

  void skipPast(std::string_view end, const std::string& what) {
    const int startLine = line_;
    while (pos_ < t_.size() && !startsWith(end)) advance();
    if (pos_ >= t_.size()) {
      line_ = startLine;
      fail(what);
    }
    pos_ += end.size();
  }

  std::string name() {
    const size_t b = pos_;
    while (pos_ < t_.size() && isNameChar(t_[pos_])) ++pos_;
    if (pos_ == b) {
      fail(pos_ >= t_.size() ? std::string("the file ends inside a tag (truncated?)")
                             : "expected a name, found " + shownChar(t_[pos_]));
    }
    return std::string(t_.substr(b, pos_ - b));
  }

  std::string quoted() {
    if (pos_ >= t_.size()) fail("the file ends inside a tag (truncated?)");
    if (t_[pos_] != '"' && t_[pos_] != '\'') fail("an attribute's value must be quoted");
    const char q = t_[pos_++];
    std::string v;
    while (pos_ < t_.size() && t_[pos_] != q) {
      if (t_[pos_] == '&') fail("entities (&...;) are not supported");
      if (t_[pos_] == '<') fail("'<' inside an attribute's value");
      if (v.size() >= kMaxValueBytes)
        fail("an attribute's value is over " + std::to_string(kMaxValueBytes) + " characters");
      v += t_[pos_];
      advance();
    }
    if (pos_ >= t_.size()) fail("the file ends inside an attribute's value (truncated?)");
    ++pos_;
    return v;
  }

  XmlTag openTag() {
    XmlTag tag;
    tag.line = line_;
    ++pos_;
    tag.name = name();
    for (;;) {
      skipSpace();
      if (pos_ >= t_.size()) fail("the file ends inside <" + tag.name + "> (truncated?)");
      if (startsWith("/>")) {
        pos_ += 2;
        tag.selfClosing = true;
        return tag;
      }
      if (t_[pos_] == '>') {
        ++pos_;
        return tag;
      }
      std::string key = name();
      skipSpace();
      if (pos_ >= t_.size()) fail("the file ends inside <" + tag.name + "> (truncated?)");
      if (t_[pos_] != '=') fail("attribute " + key + " has no '=' value");
      ++pos_;
      skipSpace();
      for (const auto& [k, v] : tag.attrs) {
        if (k == key) fail("attribute " + key + " given twice");
      }
      tag.attrs.emplace_back(std::move(key), quoted());
    }
  }

  void closeTag(std::vector<std::pair<std::string, int>>& stack,
                const std::function<void(const std::string&, int)>& close) {
    pos_ += 2;
    const std::string n = name();
    skipSpace();
    if (pos_ >= t_.size() || t_[pos_] != '>') fail("</" + n + " is not closed with '>'");
    ++pos_;
    if (stack.empty() || stack.back().first != n) {
      fail("</" + n + "> closes " + (stack.empty() ? "nothing" : "<" + stack.back().first + ">"));
    }
    stack.pop_back();
    close(n, line_);
  }

  std::string_view t_;
  const std::string& file_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

void readXml(std::string_view text, const std::string& file,
             const std::function<void(const XmlTag&)>& open,
             const std::function<void(const std::string& name, int line)>& close) {
  Reader(text, file).run(open, close);
}

}  // namespace arl::msccl
