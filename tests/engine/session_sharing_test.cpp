// Sessions as replicas share them (EngineOptions::session_dir): a turn's session file is written
// when the turn ends, by the writer thread, while the engine thread is busy elsewhere; two
// engines taking turns of one conversation each continue from the other's newer file; and
// concurrent writers of one file always leave a whole file.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "io/session_file.h"
#include "engine_fixtures.h"
#include "ll3/engine.h"
#include "test_support.h"

namespace ll3 {
namespace {

using test::random_prompt;
std::shared_ptr<const Model> shared_model() { return test::engine_model(); }
#define REQUIRE_MODEL() LL3_REQUIRE_ENGINE_MODEL()

Request turn(std::vector<int32_t> prompt, int64_t max_tokens, const std::string& session) {
  Request r = test::greedy(std::move(prompt), max_tokens);
  r.session_id = session;
  return r;
}

std::unique_ptr<Engine> make(const std::string& dir) {
  EngineOptions o;
  o.session_dir = dir;
  o.batch_wait_ms = 0;
  Result<std::unique_ptr<Engine>> e = Engine::create(shared_model(), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(e.value()) : nullptr;
}

std::vector<std::string> session_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) out.push_back(f.path().filename().string());
  return out;
}

TEST(SessionSharing, ATurnIsSavedWhenItEndsWhileTheEngineThreadIsBusy) {
  REQUIRE_MODEL();
  const std::string dir = test::temp_dir() + "/behind";
  std::unique_ptr<Engine> e = make(dir);
  // A holds the engine thread in its token callback until the session's file is there.
  std::promise<void> file_seen;
  std::shared_future<void> seen = file_seen.get_future().share();
  std::atomic<bool> first{true};
  Request a = turn(random_prompt(8, 1), 50, "");
  a.on_token = [&](const TokenEvent& ev) {
    if (ev.index == 2 && first.exchange(false)) {
      return seen.wait_for(std::chrono::seconds(20)) == std::future_status::ready;  // cancelled if never
    }
    return true;
  };
  // B (the session turn) is submitted first, so that it finishes before A's third token.
  Result<RequestId> b = e->submit(turn(random_prompt(40, 2), 1, "s"));
  ASSERT_TRUE(b.ok());
  Result<RequestId> ida = e->submit(std::move(a));
  ASSERT_TRUE(ida.ok());
  bool found = false;
  for (int i = 0; i < 400 && !found; ++i) {
    std::vector<std::string> files = session_files(dir);
    found = files.size() == 1 && files[0].size() > 5 && files[0].substr(files[0].size() - 5) == ".ll3s";
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(found) << "no session file while the engine was busy";
  file_seen.set_value();
  e->wait_idle();
  EXPECT_EQ(e->stats().sessions_saved, 1);
  EXPECT_EQ(e->stats().requests_finished, 2);
}

TEST(SessionSharing, TwoEnginesTakingTurnsEachContinueFromTheOthersNewerFile) {
  REQUIRE_MODEL();
  const std::string dir = test::temp_dir() + "/shared";
  std::unique_ptr<Engine> one = make(dir), two = make(dir);
  std::unique_ptr<Engine> solo = make("");
  // The conversation: each turn's prompt is the last prompt, its reply and a new message.
  std::vector<int32_t> prompt = random_prompt(30, 3);
  Engine* order[] = {one.get(), two.get(), one.get(), two.get()};
  int64_t last_len = 0;
  for (int t = 0; t < 4; ++t) {
    Result<Engine::Completion> want = solo->generate(turn(prompt, 4, ""));
    ASSERT_TRUE(want.ok());
    Result<Engine::Completion> got = order[t]->generate(turn(prompt, 4, "conv"));
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(got->tokens, want->tokens) << "turn " << t;
    if (t > 0) {
      // Everything the previous turn held (its prompt and reply, written by the other engine)
      // came from the file, not recomputed.
      EXPECT_GE(got->finish.cached_tokens, last_len) << "turn " << t;
    }
    EXPECT_TRUE(got->finish.session_warning.empty()) << got->finish.session_warning;
    order[t]->wait_idle();  // its file is written before the other engine reads it
    last_len = static_cast<int64_t>(prompt.size()) + 3;  // the last reply token has no KV yet
    prompt.insert(prompt.end(), got->tokens.begin(), got->tokens.end());
    const std::vector<int32_t> more = random_prompt(6, 10 + t);
    prompt.insert(prompt.end(), more.begin() + 1, more.end());
  }
  EXPECT_EQ(one->stats().sessions_restored, 1);  // turn 2: its own copy was stale
  EXPECT_EQ(two->stats().sessions_restored, 2);
  EXPECT_EQ(session_files(dir).size(), 1u);  // no temporary file left
}

TEST(SessionFile, ConcurrentWritersOfOneFileAlwaysLeaveAWholeOne) {
  const std::string dir = test::temp_dir() + "/race";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/s.ll3s";
  // Four writers, each its own version (tokens and rows of its own value), 20 writes each.
  auto header_of = [](int w) {
    SessionFileHeader h;
    h.model_id = 7;
    h.n_layers = 2;
    h.n_kv_heads = 1;
    h.head_dim = 64;
    h.row_bytes = 128;
    h.id = "s";
    h.tokens.assign(static_cast<size_t>(100 + w), w);
    return h;
  };
  std::vector<std::vector<uint8_t>> rows(4);
  for (int w = 0; w < 4; ++w) rows[w].assign(128, static_cast<uint8_t>(0x40 + w));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      const SessionFileHeader h = header_of(w);
      for (int i = 0; i < 20; ++i) {
        Status st = write_session_file(path, h, [&](uint32_t, bool, int64_t) -> const void* { return rows[w].data(); });
        if (!st.ok()) ++failures;
      }
    });
  }
  // Meanwhile every read finds a whole file of one writer.
  int reads = 0, bad = 0;
  std::string why;
  while (reads < 200) {
    if (!std::filesystem::exists(path)) continue;  // not written yet
    const std::string bytes = test::read_file(path);
    ++reads;
    Result<ParsedSessionFile> p =
        parse_session_file(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    if (!p.ok()) {
      ++bad;
      why = p.message();
      continue;
    }
    const int w = p->header.tokens[0];
    if (p->header.tokens.size() != static_cast<size_t>(100 + w) || static_cast<uint8_t>(bytes[p->payload_offset]) != 0x40 + w) {
      ++bad;
      why = "a mixed file";
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad, 0) << why;
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(session_files(dir), std::vector<std::string>{"s.ll3s"});
}

}  // namespace
}  // namespace ll3
