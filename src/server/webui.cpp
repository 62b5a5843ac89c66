#include "server/webui.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/sha256.h"
#include "server/openai_output.h"

namespace ll3::server {

namespace webui_data {
// Generated from webui/dist/index.html at build time (cmake/embed_webui.cmake).
extern const unsigned char kHtml[];
extern const size_t kHtmlSize;
extern const unsigned char kGzip[];
extern const size_t kGzipSize;
}  // namespace webui_data

namespace {

std::string base64(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63],
            kAlphabet[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

std::string sha256_base64(std::string_view data) {
  const std::string hex = sha256_hex(data);
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    raw.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return base64(raw);
}

// A CSP source for the content of the first <tag>...</tag> element: its hash, so that the
// policy allows exactly the page's own inline code and no injected code ('unsafe-inline' would).
std::string element_hash(std::string_view html, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  const size_t b = html.find(open);
  if (b == std::string_view::npos) return "'none'";
  const size_t e = html.find(close, b + open.size());
  if (e == std::string_view::npos) return "'none'";
  return "'sha256-" + sha256_base64(html.substr(b + open.size(), e - b - open.size())) + "'";
}

struct Page {
  std::string_view html, gzip;
  std::string etag;  // the identity representation's; the gzip'ed one's ends in -gz
  std::string csp;
};

const Page& page() {
  static const Page p = [] {
    Page r;
    r.html =
        std::string_view(reinterpret_cast<const char*>(webui_data::kHtml), webui_data::kHtmlSize);
    r.gzip =
        std::string_view(reinterpret_cast<const char*>(webui_data::kGzip), webui_data::kGzipSize);
    r.etag = sha256_hex(r.html).substr(0, 24);
    r.csp = "default-src 'none'; script-src " + element_hash(r.html, "script") + "; style-src " +
            element_hash(r.html, "style") +
            "; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'";
    return r;
  }();
  return p;
}

std::string trim_lower(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Accept-Encoding names gzip (or *) without q=0.
bool accepts_gzip(std::string_view accept) {
  size_t b = 0;
  while (b <= accept.size()) {
    size_t e = accept.find(',', b);
    if (e == std::string_view::npos) e = accept.size();
    const std::string_view item = accept.substr(b, e - b);
    const size_t semi = item.find(';');
    const std::string name = trim_lower(item.substr(0, semi));
    if (name == "gzip" || name == "x-gzip" || name == "*") {
      std::string params = semi == std::string_view::npos ? "" : trim_lower(item.substr(semi + 1));
      params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
      const bool refused =
          params.rfind("q=0", 0) == 0 && params.find_first_not_of("q=0.", 0) == std::string::npos;
      if (!refused) return true;
    }
    b = e + 1;
  }
  return false;
}

// If-None-Match lists one of the page's ETags (of either representation), or is *.
bool not_modified(std::string_view inm, const std::string& etag) {
  size_t b = 0;
  while (b <= inm.size()) {
    size_t e = inm.find(',', b);
    if (e == std::string_view::npos) e = inm.size();
    std::string t = trim_lower(inm.substr(b, e - b));
    if (t == "*") return true;
    if (t.rfind("w/", 0) == 0) t.erase(0, 2);
    if (t == "\"" + etag + "\"" || t == "\"" + etag + "-gz\"") return true;
    b = e + 1;
  }
  return false;
}

}  // namespace

bool is_webui_path(std::string_view path) { return path == "/" || path == "/index.html"; }

HttpResponse webui_response(const HttpRequest& req) {
  HttpResponse r;
  if (req.method != "GET") {
    ApiError e;
    e.status = 405;
    e.type = "invalid_request_error";
    e.message =
        "method " + req.method + " is not allowed on " + req.path + " (the chat page; use GET)";
    e.code = "method_not_allowed";
    r.status = 405;
    r.body = dump_json(error_json(e));
    r.headers.emplace_back("Allow", "GET");
    return r;
  }
  const Page& p = page();
  const bool gz = !p.gzip.empty() && accepts_gzip(req.header("accept-encoding"));
  const std::string etag = "\"" + p.etag + (gz ? "-gz" : "") + "\"";
  r.content_type = "text/html; charset=utf-8";
  // no-cache: the browser revalidates each time (a 304, cheap), so a new binary's page shows at
  // once.
  r.headers = {{"ETag", etag},
               {"Cache-Control", "no-cache"},
               {"Vary", "Accept-Encoding"},
               {"Content-Security-Policy", p.csp},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"}};
  if (not_modified(req.header("if-none-match"), p.etag)) {
    r.status = 304;
    return r;
  }
  if (gz) {
    r.headers.emplace_back("Content-Encoding", "gzip");
    r.body.assign(p.gzip);
  } else {
    r.body.assign(p.html);
  }
  return r;
}

}  // namespace ll3::server
