#include "reports/html_page.h"

#include <cstdio>

#include "reports/escape.h"

namespace qd::reports {
namespace {

// Verdict colours: green passes, reds for the wrong verdict, violet for a
// wrong decode, greys for a process that never gave an answer. Readable on
// white and distinct for the common colour-vision deficiencies by lightness.
constexpr std::string_view kStyle = R"css(
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;
--pass:#2da44e;--fail:#cf222e;--accepted-invalid:#cf222e;--refused-valid:#e16f24;--other-rule:#d4a72c;
--wrong-output:#8250df;--signed-zero:#bf3989;--garbage:#7d4e24;--crashed:#24292f;--hung:#6e7781;
--error:#cf222e;--warning:#d4a72c;--divergence:#8250df}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);margin:0;background:#fff}
main{max-width:1180px;margin:0 auto;padding:20px 28px 48px}
h1{font-size:22px;margin:0 0 6px}
h2{font-size:17px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
pre{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:8px 10px;white-space:pre-wrap;word-break:break-all;margin:6px 0}
.verdict{display:inline-block;padding:4px 12px;border-radius:14px;color:#fff;font-weight:600;margin:4px 0 8px}
.verdict.o-pass{background:var(--pass)}.verdict.o-fail{background:var(--fail)}
.muted{color:var(--muted)}
table{border-collapse:collapse}
.counts td,.counts th{padding:5px 12px;border-bottom:1px solid var(--line);text-align:right}
.counts th:first-child,.counts td:first-child,.counts td.muted{text-align:left}
.counts th{background:var(--bg);font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:4px 0 10px;color:var(--muted)}
.legend span{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:13px;height:13px;border-radius:3px;background:var(--fail)}
#matrix th,#matrix td{padding:2px 6px;border-bottom:1px solid #eef1f4;text-align:left;white-space:nowrap}
#matrix thead th{background:var(--bg);position:sticky;top:0;font-weight:600}
#matrix tr.family th{background:#fff;padding-top:14px;font-size:14px;border-bottom:2px solid var(--line)}
#matrix td.n{color:var(--muted);text-align:right;font-variant-numeric:tabular-nums}
#matrix td.cells{display:flex;gap:3px;flex-wrap:wrap;padding:3px 6px}
.cell{display:inline-block;min-width:26px;height:20px;padding:0 3px;border-radius:3px;color:#fff;font-size:11px;line-height:20px;text-align:center;text-decoration:none;background:var(--fail)}
.badge{display:inline-block;padding:0 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600;margin-right:6px;background:var(--fail)}
a.cell{outline:2px solid transparent}a.cell:hover{outline-color:var(--fg)}
.o-pass{background:var(--pass)}.o-accepted-invalid{background:var(--accepted-invalid)}
.o-refused-valid{background:var(--refused-valid)}.o-other-rule{background:var(--other-rule);color:#1f2328}
.o-wrong-output{background:var(--wrong-output)}.o-signed-zero{background:var(--signed-zero)}
.o-garbage{background:var(--garbage)}.o-crashed{background:var(--crashed)}.o-hung{background:var(--hung)}
.o-error{background:var(--error)}.o-warning{background:var(--warning);color:#1f2328}
.o-divergence{background:var(--divergence)}.o-none{background:#eef1f4;color:var(--muted)}
.o-fail{background:var(--fail)}.o-mixed{background:var(--refused-valid)}
#impl-matrix th,#impl-matrix td{padding:3px 8px;border-bottom:1px solid #eef1f4;text-align:left;white-space:nowrap}
#impl-matrix thead th{background:var(--bg);position:sticky;top:0;font-weight:600}
#impl-matrix tr.family th{background:#fff;padding-top:14px;border-bottom:2px solid var(--line)}
#impl-matrix td.pf{color:#fff;text-align:center;font-variant-numeric:tabular-nums;border:2px solid #fff;border-radius:4px}
#impl-matrix td.pf.o-none{color:var(--muted)}
svg .o-pass{fill:var(--pass)}svg .o-accepted-invalid{fill:var(--accepted-invalid)}svg .o-refused-valid{fill:var(--refused-valid)}
svg .o-other-rule{fill:var(--other-rule)}svg .o-wrong-output{fill:var(--wrong-output)}svg .o-signed-zero{fill:var(--signed-zero)}
svg .o-garbage{fill:var(--garbage)}svg .o-crashed{fill:var(--crashed)}svg .o-hung{fill:var(--hung)}
svg .o-error{fill:var(--error)}svg .o-warning{fill:var(--warning)}svg .o-divergence{fill:var(--divergence)}
svg .o-none{fill:#d8dee4}svg rect{fill:var(--fail)}
details.item{border:1px solid var(--line);border-radius:6px;margin:8px 0;background:#fff}
details.item>summary{cursor:pointer;padding:7px 10px;list-style-position:inside}
details.item[open]>summary{border-bottom:1px solid var(--line);background:var(--bg)}
details.item .body{padding:8px 12px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:4px 0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;word-break:break-word}
table.bits td,table.bits th{padding:3px 10px;border-bottom:1px solid var(--line);text-align:left}
table.bits .b i{font-style:normal;padding:0 .5px}
table.bits .b i.d{background:#ffd8d3;color:#a40e26;font-weight:700;border-radius:2px}
table.bits .sep{display:inline-block;width:7px}
)css";

// Opens the drill-down a matrix link points at (past the first few they
// start closed); reads only the fragment, as an element ID (the page's IDs are
// ASCII, so no decoding that could throw on a malformed address).
constexpr std::string_view kScript = R"js(
function qdOpenTarget(){var id=location.hash.slice(1);var e=id?document.getElementById(id):null;if(e&&e.tagName==="DETAILS"){e.open=true;}}
window.addEventListener("hashchange",qdOpenTarget);qdOpenTarget();
)js";

}  // namespace

std::string HtmlPageStart(std::string_view title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         ForHtml(title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n<main>\n";
}

std::string HtmlPageEnd() { return "</main>\n<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n"; }

std::string OutcomeClass(std::string_view outcome) {
  std::string cls = "o-";
  for (const char c : outcome) {
    if ((c >= 'a' && c <= 'z') || c == '-') cls.push_back(c);
  }
  return cls;
}

std::string StackedBarSvg(const std::vector<std::pair<std::string, std::uint64_t>>& parts, int width) {
  std::uint64_t total = 0;
  for (const auto& part : parts) total += part.second;
  std::string svg = "<svg width=\"" + std::to_string(width) + "\" height=\"14\" viewBox=\"0 0 " +
                    std::to_string(width) + " 14\" role=\"img\">";
  double x = 0;
  for (const auto& [name, n] : parts) {
    if (n == 0 || total == 0) continue;
    const double w = static_cast<double>(width) * static_cast<double>(n) / static_cast<double>(total);
    char geometry[96];
    std::snprintf(geometry, sizeof geometry, "x=\"%.2f\" y=\"0\" width=\"%.2f\" height=\"14\"", x, w);
    svg += "<rect class=\"" + OutcomeClass(name) + "\" " + geometry + "><title>" + ForHtml(name) + ": " +
           std::to_string(n) + "</title></rect>";
    x += w;
  }
  return svg + "</svg>";
}

std::string LegendHtml(const std::vector<std::string>& outcomes) {
  std::string html = "<div class=\"legend\">";
  for (const std::string& o : outcomes) {
    html += "<span><i class=\"sw " + OutcomeClass(o) + "\"></i>" + ForHtml(o) + "</span>";
  }
  return html + "</div>\n";
}

}  // namespace qd::reports
