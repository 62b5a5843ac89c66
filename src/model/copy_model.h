// A hand-built "induction" model: a preset's exact shape and cost (so it runs as slowly as a real
// model of that size), with weights constructed rather than trained so that greedy decoding
// copies from its context the way a trained model's induction heads do. It exists to benchmark
// speculative decoding by prompt lookup (`ll3 run --spec ngram`), which random weights cannot
// show: they never repeat their context.
//
// The residual stream holds a few subspaces (copy_model.cpp has the layout):
//   A   token identity: a seeded random unit vector per token (scaled), read by the tied output;
//   C   match codes of the token: short random unit vectors, one per KV head and n-gram element;
//   B1..B6  codes of the tokens 1..6 positions back (written by the first layer or three);
//   c   a constant, which gives the previous-token heads position-only queries and keys.
// Previous-token heads: constant queries and keys in the fastest RoPE pairs, the key turned by
// s positions, so that position i attends to i - s alone; the values move C into Bs. The
// induction layer after them (layer 1 when there are 8 KV heads): the query is the codes of the
// last six tokens, the key at j the codes of the six tokens before j, both in the slowest
// RoPE pairs (relative position hardly turns them), weighted so that matching the last token
// counts most and each earlier one less; so position i attends to the j after the longest
// match of its last tokens (several j when that match repeats: their followers then share the
// vote). The value is A at j, the token that followed the match, added into A with a gain of 8
// so the tied output prefers it to the current token. Each KV head matches with its own codes
// and copies its own slice of A: the heads vote. Every other weight is zero (other heads, all
// feed-forward blocks, later layers).
//
// Good for contexts of a few thousand tokens: beyond that the faster of the matching pairs turn
// enough to blur the longer matches (the last token's still match over ~100k positions).
#pragma once

#include <string>

#include "core/status.h"
#include "io/llama_config.h"
#include "model/presets.h"

namespace ll3 {

struct TokenizerVocab;

// Whether `c` can hold the construction: head size 64 or more, room in dim for the subspaces,
// and enough layers for the previous-token heads (1 with 8 KV heads, 3 with 2) and the
// induction layer. The error says what is missing.
Status check_copy_shape(const LlamaConfig& c);

// Writes `preset` with the copying weights (opt.seed picks the random token vectors and codes;
// the same seed gives the same bytes on any thread count).
Status write_copy_model(const ModelPreset& preset, const TokenizerVocab& vocab,
                        const MakeModelOptions& opt, const std::string& out_path);

}  // namespace ll3
