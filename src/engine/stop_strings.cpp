#include "engine/stop_strings.h"

#include <algorithm>

#include "engine/utf8.h"

namespace ll3 {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool hold_partial_utf8)
    : hold_partial_utf8_(hold_partial_utf8) {
  size_t longest = 0;
  for (auto& s : stops) {
    if (s.empty()) continue;
    longest = std::max(longest, s.size());
    stops_.push_back(std::move(s));
  }
  // pending_ never holds more than a stop's worth plus one piece; reserve so that typical
  // pieces do not reallocate on the token path.
  pending_.reserve(longest + 256);
  out_.reserve(longest + 256);
}

void StopStringMatcher::reset() {
  pending_.clear();
  out_.clear();
  matched_ = -1;
}

std::string_view StopStringMatcher::matched() const {
  return matched_ >= 0 ? std::string_view(stops_[size_t(matched_)]) : std::string_view();
}

size_t StopStringMatcher::held_suffix() const {
  size_t best = 0;
  const std::string_view text(pending_);
  for (const std::string& s : stops_) {
    size_t max_k = std::min(s.size() - 1, text.size());
    for (size_t k = max_k; k > best; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

std::string_view StopStringMatcher::emit_prefix(size_t n) {
  out_.assign(pending_, 0, n);
  pending_.erase(0, n);
  return out_;
}

StopStringMatcher::Step StopStringMatcher::feed(std::string_view piece) {
  if (stopped()) return {std::string_view(), true};
  pending_.append(piece);

  // The stop that completes first (smallest end), and of those the one that starts first: this
  // is what feeding byte by byte would find, so the result does not depend on how the text is
  // cut into pieces. No occurrence can begin in text already emitted: that text was emitted only
  // because no suffix of it was the start of a stop string.
  size_t first = std::string::npos, first_end = std::string::npos;
  for (size_t k = 0; k < stops_.size(); ++k) {
    size_t pos = pending_.find(stops_[k]);
    if (pos == std::string::npos) continue;
    size_t end = pos + stops_[k].size();
    if (end < first_end || (end == first_end && pos < first)) {
      first = pos;
      first_end = end;
      matched_ = int(k);
    }
  }
  if (first != std::string::npos) {
    Step step{emit_prefix(first), true};
    pending_.clear();
    return step;
  }

  size_t n = pending_.size() - held_suffix();
  if (hold_partial_utf8_) n = utf8_complete_prefix(std::string_view(pending_).substr(0, n));
  return {emit_prefix(n), false};
}

std::string_view StopStringMatcher::flush() {
  if (stopped()) return std::string_view();
  return emit_prefix(pending_.size());
}

}  // namespace ll3
