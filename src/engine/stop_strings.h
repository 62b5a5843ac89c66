// Stop strings over streamed text. Generated text arrives piece by piece (one token's bytes at a
// time); a stop string may span pieces. The matcher emits only text that cannot be the start of
// a stop string, holds back the rest, and when a stop string completes it emits the text before
// it and never the stop string itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ll3 {

class StopStringMatcher {
 public:
  // Empty stop strings are ignored. With hold_partial_utf8, emitted text also never ends inside
  // a UTF-8 character (see utf8.h), so every emitted piece can be printed as is.
  explicit StopStringMatcher(std::vector<std::string> stops, bool hold_partial_utf8 = true);

  struct Step {
    std::string_view emit;  // safe to output now; valid until the next call
    bool stopped = false;   // a stop string completed; generation should end
  };

  // Feed the next piece of generated text. After a stop, further pieces are ignored.
  Step feed(std::string_view piece);
  // Generation ended without a stop string: the held-back text, which is output after all.
  std::string_view flush();
  void reset();

  bool stopped() const { return matched_ >= 0; }
  // The stop string that ended generation ("" if none).
  std::string_view matched() const;
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  // Longest suffix of pending_ that is a proper prefix of some stop string.
  size_t held_suffix() const;
  std::string_view emit_prefix(size_t n);

  std::vector<std::string> stops_;
  bool hold_partial_utf8_;
  std::string pending_;  // received, not yet emitted
  std::string out_;      // what the last call returned
  int matched_ = -1;     // index into stops_ once stopped
};

}  // namespace ll3
