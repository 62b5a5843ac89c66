// The serving engine: many requests at once on one model, one thread pool and one paged KV
// cache. Requests are queued, admitted by priority and arrival, and run together in steps
// (continuous batching): each step computes the next token of every running sequence plus
// chunks of waiting prompts, reading the weights once. Full KV blocks are named by a hash of
// their tokens and shared between requests (prefix cache); a session keeps a conversation's KV
// pinned, and with a session directory, across restarts.
//
// Thread safety: every method may be called from any thread. Callbacks run on the engine's own
// thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ll3/limits.h"
#include "ll3/log.h"
#include "ll3/request.h"
#include "ll3/status.h"

namespace ll3 {

// How Model::load reads a checkpoint.
struct ModelLoadOptions {
  enum class Memory {
    kAuto,       // into huge pages when the model takes at most half the available memory, else mapped
    kMapped,     // used in place from the page cache: nothing copied
    kHugePages,  // read into huge pages: faster decode, costs the read at load
  };
  Memory memory = Memory::kAuto;
  // Keep the matrices as the file has them: no repacking into decode panels (slower decode).
  bool row_layout = false;
};

// A loaded checkpoint and its tokenizer, shareable by several engines. Opaque: made by load().
class Model {
 public:
  // path: a .gguf file or a Hugging Face directory.
  static Result<std::shared_ptr<const Model>> load(const std::string& path, const ModelLoadOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  std::string name() const;      // general.name, else the file name
  int64_t context_length() const;
  int64_t n_vocab() const;
  int64_t n_embd() const;        // the hidden state's width: an embedding's length
  // Tokenizer access for frontends (chat templates, /tokenize).
  std::vector<int32_t> encode(const std::string& text, bool add_bos, bool parse_special) const;
  std::string decode(const std::vector<int32_t>& tokens) const;

 private:
  friend struct ModelAccess;  // the library's own code (src/engine/model_impl.h)
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

enum class KvType { kF16, kF32, kQ8_0, kQ4_0 };

// Speculative decoding: each step also verifies guesses of a sequence's next tokens, keeping
// those the model agrees with. Greedy output is the output without it, token for token; sampled
// output keeps the model's distribution exactly (Leviathan et al.'s rejection rule).
enum class SpecMode {
  kOff,
  kNgram,  // prompt lookup: guesses copied from what followed the same words earlier in the sequence
  kDraft,  // a draft model's greedy guesses (EngineOptions::draft_model)
};

// A LoRA adapter to load (model/lora.h): a llama.cpp GGUF adapter or a PEFT directory, its
// name (what Request::loras and the API's "model" call it) and default scale.
struct LoraSpec {
  std::string name, path;
  float scale = 1.0f;
};

// A loaded adapter, as Engine::loras() lists it.
struct LoraInfo {
  std::string name, path, format;  // format: "gguf" or "peft"
  float scale = 1.0f;
  int64_t rank = 0;          // the largest of its products
  int64_t bytes = 0;         // of its A and B
  int64_t requests = 0;      // requests submitted with it so far
  int64_t running = 0;       // requests with it not yet finished
};

struct EngineOptions {
  int threads = 0;               // 0: all cores
  // The KV pool, shared by all sequences: kv_memory bytes, else ctx tokens, else
  // min(model context, 16384) tokens.
  int64_t kv_memory = 0;
  int64_t ctx = 0;
  KvType kv_type = KvType::kF16;
  int64_t block_size = 16;       // positions per KV block
  int64_t max_seqs = 64;         // sequences running at once
  int64_t batch_tokens = 256;    // tokens per step (decode rows + prompt chunks)
  // Inter-token latency target of running streams while prompts are prefilled beside them: a
  // step with decode rows takes only as many prompt tokens as a cost model, learned from this
  // engine's own steps, predicts to fit. 0: 2.2x the step of the decode rows alone (streams slow
  // at most that much during a long prefill); negative: no target, every step up to batch_tokens.
  double itl_target_ms = 0;
  double batch_wait_ms = 2;      // an idle engine waits this long to gather arrivals into one step
  int64_t max_queue = 1024;      // waiting requests beyond this are rejected
  bool prefix_cache = true;
  // Sessions: pinned KV within session_memory bytes (0: a quarter of the pool); with
  // session_dir, saved when each turn ends (by a writer thread: steps never wait for the disk)
  // and restored on demand, also by another engine sharing the directory.
  int64_t session_memory = 0;
  std::string session_dir;
  // Quantized weights: 8-bit activations and integer dot products (llama.cpp's arithmetic), or
  // float activations. amx_prompts: AMX bf16 tiles for prompts where present (another answer).
  bool int8_activations = true;
  bool amx_prompts = false;
  // Layers on the CUDA device: -1 all of them when a device is usable and they fit (else the
  // CPU, saying why), 0 none; a positive count asks for the GPU and fails without one. A count
  // below the model's layers splits it: the first layers on the CPU, the last ones on the GPU.
  int gpu_layers = -1;
  // Most bytes of device memory the GPU part may take (0: what the device has free); with
  // gpu_layers -1, a model larger than that runs on the CPU and the log says which -ngl fits.
  long long gpu_memory = 0;
  // Layers whose weights do not fit on the GPU (gpu_layers below the count, or gpu_memory): run
  // by the CPU (false) or by the GPU reading their weights from pinned host memory (true).
  bool host_weights_pinned = false;
  // Speculation (see SpecMode). How many tokens to guess adapts per sequence to its acceptance
  // rate and to the step's load, between spec_min_guesses and spec_max_guesses (a minimum
  // guesses whatever the cost: llama.cpp's --draft-min); requests opt out by
  // Request::speculative. draft_model: same vocabulary as the model.
  SpecMode spec = SpecMode::kOff;
  std::shared_ptr<const Model> draft_model;
  int spec_max_guesses = 8;
  int spec_min_guesses = 0;
  // LoRA adapters loaded at create (names unique); lora_runtime: load_lora / unload_lora may
  // add and remove adapters later. Either needs the CPU runner (the GPU runner has no LoRA
  // products): with gpu_layers -1 the engine then runs on the CPU, saying so. max_loras: the
  // most adapters held at once (0: no bound); loading one more unloads the least recently used
  // adapter no request runs with, or fails when every one is in use.
  std::vector<LoraSpec> loras;
  bool lora_runtime = false;
  int max_loras = 0;
  // Where this engine's messages go (the device it runs on, session files it could not use);
  // empty: the process-wide callback (set_log_callback), by default stderr.
  LogCallback log;
};

struct EngineStats {
  int64_t requests_running = 0, requests_waiting = 0;
  int64_t requests_finished = 0, requests_rejected = 0;
  int64_t prompt_tokens = 0;       // prompt tokens of admitted requests
  int64_t prompt_tokens_cached = 0;  // of which came from the prefix cache or a session
  int64_t prompt_tokens_computed = 0;  // prompt tokens run through the model (recomputes included)
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t kv_blocks = 0, kv_blocks_used = 0, kv_blocks_cached = 0;
  int64_t block_size = 0;
  int64_t sessions = 0, session_blocks = 0;
  int64_t sessions_saved = 0, sessions_restored = 0, session_files_rejected = 0;
  int64_t spec_guessed = 0;   // guessed tokens verified (speculation)
  int64_t spec_accepted = 0;  // of which the model agreed with
  int64_t max_seq_tokens = 0;  // the longest sequence (prompt + generation) a request may have
  // Steps by how many tokens and how many sequences they ran: counts per bucket, bucket i
  // holding sizes in (kStepBucketBounds[i-1], kStepBucketBounds[i]] (the last: above 1024).
  static constexpr int kStepBuckets = 12;
  std::array<int64_t, kStepBuckets> step_tokens{}, step_seqs{};
  int64_t step_tokens_sum = 0, step_seqs_sum = 0;
  // The step cost model (seconds = base + per decode row + per prompt token + per query-position
  // pair of attention) as fitted so far, and the inter-token target of the last step it bounded.
  std::array<double, 4> step_cost{};
  double itl_target_s = 0;
};
inline constexpr std::array<double, EngineStats::kStepBuckets - 1> kStepBucketBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

using RequestId = uint64_t;

class Engine {
 public:
  struct Impl;
  static Result<std::unique_ptr<Engine>> create(const std::string& model_path, const EngineOptions& options);
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model, const EngineOptions& options);
  // Cancels what is still running, saves sessions (with session_dir) and joins the thread.
  ~Engine();

  // Queues a request and returns at once. Fails without queueing (and without calling any
  // callback) when the request is invalid, can never fit the context or the KV pool (the
  // numbers in the message), or the queue is full.
  Result<RequestId> submit(Request request);
  // Stops a queued or running request: its on_finish runs with kCancelled and its KV blocks are
  // freed within one step. False if the id is unknown or already finished.
  bool cancel(RequestId id);

  // Runs a request to its end on the calling thread's behalf: the generated text and tokens.
  struct Completion {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TokenEvent> events;
    FinishInfo finish;
  };
  Result<Completion> generate(Request request);

  // Waits until no request is queued or running and no session file is being written (e.g.
  // before reading stats in a test).
  void wait_idle();
  // Waits for the session writes in flight, then saves any session still unsaved (session_dir).
  Status save_sessions();

  EngineStats stats() const;

  // LoRA adapters (EngineOptions::lora_runtime, or loras given at create). load_lora fails on a
  // name already loaded, a file that does not fit the model (what and where), or a full cache
  // of adapters all in use (kConflict); unload_lora on an unknown name (kNotFound) or one that a
  // queued or running request uses (kConflict).
  Status load_lora(const LoraSpec& spec);
  Status unload_lora(const std::string& name);
  std::vector<LoraInfo> loras() const;
  // Where the steps run: "cpu", or "cuda:0 NVIDIA H200, 32 of 32 layers".
  std::string where() const;
  const Model& model() const;
  const EngineOptions& options() const;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ll3
