// The chat page of ll3 serve (webui/: built into webui/dist/index.html, compiled into the binary
// by cmake/embed_webui.cmake), answered at / and /index.html. The page is public like the rest
// of a static site; the API calls it makes carry the key.
#pragma once

#include <string_view>

#include "server/http_server.h"

namespace ll3::server {

// Whether `path` is the page's ("/" or "/index.html").
bool is_webui_path(std::string_view path);

// The answer to a request for the page: 200 with the page (gzip'ed when the client accepts it),
// 304 when If-None-Match names its ETag, 405 for a method other than GET. Always with a
// Content-Security-Policy that lets the page run only its own inline script and style and talk
// only to this server.
HttpResponse webui_response(const HttpRequest& req);

}  // namespace ll3::server
