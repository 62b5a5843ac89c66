// LoRA adapters in the engine: loading and unloading them by name (a bounded cache, least
// recently used first, never one a request runs with), resolving a request's adapters into the
// set the runner takes, and placing the step's sets in the plan.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/lora_products.h"

#include "engine/engine_impl.h"

namespace ll3 {

Status Engine::Impl::load_lora(const LoraSpec& spec) {
  if (!lora_enabled()) {
    return Status::invalid("this engine takes no LoRA adapters (EngineOptions::loras or lora_runtime; serve: --lora or --allow-runtime-lora)",
                           "lora");
  }
  if (spec.name.empty()) return Status::invalid("a LoRA adapter needs a name", "lora");
  if (!std::isfinite(spec.scale)) return Status::invalid("the scale of LoRA adapter '" + spec.name + "' is not finite", "lora");
  {
    std::lock_guard<std::mutex> lk(mu);
    if (loras.count(spec.name)) return Status::invalid("a LoRA adapter named '" + spec.name + "' is loaded already", "lora");
  }
  Result<std::unique_ptr<LoraAdapter>> ad = ll3::load_lora(spec.path, m);
  if (!ad.ok()) return Status::invalid(ad.message(), "lora");
  if ((*ad)->max_rank > LoraProducts::kMaxRank) {
    return Status::invalid(strprintf("lora: %s: rank %lld is over the %lld ll3 runs", spec.path.c_str(),
                                     static_cast<long long>((*ad)->max_rank), static_cast<long long>(LoraProducts::kMaxRank)),
                           "lora");
  }
  std::lock_guard<std::mutex> lk(mu);
  if (loras.count(spec.name)) return Status::invalid("a LoRA adapter named '" + spec.name + "' is loaded already", "lora");
  if (opt.max_loras > 0 && static_cast<int64_t>(loras.size()) >= opt.max_loras) {
    auto victim = loras.end();
    for (auto it = loras.begin(); it != loras.end(); ++it) {
      if (it->second.running == 0 && (victim == loras.end() || it->second.last_used < victim->second.last_used)) victim = it;
    }
    if (victim == loras.end()) {
      return Status::error(strprintf("all %d LoRA adapters (max_loras) are in use: none can make room for '%s'", opt.max_loras,
                                     spec.name.c_str()),
                           StatusCode::kConflict);
    }
    log.info("lora: unloaded '" + victim->first + "' (least recently used) for '" + spec.name + "'");
    loras.erase(victim);
  }
  LoraEntry& e = loras[spec.name];
  e.adapter = std::shared_ptr<const LoraAdapter>(std::move(ad.value()));
  e.spec = spec;
  e.last_used = ++lora_clock;
  log.info(strprintf("lora: loaded '%s' from %s (%s, %lld products, rank %lld, %.1f MiB)", spec.name.c_str(), spec.path.c_str(),
                     e.adapter->format.c_str(), static_cast<long long>(e.adapter->n_pairs),
                     static_cast<long long>(e.adapter->max_rank), static_cast<double>(e.adapter->bytes()) / (1 << 20)));
  return Status();
}

Status Engine::Impl::unload_lora(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu);
  auto it = loras.find(name);
  if (it == loras.end()) return Status::error("no LoRA adapter named '" + name + "' is loaded", StatusCode::kNotFound);
  if (it->second.running > 0) {
    return Status::error(strprintf("LoRA adapter '%s' is in use by %lld request(s)", name.c_str(),
                                   static_cast<long long>(it->second.running)),
                         StatusCode::kConflict);
  }
  loras.erase(it);  // a set still cached holds it only as long as a request does: none
  return Status();
}

Result<std::shared_ptr<const EngineLoraSet>> Engine::Impl::resolve_loras(const std::vector<LoraUse>& uses) {
  std::vector<std::pair<LoraEntry*, float>> picked;
  std::string key;
  for (const LoraUse& u : uses) {
    auto it = loras.find(u.name);
    if (it == loras.end()) return Status::error("no LoRA adapter named '" + u.name + "' is loaded", StatusCode::kNotFound);
    const float scale = std::isnan(u.scale) ? it->second.spec.scale : u.scale;
    if (!std::isfinite(scale)) return Status::invalid("the scale of LoRA adapter '" + u.name + "' is not finite", "loras");
    if (scale == 0.0f) continue;  // off
    picked.emplace_back(&it->second, scale);
    key += strprintf("%p:%a;", static_cast<const void*>(it->second.adapter.get()), scale);
  }
  if (picked.empty()) return std::shared_ptr<const EngineLoraSet>();
  for (auto& [e, scale] : picked) {
    ++e->requests;
    ++e->running;
    e->last_used = ++lora_clock;
  }
  auto cached = lora_sets.find(key);
  if (cached != lora_sets.end()) {
    if (std::shared_ptr<const EngineLoraSet> s = cached->second.lock()) return s;
  }
  auto set = std::make_shared<EngineLoraSet>();
  uint64_t salt = 0x4c6f5241ull;  // "LoRA"
  for (auto& [e, scale] : picked) {
    set->set.uses.push_back({e->adapter.get(), scale});
    set->keep.push_back(e->adapter);
    set->names.push_back(e->spec.name);
    uint32_t bits = 0;
    std::memcpy(&bits, &scale, sizeof bits);
    salt = (salt ^ e->adapter->fingerprint) * 0x100000001b3ull;
    salt = (salt ^ bits) * 0x100000001b3ull;
  }
  set->salt = salt == 0 ? 1 : salt;
  for (auto it = lora_sets.begin(); it != lora_sets.end();) it = it->second.expired() ? lora_sets.erase(it) : std::next(it);
  lora_sets[key] = set;
  return std::shared_ptr<const EngineLoraSet>(set);
}

void Engine::Impl::release_loras(const Seq* s) {
  if (!s->lora) return;
  std::lock_guard<std::mutex> lk(mu);
  for (const std::string& name : s->lora->names) {
    auto it = loras.find(name);
    if (it != loras.end()) --it->second.running;
  }
}

void Engine::Impl::plan_loras(BatchPlan* p) {
  plan_lora_sets.clear();
  plan_seq_lora.clear();
  bool any = false;
  for (size_t i = 0; i < plan_seqs.size(); ++i) {
    const Seq* s = plan_seq_ptrs[i];
    int32_t k = -1;
    if (s->lora) {
      any = true;
      const LoraSet* set = &s->lora->set;
      auto at = std::find(plan_lora_sets.begin(), plan_lora_sets.end(), set);
      k = static_cast<int32_t>(at - plan_lora_sets.begin());
      if (at == plan_lora_sets.end()) plan_lora_sets.push_back(set);
    }
    plan_seq_lora.push_back(k);
  }
  if (!any) return;
  p->lora_sets = plan_lora_sets;
  p->seq_lora = plan_seq_lora;
}

}  // namespace ll3
