#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "ll3/status.h"

namespace ll3::server {

Histogram::Histogram(std::vector<double> bounds) {
  s_.bounds = std::move(bounds);
  s_.counts.assign(s_.bounds.size() + 1, 0);
}

void Histogram::observe(double v) {
  if (!std::isfinite(v)) return;
  const size_t b = static_cast<size_t>(std::lower_bound(s_.bounds.begin(), s_.bounds.end(), v) - s_.bounds.begin());
  std::lock_guard<std::mutex> lk(mu_);
  ++s_.counts[b];
  s_.sum += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return s_;
}

namespace {

// Prometheus floats: shortest round-trip form, +Inf spelled as the format wants.
std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return strprintf("%lld", static_cast<long long>(v));
  for (int digits = 6; digits < 17; ++digits) {
    std::string s = strprintf("%.*g", digits, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return strprintf("%.17g", v);
}

// A label value as the exposition format quotes it: backslash, double quote and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += strprintf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void counter(std::string& out, const char* name, const char* help, double v) {
  family(out, name, "counter", help);
  out += strprintf("%s %s\n", name, num(v).c_str());
}

void gauge(std::string& out, const char* name, const char* help, double v) {
  family(out, name, "gauge", help);
  out += strprintf("%s %s\n", name, num(v).c_str());
}

// Lifetimes: 1 ms .. 80 s (vLLM's TTFT buckets, extended below for small models).
const std::vector<double> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,
                                            0.5,    0.75,  1,      2.5,   5,    7.5,  10,   20,   40,   80};
const std::vector<double> kDurationBounds = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1,  1.5, 2,   2.5, 5,
                                             10,   15,   20,  30,  40,  50,  60, 120, 240, 480, 960};

}  // namespace

void write_histogram(std::string& out, const char* name, const char* help, const Histogram::Snapshot& s) {
  family(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < s.counts.size(); ++i) {
    cum += s.counts[i];
    const std::string le = i < s.bounds.size() ? num(s.bounds[i]) : "+Inf";
    out += strprintf("%s_bucket{le=\"%s\"} %llu\n", name, le.c_str(), static_cast<unsigned long long>(cum));
  }
  out += strprintf("%s_sum %s\n%s_count %llu\n", name, num(s.sum).c_str(), name, static_cast<unsigned long long>(cum));
}

Metrics::Metrics() : ttft(kLatencyBounds), itl(kLatencyBounds), duration(kDurationBounds) {}

void Metrics::count_request(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[status];
}

void Metrics::count_embeddings(int64_t inputs) {
  std::lock_guard<std::mutex> lk(mu_);
  ++embedding_requests_;
  embedding_inputs_ += static_cast<uint64_t>(inputs);
}

