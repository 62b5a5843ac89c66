// ll3 serve driven by the official OpenAI Node client, as applications use it.
// Usage: node openai_client_test.mjs URL KEY EXPECT_JSON
//   EXPECT_JSON: {"model", "prompt_tokens", "max_tokens", "text"}: the engine's greedy output for
//   those prompt tokens, computed by the C++ test that runs this script.
// Prints one line per check ("ok  name" / "FAIL name: why") and exits 1 if any failed.
import OpenAI from 'openai';
import assert from 'node:assert/strict';
import fs from 'node:fs';

const [url, key, expectFile] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const model = expected.model;
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });

async function metrics() {
  const r = await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(r.status, 200);
  return r.text();
}
function metric(text, name) {
  for (const line of text.split('\n')) if (line.startsWith(`${name} `)) return Number(line.slice(name.length + 1));
  return NaN;
}
async function waitMetric(name, want, seconds) {
  const deadline = Date.now() + seconds * 1000;
  let v;
  while (Date.now() < deadline) {
    v = metric(await metrics(), name);
    if (v === want) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`${name} is ${v}, not ${want}, after ${seconds} s`);
}

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name three rivers of Europe.' },
];

await check('models.list and models.retrieve', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, model);
  assert.equal((await client.models.retrieve(model)).id, model);
});

await check('completions: greedy text equals the engine, streamed and not', async () => {
  const body = { model, prompt: expected.prompt_tokens, max_tokens: expected.max_tokens, temperature: 0 };
  const r = await client.completions.create(body);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, expected.text);
  assert.equal(r.usage.prompt_tokens, expected.prompt_tokens.length);
  let text = '';
  let usage = null;
  const s = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    text += chunk.choices[0]?.text ?? '';
  }
  assert.equal(text, expected.text);
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
});

let greedyContent = '';
await check('chat: streamed deltas add up to the plain response; usage', async () => {
  const body = { model, messages, max_tokens: 12, temperature: 0 };
  const r = await client.chat.completions.create(body);
  greedyContent = r.choices[0].message.content;
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof greedyContent, 'string');
  assert.ok(greedyContent.length > 0, 'the greedy answer is empty');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  let content = '';
  let usage = null;
  let roleFirst = null;
  const s = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (roleFirst === null) roleFirst = c.delta.role === 'assistant';
    content += c.delta.content ?? '';
  }
  assert.equal(roleFirst, true);
  assert.equal(content, greedyContent);
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
  // The same prompt again: its full blocks come from the prefix cache.
  assert.ok(usage.prompt_tokens_details.cached_tokens >= Math.floor(usage.prompt_tokens / 16) * 16 - 16);
});

await check('chat.completions.stream helper (accumulates the chunks)', async () => {
  const stream = client.chat.completions.stream({ model, messages, max_tokens: 12, temperature: 0 });
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].message.content, greedyContent);
});

await check('keep-alive: streamed and plain requests share one connection', async () => {
  const before = metric(await metrics(), 'll3_http_connections_total');
  for (let i = 0; i < 3; i++) {
    const s = await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0, stream: true });
    for await (const _ of s) { /* drain */ }
    await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0 });
  }
  const after = metric(await metrics(), 'll3_http_connections_total');
  assert.ok(after - before <= 1, `${after - before} new connections for 6 requests`);
});

await check('seed: same seed, same text; n choices', async () => {
  const body = { model, messages, max_tokens: 10, temperature: 1, seed: 1234 };
  const a = await client.chat.completions.create(body);
  const b = await client.chat.completions.create(body);
  assert.ok(a.choices[0].message.content.length > 0);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const n = await client.chat.completions.create({ ...body, n: 2 });
  assert.equal(n.choices.length, 2);
  assert.deepEqual(n.choices.map((c) => c.index), [0, 1]);
  assert.equal(n.choices[0].message.content, a.choices[0].message.content);
  assert.equal(n.usage.prompt_tokens, a.usage.prompt_tokens);
});

await check('chat logprobs', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  assert.ok(lp.length > 0);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].logprob, t.logprob); // greedy: the chosen token is the best
    assert.ok(Array.isArray(t.bytes));
  }
});

await check('completions: echo and legacy logprobs', async () => {
  const r = await client.completions.create({ model, prompt: 'The river', max_tokens: 4, temperature: 0, logprobs: 2, echo: true });
  const c = r.choices[0];
  assert.ok(c.text.startsWith('The river'));
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.tokens.length, lp.text_offset.length);
  // The prompt is scored: its added <|begin_of_text|> is not echoed, so its first echoed token
  // has a log-probability; echoed token ids start with the one that has none.
  assert.equal(typeof lp.token_logprobs[0], 'number');
  assert.ok(lp.token_logprobs.every((l) => l <= 0));
  assert.equal(Object.keys(lp.top_logprobs[lp.top_logprobs.length - 1]).length <= 2, true);
  const ids = await client.completions.create({ model, prompt: expected.prompt_tokens, max_tokens: 0, logprobs: 1, echo: true });
  const ilp = ids.choices[0].logprobs;
  assert.equal(ilp.tokens.length, expected.prompt_tokens.length);
  assert.equal(ilp.token_logprobs[0], null);
  assert.equal(typeof ilp.token_logprobs[1], 'number');
  assert.equal(ids.usage.completion_tokens, 0);
});

await check('stop strings', async () => {
  const body = { model, prompt: expected.prompt_tokens, max_tokens: expected.max_tokens, temperature: 0 };
  const full = expected.text;
  const chars = Array.from(full);
  const stop = chars.slice(Math.floor(chars.length / 2), Math.floor(chars.length / 2) + 2).join('');
  const r = await client.completions.create({ ...body, stop: [stop] });
  assert.equal(r.choices[0].text, full.slice(0, full.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
await check('tools: accepted, output well-formed, streamed through the helper', async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools, max_tokens: 8 });
  const c = r.choices[0];
  assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason));
  if (c.finish_reason === 'tool_calls') {
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    JSON.parse(c.message.tool_calls[0].function.arguments);
  } else {
    assert.equal(typeof c.message.content, 'string');
  }
  const stream = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools, max_tokens: 8 });
  await stream.finalChatCompletion();
  // A call and its result in the conversation.
  const r2 = await client.chat.completions.create({
    model, tools, max_tokens: 3,
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '-3 C, snow' },
    ],
  });
  assert.equal(r2.object, 'chat.completion');
});

await check('session_id (an extra body field)', async () => {
  const a = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, session_id: 'node-session' });
  const b = await client.chat.completions.create({
    model, max_tokens: 2, temperature: 0, session_id: 'node-session',
    messages: [...messages, a.choices[0].message, { role: 'user', content: 'More.' }],
  });
  assert.ok(b.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens);
});

await check('errors: 400 naming the field, 401, 404, context length', async () => {
  await assert.rejects(client.chat.completions.create({ model, messages, top_p: 3 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'top_p');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'oracle', content: 'x' }] }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'messages[0].role');
    return true;
  });
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 100000 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(client.models.retrieve('gpt-4o'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

await check('abort mid-stream: the request stops and its KV is freed', async () => {
  const s = await client.chat.completions.create({ model, messages, max_tokens: 3000, ignore_eos: true, stream: true });
  let n = 0;
  for await (const _ of s) {
    if (++n >= 3) {
      s.controller.abort();
      break;
    }
  }
  assert.ok(n >= 3, `the stream ended after ${n} chunks, before the abort`);
  await waitMetric('ll3_requests_running', 0, 3);
  await waitMetric('ll3_http_requests_in_flight', 0, 3);
});

process.exitCode = failures ? 1 : 0;
