// The server's Prometheus metrics: counters and histograms it keeps itself (requests by status,
// time to first token, inter-token latency, request duration) and those it reads from the
// engine's stats at scrape time (tokens, prefix cache, preemptions, queue, KV usage, batch
// sizes). render() writes the text exposition format 0.0.4: # HELP and # TYPE before each
// family, cumulative _bucket{le="..."} ending with le="+Inf", then _sum and _count.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ll3/engine.h"

namespace ll3::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);  // thread-safe
  struct Snapshot {
    std::vector<double> bounds;   // upper bounds, ascending (+Inf implied)
    std::vector<uint64_t> counts; // per bucket, not cumulative: bounds.size() + 1 entries
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  Snapshot s_;
};

// What the server knows beyond the engine's stats, at scrape time.
struct ServerGauges {
  bool model_loaded = false;
  int64_t connections_open = 0;
  int64_t connections_total = 0;
  int64_t requests_in_flight = 0;  // HTTP requests with a generation running or queued
  std::vector<LoraInfo> loras;     // the loaded LoRA adapters, with their request counts
  int max_loras = 0;               // --max-loras (0: no bound)
};

class Metrics {
 public:
  Metrics();
  void count_request(int http_status);  // thread-safe
  void count_embeddings(int64_t inputs);  // a /v1/embeddings request and its inputs; thread-safe
  Histogram ttft, itl, duration;

  // The whole exposition; `stats` null while the model loads (its families read 0).
  std::string render(const EngineStats* stats, const ServerGauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> requests_;
  uint64_t embedding_requests_ = 0, embedding_inputs_ = 0;
};

// One histogram family in the exposition format (exposed for tests).
void write_histogram(std::string& out, const char* name, const char* help, const Histogram::Snapshot& s);

}  // namespace ll3::server
