// The replica test's client (tests/deploy/replica_test.sh): 30 conversations of 4 turns through
// HAProxy (X-Session-Id, consistent hash) over three `ll3 serve` replicas sharing one session
// directory, each turn checked against a reference server's greedy text for the same prompt. In
// the middle (every conversation has done two turns), while one replica is streaming a reply,
// that replica is killed with SIGKILL; then the conversations go on.
//
//   node replica.mjs LB_URL REF_URL '{"r0": PID, "r1": PID, "r2": PID}'
//
// Checks: every turn's text equals the reference's; the only failures are requests in flight on
// the killed replica, and each succeeds on retry; turns of the killed replica's conversations
// that move to a survivor restore the session (cached_tokens covers the history the killed
// replica had finished and saved); every replica served some conversations. Exits 1 on failure.
const [lb, ref, pidsJson] = process.argv.slice(2);
const pids = JSON.parse(pidsJson);
const kConvs = 30, kTurns = 4, kMaxTokens = 12, kKillAfter = 2 * (kConvs - 1);  // turns done before the kill
const deadline = Date.now() + 180_000;  // inside replica_test.sh's 200 s and CTest's 300 s
const failures = [];
const fail = (msg) => { failures.push(msg); console.error("FAIL: " + msg); };

const words = ["river", "stone", "light", "winter", "garden", "copper", "signal", "harbor", "forest",
  "engine", "marble", "orbit", "paper", "silver", "thunder", "valley"];
function userText(conv, turn) {
  let s = "", x = conv * 7919 + turn * 104729 + 1;
  for (let i = 0; i < 6 + (x % 5); ++i) { x = (x * 1103515245 + 12345) % 2147483648; s += " " + words[x % words.length]; }
  return `\nUser ${turn}:${s}.\nAssistant:`;
}

async function complete(url, prompt, { session, maxTokens = kMaxTokens, stream = false, onChunk } = {}) {
  const headers = { "Content-Type": "application/json" };
  if (session) headers["X-Session-Id"] = session;
  const body = { prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream };
  if (stream) body.stream_options = { include_usage: true };
  const res = await fetch(url + "/v1/completions", { method: "POST", headers, body: JSON.stringify(body),
                                                     signal: AbortSignal.timeout(60_000) });
  if (!stream) {
    const text = await res.text();
    if (res.status !== 200) return { status: res.status, error: text };
    const j = JSON.parse(text);
    return { status: 200, text: j.choices[0].text, model: j.model, usage: j.usage };
  }
  if (res.status !== 200) return { status: res.status, error: await res.text() };
  let text = "", model = "", usage = null, buf = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i).replace(/^data: /, "");
      buf = buf.slice(i + 2);
      if (ev === "[DONE]") return { status: 200, text, model, usage };
      const j = JSON.parse(ev);
      model = j.model;
      if (j.usage) usage = j.usage;
      if (j.choices && j.choices.length) text += j.choices[0].text;
      if (onChunk) onChunk();
    }
  }
  throw new Error("the stream ended without [DONE]");
}

// Through HAProxy, retrying a failed request (a killed replica's connection, a 5xx) until it works.
async function throughLb(conv, turn, prompt, opts) {
  const attempts = [];
  for (;;) {
    const started = Date.now();
    try {
      const r = await complete(lb, prompt, { session: `conv-${conv}`, ...opts });
      if (r.status === 200) return { ...r, attempts };
      if (r.status < 500) throw Object.assign(new Error(`HTTP ${r.status}: ${r.error}`), { fatal: true });
      attempts.push({ started, ended: Date.now(), error: `HTTP ${r.status}` });
    } catch (e) {
      if (e.fatal) throw e;
      attempts.push({ started, ended: Date.now(), error: String(e.cause?.code || e.message) });
    }
    if (Date.now() > deadline) throw new Error(`conversation ${conv} turn ${turn}: no success by the deadline`);
    opts = { ...opts, stream: false, onChunk: undefined };  // retried as a plain request
    await new Promise((r) => setTimeout(r, 300));
  }
}

