// The small part of XML that MSCCL's algorithm files use: a declaration, comments, elements
// with quoted attributes, and white space between them. No entities, CDATA, DOCTYPE or text
// content: a file that has them is refused with its line, as is anything malformed.
// Private to core/schedule (msccl_import.cpp).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace arl::msccl {

struct XmlTag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  int line = 0;
  bool selfClosing = false;
};

// Calls `open` for every start tag (and self-closing tag) and `close` for every end tag
// (and after a self-closing tag's open), in document order, after checking that the tags
// nest. Throws MscclImportError naming `file` and the line.
void readXml(std::string_view text, const std::string& file,
             const std::function<void(const XmlTag&)>& open,
             const std::function<void(const std::string& name, int line)>& close);

}  // namespace arl::msccl
