// escape.h: making untrusted text safe for each report medium.
//
// Tensor names, metadata and messages come from the files under test, so they
// may hold invalid UTF-8, control bytes or terminal escape sequences. Every
// writer passes such text through one of these before printing it.
//
//   std::fputs(qd::reports::ForTerminal(finding.tensor).c_str(), stdout);
#ifndef QUANTDIFF_REPORTS_ESCAPE_H_
#define QUANTDIFF_REPORTS_ESCAPE_H_

#include <string>
#include <string_view>

namespace qd::reports {

// Valid UTF-8 with every ill-formed sequence (RFC 3629: overlong forms,
// surrogates, values past U+10FFFF, truncations) replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);

// For a terminal or a log: valid UTF-8 kept, control characters (C0, DEL,
// C1) and bytes of ill-formed sequences written as \xNN, backslash as \\.
std::string ForTerminal(std::string_view text);

// For XML 1.0 text and attribute values: ValidUtf8, then & < > " ' escaped
// and the characters XML 1.0 cannot carry at all (C0 controls other than tab,
// newline and carriage return; U+FFFE, U+FFFF) replaced by U+FFFD.
std::string ForXml(std::string_view text);

// For HTML text and attribute values (quoted): the same escaping as ForXml,
// which leaves no character that could open a tag, an entity or end an
// attribute. Never for script, style or URL contexts.
inline std::string ForHtml(std::string_view text) { return ForXml(text); }

// For Markdown prose and GFM table cells: ValidUtf8, every ASCII punctuation
// character backslash-escaped (CommonMark 2.4, so no emphasis, link, HTML
// tag, code span or cell boundary can start), line breaks and tabs as
// spaces, other control characters as U+FFFD.
std::string ForMarkdown(std::string_view text);

// TEXT as a fenced code block (CommonMark 4.5) whose fence is one backtick
// longer than any run of backticks in TEXT, so TEXT cannot close it;
// ValidUtf8, control characters other than newline as U+FFFD.
std::string MarkdownCodeBlock(std::string_view text, std::string_view info = "");

// A relative URI reference for a file path (SARIF artifactLocation.uri):
// RFC 3986 unreserved characters and '/' kept, every other byte %XX.
std::string PathToUri(std::string_view path);

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_ESCAPE_H_
