// The few pieces of HTML that `harness report` (analysis/report.h) builds its page from: escaping
// text and attribute values, anchor names, data: URIs, and gnuplot's SVG made fit to sit inline
// in an HTML page beside other SVGs.
#pragma once

#include <string>
#include <string_view>

namespace analysis::html {

// Text or an attribute value with & < > " ' escaped: any string, whatever it holds, reads as
// itself and never as markup.
std::string escape(std::string_view text);

// An anchor name from any text: ASCII letters, digits, '-' and '_' kept, anything else '-', and
// `prefix` in front (an id must not be empty, and starts with a letter here).
std::string anchor(std::string_view prefix, std::string_view text);

// `bytes` as a data: URI of `mime` type, percent-encoded (RFC 2397): a link to it needs no file.
std::string data_uri(std::string_view mime, std::string_view bytes);

// An SVG file's text (gnuplot's: an XML prolog, then <svg ...>...</svg>) as an element to put in
// an HTML page: the prolog dropped, every id (and every reference to one: href="#…", url(#…))
// prefixed with `id_prefix` so that several figures on one page do not share ids, its <title>
// replaced by `title`, and role="img" with that title as its accessible name. Throws
// std::runtime_error when `svg` holds no complete <svg> element.
std::string inline_svg(std::string_view svg, std::string_view id_prefix, std::string_view title);

}  // namespace analysis::html