const convs = Array.from({ length: kConvs }, (_, c) => ({ prompt: `Conversation ${c}.`, turns: [] }));
const kVictim = 0;  // its second turn is the request in flight when its replica is killed
let done = 0, killed = null, killAt = Infinity, armKill, onKilled;
const killPoint = new Promise((r) => { armKill = r; });
const killed_ = new Promise((r) => { onKilled = r; });  // the others' third turns wait for it

async function reference(prompt, maxTokens) {
  const want = await complete(ref, prompt, { maxTokens });
  if (want.status !== 200) throw new Error(`reference: HTTP ${want.status}: ${want.error}`);
  return want;
}

// One turn; the victim's streamed turn waits for the kill point after its reference is known,
// so that it starts the moment the kill point comes.
async function runTurn(c, t) {
  const conv = convs[c];
  const prompt = conv.prompt + userText(c, t);
  const streamed = c === kVictim && t === 1;
  const maxTokens = streamed ? 200 : kMaxTokens;
  const want = await reference(prompt, maxTokens);
  if (streamed) await killPoint;
  const got = await throughLb(c, t, prompt, {
    maxTokens, stream: streamed,
    onChunk: () => {
      if (!streamed || killed !== null) return;
      killed = conv.turns[0].model;
      killAt = Date.now();
      process.kill(pids[killed], "SIGKILL");
      onKilled();
      console.log(`killed ${killed} (pid ${pids[killed]}) while it streamed conversation ${c}'s turn ${t}`);
    },
  });
  if (got.text !== want.text) fail(`conversation ${c} turn ${t}: ${JSON.stringify(got.text)} != reference ${JSON.stringify(want.text)}`);
  conv.turns.push({ model: got.model, cached: got.usage.prompt_tokens_details?.cached_tokens ?? 0,
                    promptTokens: got.usage.prompt_tokens, finished: Date.now(), attempts: got.attempts });
  conv.prompt = prompt + got.text;
  // When every other conversation has done its first two turns, the kill comes (300 ms later:
  // the last turn's session write is a few milliseconds).
  if (c !== kVictim && ++done === kKillAfter) setTimeout(armKill, 300);
}

await Promise.all(convs.map(async (_, c) => {
  for (let t = 0; t < kTurns; ++t) {
    if (t === 2 && c !== kVictim) await killed_;
    await runTurn(c, t);
  }
}));

// The checks.
if (killed === null) fail("the kill never happened");
const served = new Set(convs.flatMap((cv) => cv.turns.map((t) => t.model)));
for (const r of Object.keys(pids)) if (!served.has(r)) fail(`replica ${r} served no turn`);
let moved = 0, strong = 0, retried = 0;
for (let c = 0; c < kConvs; ++c) {
  const turns = convs[c].turns;
  if (turns.length !== kTurns) fail(`conversation ${c} has ${turns.length} turns`);
  for (let t = 0; t < turns.length; ++t) {
    for (const a of turns[t].attempts) {
      ++retried;
      // Only requests in flight on the killed replica, or sent to it before the health checks
      // took it out, may fail.
      if (a.ended < killAt) fail(`conversation ${c} turn ${t} failed before the kill: ${a.error}`);
    }
    if (t === 0 || turns[t - 1].model !== killed || turns[t].model === killed) continue;
    ++moved;
    const prev = turns[t - 1];
    if (turns[t].cached <= 0) fail(`conversation ${c} turn ${t} moved to ${turns[t].model} and restored nothing`);
    // A turn the killed replica finished before it died was saved: all of its history.
    if (prev.finished < killAt - 200) {
      ++strong;
      if (turns[t].cached < prev.promptTokens - 16) {
        fail(`conversation ${c} turn ${t}: ${turns[t].cached} cached tokens, the history had ${prev.promptTokens}`);
      }
    }
  }
}
if (convs[kVictim].turns[1]?.attempts.length === 0) fail("the request in flight on the killed replica did not fail");
if (moved === 0 || strong === 0) fail(`${moved} turns moved from the killed replica, ${strong} of them checked`);
console.log(`${kConvs} conversations x ${kTurns} turns; killed ${killed}; ${moved} turns moved to survivors ` +
            `(${strong} checked for their whole history); ${retried} failed attempts, all retried`);
if (failures.length) process.exit(1);
console.log("ok");
