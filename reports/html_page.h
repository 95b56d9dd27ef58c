// html_page.h: the frame of quantdiff's self-contained HTML reports
// (test-impl and check --report html): one file a person opens offline.
//
// The page loads nothing: its Content-Security-Policy forbids every fetch
// (default-src 'none'), its CSS and its one small script are inline, charts
// are inline SVG. Every string from a file under test or from the command
// line reaches the page through ForHtml (escape.h), and only in text or
// quoted attribute values, never in script, style or a URL.
//
//   std::string page = HtmlPageStart("quantdiff check: 2 files");
//   page += "<table id=\"matrix\">...</table>";
//   page += HtmlPageEnd();
#ifndef QUANTDIFF_REPORTS_HTML_PAGE_H_
#define QUANTDIFF_REPORTS_HTML_PAGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qd::reports {

// <!DOCTYPE html> up to the opened <body>, with the shared stylesheet; TITLE
// escaped here.
std::string HtmlPageStart(std::string_view title);
// The script that opens a <details> the address's #fragment names, and the
// closing tags.
std::string HtmlPageEnd();

// The CSS class of a verdict or outcome name: "o-" and its lowercase
// letters and dashes ("o-wrong-output"); the stylesheet colours the known ones.
std::string OutcomeClass(std::string_view outcome);

// A horizontal bar of WIDTH pixels as inline SVG, split in proportion to the
// counts, each part coloured by its outcome's class and titled "NAME: N".
std::string StackedBarSvg(const std::vector<std::pair<std::string, std::uint64_t>>& parts, int width);

// A legend: one swatch and name per outcome.
std::string LegendHtml(const std::vector<std::string>& outcomes);

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_HTML_PAGE_H_
