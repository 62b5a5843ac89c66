// Runs llama.cpp (through its C API) on given token ids, as the golden files in
// ../shared/models/golden were made: F32 KV cache, flash attention off, one batch with logits at
// every position. Writes the logits (float32, n_tokens x n_vocab) and, with PROBE_DUMP=DIR,
// every F32 node of the graph as DIR/NNN_<node name>.f32 in graph order, so that
// `ll3 logits --dump-activations` can be compared op by op (compare_activations.py).
// With PROBE_LORA=PATH[:SCALE] a LoRA adapter is applied (llama_set_adapters_lora).
// With PROBE_BENCH=PP,TG it times instead: a prompt of PP tokens (the token file's, repeated)
// and TG tokens decoded one at a time, median of 3, and prints t/s as llama-bench does.
// Built and run by llama-cpp-ref.sh; not part of ll3.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static const char* dump_dir;
static int dump_count;

static bool dump_node(struct ggml_tensor* t, bool ask, void* user) {
  (void)user;
  if (ask) return t->type == GGML_TYPE_F32;
  if (!ggml_is_contiguous(t)) return true;
  char path[1024];
  snprintf(path, sizeof path, "%s/%03d_%s.f32", dump_dir, dump_count++, t->name);
  for (char* p = path + strlen(dump_dir) + 1; *p; ++p) {
    if (*p == ' ' || *p == '(' || *p == ')') *p = '_';
  }
  FILE* f = fopen(path, "wb");
  if (f) {
    fwrite(t->data, 1, ggml_nbytes(t), f);
    fclose(f);
  }
  return true;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

// Prompt of pp tokens, then tg single-token steps, 3 times from an empty cache: the medians.
static int bench(struct llama_model* model, const int* tokens, int n, int pp, int tg, int threads) {
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = pp + tg + 16;
  cp.n_batch = cp.n_ubatch = pp > 0 ? pp : 1;
  cp.n_threads = cp.n_threads_batch = threads;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  double tp[3], tt[3];
  for (int rep = 0; rep < 3; ++rep) {
    llama_memory_clear(llama_get_memory(ctx), true);
    struct llama_batch b = llama_batch_init(pp > 0 ? pp : 1, 0, 1);
    for (int i = 0; i < pp; i++) {
      b.token[i] = tokens[i % n];
      b.pos[i] = i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = i == pp - 1;
    }
    b.n_tokens = pp;
    double t0 = now_s();
    if (pp > 0 && llama_decode(ctx, b)) return 1;
    tp[rep] = now_s() - t0;
    t0 = now_s();
    for (int i = 0; i < tg; i++) {
      b.token[0] = tokens[i % n];
      b.pos[0] = pp + i;
      b.n_seq_id[0] = 1;
      b.seq_id[0][0] = 0;
      b.logits[0] = 1;
      b.n_tokens = 1;
      if (llama_decode(ctx, b)) return 1;
    }
    tt[rep] = now_s() - t0;
    llama_batch_free(b);
  }
  qsort(tp, 3, sizeof(double), cmp_double);
  qsort(tt, 3, sizeof(double), cmp_double);
  if (pp > 0) printf("pp%d: %.2f t/s\n", pp, pp / tp[1]);
  if (tg > 0) printf("tg%d: %.2f t/s\n", tg, tg / tt[1]);
  llama_free(ctx);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: llama_probe MODEL TOKENS_FILE OUT.f32 CPU_BACKEND.so [threads]\n");
    return 2;
  }
  if (!ggml_backend_load(argv[4])) {
    fprintf(stderr, "llama_probe: cannot load the CPU backend %s (does this CPU have its instructions?)\n", argv[4]);
    return 1;
  }
  llama_backend_init();
  struct llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;

  static int tokens[65536];
  int n = 0;
  FILE* tf = fopen(argv[2], "r");
  if (!tf) return 1;
  while (n < 65536 && fscanf(tf, "%d%*[, \n]", &tokens[n]) == 1) n++;
  fclose(tf);

  const char* bench_spec = getenv("PROBE_BENCH");
  if (bench_spec) {
    int pp = 0, tg = 0;
    if (sscanf(bench_spec, "%d,%d", &pp, &tg) != 2) return 2;
    return bench(model, tokens, n, pp, tg, argc > 5 ? atoi(argv[5]) : 2);
  }

  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n < 512 ? 512 : n;
  cp.n_batch = cp.n_ctx;
  cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = argc > 5 ? atoi(argv[5]) : 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  dump_dir = getenv("PROBE_DUMP");
  if (dump_dir) cp.cb_eval = dump_node;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  // PROBE_LORA=PATH[:SCALE]: a LoRA adapter on the context, as llama-cli --lora-scaled does.
  const char* lora = getenv("PROBE_LORA");
  if (lora) {
    char path[4096];
    snprintf(path, sizeof path, "%s", lora);
    float scale = 1.0f;
    char* colon = strrchr(path, ':');
    if (colon) {
      scale = strtof(colon + 1, NULL);
      *colon = 0;
    }
    struct llama_adapter_lora* ad = llama_adapter_lora_init(model, path);
    if (!ad || llama_set_adapters_lora(ctx, &ad, 1, &scale) != 0) {
      fprintf(stderr, "llama_probe: cannot apply the LoRA adapter %s\n", path);
      return 1;
    }
  }

  struct llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; i++) {
    b.token[i] = tokens[i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = n;
  if (llama_decode(ctx, b)) {
    fprintf(stderr, "llama_probe: decode failed\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* out = fopen(argv[3], "wb");
  if (!out) return 1;
  for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), n_vocab, out);
  fclose(out);
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