std::string Metrics::render(const EngineStats* stats, const ServerGauges& g) const {
  const EngineStats none;
  const EngineStats& st = stats ? *stats : none;
  std::string out;
  out.reserve(8192);
  {
    family(out, "ll3_requests_total", "counter", "HTTP requests answered, by status code.");
    std::lock_guard<std::mutex> lk(mu_);
    std::map<int, uint64_t> by = requests_;
    by.emplace(200, 0);  // the family always has a sample
    for (const auto& [status, n] : by) {
      out += strprintf("ll3_requests_total{status=\"%d\"} %llu\n", status, static_cast<unsigned long long>(n));
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    counter(out, "ll3_embedding_requests_total", "Requests to /v1/embeddings that were accepted.",
            static_cast<double>(embedding_requests_));
    counter(out, "ll3_embedding_inputs_total", "Inputs of those requests (one engine request each).",
            static_cast<double>(embedding_inputs_));
  }
  counter(out, "ll3_prompt_tokens_total", "Prompt tokens of requests the engine admitted.", static_cast<double>(st.prompt_tokens));
  counter(out, "ll3_generation_tokens_total", "Tokens generated.", static_cast<double>(st.generated_tokens));
  counter(out, "ll3_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache and sessions.",
          static_cast<double>(st.prompt_tokens));
  counter(out, "ll3_prefix_cache_hits_total", "Prompt tokens whose KV came from the prefix cache or a session.",
          static_cast<double>(st.prompt_tokens_cached));
  counter(out, "ll3_prompt_tokens_computed_total", "Prompt tokens run through the model (recomputation included).",
          static_cast<double>(st.prompt_tokens_computed));
  counter(out, "ll3_preemptions_total", "Sequences preempted for lack of KV blocks.", static_cast<double>(st.preemptions));
  counter(out, "ll3_requests_rejected_total", "Requests the engine refused because its queue was full.",
          static_cast<double>(st.requests_rejected));
  counter(out, "ll3_engine_steps_total", "Forward steps the engine ran.", static_cast<double>(st.steps));
  counter(out, "ll3_spec_drafted_tokens_total", "Guessed tokens verified by speculative decoding.",
          static_cast<double>(st.spec_guessed));
  counter(out, "ll3_spec_accepted_tokens_total", "Guessed tokens the model agreed with (kept).",
          static_cast<double>(st.spec_accepted));
  counter(out, "ll3_http_connections_total", "TCP connections accepted.", static_cast<double>(g.connections_total));
  write_histogram(out, "ll3_time_to_first_token_seconds", "Time from submission to the first generated token.", ttft.snapshot());
  write_histogram(out, "ll3_inter_token_latency_seconds", "Time between consecutive tokens of a request.", itl.snapshot());
  write_histogram(out, "ll3_request_duration_seconds", "Time from a request's headers to the end of its response.",
                  duration.snapshot());
  for (int which = 0; which < 2; ++which) {
    Histogram::Snapshot s;
    s.bounds.assign(kStepBucketBounds.begin(), kStepBucketBounds.end());
    const auto& counts = which == 0 ? st.step_tokens : st.step_seqs;
    s.counts.assign(counts.begin(), counts.end());
    s.sum = static_cast<double>(which == 0 ? st.step_tokens_sum : st.step_seqs_sum);
    if (which == 0) {
      write_histogram(out, "ll3_batch_tokens", "Tokens per engine step (decode rows plus prompt chunks).", s);
    } else {
      write_histogram(out, "ll3_batch_sequences", "Sequences per engine step.", s);
    }
  }
  gauge(out, "ll3_requests_running", "Sequences the engine is running.", static_cast<double>(st.requests_running));
  gauge(out, "ll3_requests_waiting", "Requests queued in the engine.", static_cast<double>(st.requests_waiting));
  gauge(out, "ll3_kv_cache_usage_ratio", "Fraction of KV blocks held by sequences and sessions (cached blocks excluded).",
        st.kv_blocks > 0 ? static_cast<double>(st.kv_blocks_used) / static_cast<double>(st.kv_blocks) : 0.0);
  gauge(out, "ll3_kv_cache_blocks_used", "KV blocks held by sequences and sessions.", static_cast<double>(st.kv_blocks_used));
  gauge(out, "ll3_kv_cache_blocks_cached", "Unreferenced KV blocks kept for the prefix cache.", static_cast<double>(st.kv_blocks_cached));
  gauge(out, "ll3_kv_cache_blocks", "KV blocks in the pool.", static_cast<double>(st.kv_blocks));
  gauge(out, "ll3_sessions", "Sessions with pinned KV.", static_cast<double>(st.sessions));
  gauge(out, "ll3_spec_acceptance_rate", "Share of guessed tokens kept since the start (0 before any guess).",
        st.spec_guessed > 0 ? static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_guessed) : 0.0);
  gauge(out, "ll3_http_connections_open", "Open TCP connections.", static_cast<double>(g.connections_open));
  gauge(out, "ll3_http_requests_in_flight", "Generation requests not yet answered.", static_cast<double>(g.requests_in_flight));
  gauge(out, "ll3_model_loaded", "1 once the model is loaded and the engine serves.", g.model_loaded ? 1 : 0);
  // Per LoRA adapter (label adapter: its name).
  gauge(out, "ll3_lora_adapters_loaded", "LoRA adapters loaded.", static_cast<double>(g.loras.size()));
  {
    // vLLM's vllm:lora_requests_info shape, which gateways' endpoint pickers read for adapter
    // affinity: the adapters with requests as a label, the time as the value.
    std::string running;
    for (const LoraInfo& l : g.loras) {
      if (l.running > 0) running += (running.empty() ? "" : ",") + label_value(l.name);
    }
    family(out, "ll3_lora_requests_info", "gauge", "LoRA adapters with requests queued or running (label), at this time (value).");
    out += strprintf("ll3_lora_requests_info{max_lora=\"%d\",running_lora_adapters=\"%s\",waiting_lora_adapters=\"\"} %.3f\n", g.max_loras,
                     running.c_str(), static_cast<double>(std::time(nullptr)));
  }
  if (!g.loras.empty()) {
    family(out, "ll3_lora_requests_total", "counter", "Requests submitted with each LoRA adapter.");
    for (const LoraInfo& l : g.loras) {
      out += strprintf("ll3_lora_requests_total{adapter=\"%s\"} %lld\n", label_value(l.name).c_str(), static_cast<long long>(l.requests));
    }
    family(out, "ll3_lora_requests_running", "gauge", "Requests with each LoRA adapter queued or running.");
    for (const LoraInfo& l : g.loras) {
      out += strprintf("ll3_lora_requests_running{adapter=\"%s\"} %lld\n", label_value(l.name).c_str(), static_cast<long long>(l.running));
    }
  }
  return out;
}

}  // namespace ll3::server
