// Constrained sampling (Request::grammar): each token of a constrained sequence is one its
// grammar can continue with, and its output ends where the grammar does.
//
// The common case costs one trial: the row is sampled as usual and the token tried on a copy of
// the sequence's matcher. Only a refused token pays for the full set of allowed tokens (one walk
// of the vocabulary trie with the matcher's state) and a second draw among them. For greedy the
// answer is the best allowed token either way; for a draw, "keep an allowed draw, else draw
// among the allowed" gives each allowed token p(t) + (1 - p(allowed)) p(t) / p(allowed) =
// p(t) / p(allowed): the model's distribution restricted to the grammar (with top-k / top-p
// truncation, both draws truncate their own candidates, as llama.cpp's two-stage check does).
//
// A sequence never runs out of tokens inside its grammar: every token keeps the fewest bytes that
// would complete the match within the tokens left (max_tokens, the context; each byte is a token
// in byte-level BPE), so an answer cut by max_tokens still parses, given max_tokens at least the
// grammar's shortest output.
#include <algorithm>

#include "engine/engine_impl.h"

namespace ll3 {

// At submit: the vocabulary's trie (once per engine), and no speculation: guesses would have to
// be checked against the grammar too, for little gain on short structured answers.
void Engine::Impl::prepare_grammar(Request& r) {
  if (!r.grammar) return;
  r.speculative = false;
  std::call_once(token_filter_once, [&] {
    const int64_t V = m.config.n_vocab;
    std::vector<std::string> bytes(static_cast<size_t>(V));
    std::vector<int32_t> ends;
    for (int32_t id = 0; id < V && id < tok.n_vocab(); ++id) {
      if (tok.is_eog(id)) ends.push_back(id);
      // Control and user-defined tokens stand for themselves, not for their text: never part of
      // a constrained output.
      const int type = tok.vocab().token_types[static_cast<size_t>(id)];
      if (type == kTokenNormal || type == kTokenByte) bytes[static_cast<size_t>(id)] = std::string(tok.piece(id));
    }
    token_filter = std::make_unique<grammar::TokenFilter>(std::move(bytes), std::move(ends));
    grammar_trial.resize(static_cast<size_t>(pool->size()));
    grammar_allowed.assign(static_cast<size_t>(pool->size()), std::vector<uint8_t>(static_cast<size_t>(V)));
  });
}

// The next token of a constrained sequence from its logits row, its matcher advanced past it.
int32_t Engine::Impl::sample_constrained(int thread, Seq* s, const float* row, std::span<const int32_t> history) {
  grammar::Matcher& g = *s->grammar;
  // Tokens left, this one included.
  const int64_t budget = std::min(s->max_len, max_seq_tokens) - static_cast<int64_t>(history.size());
  // The invariant: the fewest bytes that complete the match fit in the tokens left. A draw that
  // keeps it is taken; else the allowed set is narrowed to tokens that keep it, which exist
  // while it holds (each byte is a token).
  std::optional<grammar::Matcher>& trial = grammar_trial[static_cast<size_t>(thread)];
  const int32_t t0 = samplers[thread]->verify(s->sampler, row, history, -1, nullptr);
  if (tok.is_eog(t0)) {
    if (g.can_end()) return t0;
  } else {
    trial = g;
    if (trial->accept(tok.piece(t0)) && trial->min_bytes_to_end() <= budget - 1) {
      std::swap(g, *trial);
      return t0;
    }
  }
  std::vector<uint8_t>& allowed = grammar_allowed[static_cast<size_t>(thread)];
  token_filter->allowed(g, budget, allowed);
  auto none = [&] { return std::find(allowed.begin(), allowed.end(), 1) == allowed.end(); };
  if (none()) {
    // max_tokens below the grammar's shortest completion: the answer cannot be whole, so it
    // goes on as far as it can and ends by length (the finish reason says it is cut).
    token_filter->allowed(g, -1, allowed);
    // Nothing can follow at all: not reached with a grammar that can always finish (the
    // compiler checks that); an end token ends the request rather than a token outside it.
    if (none()) return tok.eos_id() >= 0 ? tok.eos_id() : tok.eot_id();
  }
  int32_t t = samplers[thread]->sample_allowed(s->sampler, row, history, allowed.data());
  if (!allowed[static_cast<size_t>(t)]) {
    // Every allowed logit was -inf (or NaN): the first allowed token, deterministically.
    t = static_cast<int32_t>(std::find(allowed.begin(), allowed.end(), 1) - allowed.begin());
  }
  if (!tok.is_eog(t)) g.accept(tok.piece(t));
  return t;
}

}  // namespace ll3
