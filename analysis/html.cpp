#include "analysis/html.h"

#include <fmt/format.h>

#include <regex>
#include <stdexcept>

namespace analysis::html {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string anchor(std::string_view prefix, std::string_view text) {
  std::string out(prefix);
  for (const char c : text) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    out += keep ? c : '-';
  }
  return out;
}

std::string data_uri(std::string_view mime, std::string_view bytes) {
  std::string out = fmt::format("data:{},", mime);
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || c == '~';
    out += plain ? std::string(1, ch) : fmt::format("%{:02X}", c);
  }
  return out;
}

std::string inline_svg(std::string_view svg, std::string_view id_prefix, std::string_view title) {
  const size_t begin = svg.find("<svg");
  const size_t end = svg.rfind("</svg>");
  if (begin == std::string_view::npos || end == std::string_view::npos || end < begin)
    throw std::runtime_error("not an SVG image: no <svg>...</svg> element");
  std::string body(svg.substr(begin, end + 6 - begin));
  const std::string prefix(id_prefix);
  // id='x' / id="x", href='#x' / xlink:href="#x", url(#x): the same prefix on both sides.
  static const std::regex id(R"((\sid\s*=\s*)(['"]))"), href(R"((href\s*=\s*)(['"])#)"), url(R"(url\(\s*#)");
  body = std::regex_replace(body, id, "$1$2" + prefix);
  body = std::regex_replace(body, href, "$1$2#" + prefix);
  body = std::regex_replace(body, url, "url(#" + prefix);
  // The document's own <title> (gnuplot's "Gnuplot", before the first group; the groups' titles
  // name the series and stay).
  const std::string named = fmt::format("<title>{}</title>", escape(title));
  const size_t open = body.find("<title>"), close = body.find("</title>", open), group = body.find("<g");
  if (open != std::string::npos && close != std::string::npos && (group == std::string::npos || open < group))
    body.replace(open, close + 8 - open, named);
  else
    body.insert(body.find('>') + 1, named);
  body.insert(4, fmt::format(" role=\"img\" aria-label=\"{}\"", escape(title)));
  return body;
}

}  // namespace analysis::html
