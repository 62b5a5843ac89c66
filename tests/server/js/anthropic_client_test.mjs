// ll3 serve's Anthropic Messages API driven by the official Anthropic TypeScript SDK, as Claude
// Code and applications use it.
// Usage: node anthropic_client_test.mjs URL KEY EXPECT_JSON
//   EXPECT_JSON: {"model", "system", "user", "max_tokens", "text", "input_tokens"}: the engine's
//   greedy output (and the prompt's token count) for that conversation, computed by the C++ test
//   that runs this script.
// Prints one line per check ("ok  name" / "FAIL name: why") and exits 1 if any failed.
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import fs from 'node:fs';

const [url, key, expectFile] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const model = expected.model;
const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0, timeout: 60_000 });

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

const body = {
  model,
  max_tokens: expected.max_tokens,
  temperature: 0,
  system: expected.system,
  messages: [{ role: 'user', content: expected.user }],
};
const tools = [
  {
    name: 'get_weather',
    description: 'Current weather',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const promptTokens = (u) => u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);

await check('messages.create: greedy text equals the engine', async () => {
  const m = await client.messages.create(body);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.equal(m.content[0].text, expected.text);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.equal(m.stop_sequence, null);
  assert.equal(promptTokens(m.usage), expected.input_tokens);
  assert.ok(m.usage.output_tokens > 0);
});

await check('messages.stream: events in order, finalMessage equals the plain response', async () => {
  const stream = client.messages.stream(body);
  const types = [];
  let text = '';
  stream.on('streamEvent', (e) => types.push(e.type));
  stream.on('text', (t) => (text += t));
  const m = await stream.finalMessage();
  assert.equal(text, expected.text);
  assert.equal(textOf(m), expected.text);
  // The SDK keeps the ping to itself.
  assert.deepEqual(types.slice(0, 2), ['message_start', 'content_block_start']);
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.ok(types.length > 5 && types.slice(2, -3).every((t) => t === 'content_block_delta'), types.join(','));
  assert.equal(promptTokens(m.usage), expected.input_tokens);
  assert.ok(m.usage.output_tokens > 0);
});

await check('messages.create with stream: true: the raw events', async () => {
  const s = await client.messages.create({ ...body, stream: true });
  let text = '';
  let stop = null;
  for await (const e of s) {
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
    if (e.type === 'message_delta') stop = e.delta.stop_reason;
  }
  assert.equal(text, expected.text);
  assert.ok(stop === 'end_turn' || stop === 'max_tokens', stop);
});

await check('stop_sequences and max_tokens', async () => {
  const m = await client.messages.create({ ...body, max_tokens: 1 });
  assert.equal(m.usage.output_tokens, 1);
  assert.equal(m.stop_reason, 'max_tokens');
  // A stop sequence the output contains (on a character boundary): the text before it.
  const chars = [...expected.text];
  assert.ok(chars.length >= 4, `the greedy answer (${JSON.stringify(expected.text)}) is too short for a stop sequence in it`);
  const half = Math.floor(chars.length / 2);
  const stop = chars.slice(half, half + 2).join('');
  const s = await client.messages.create({ ...body, stop_sequences: [stop] });
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, stop);
  assert.equal(textOf(s), expected.text.slice(0, expected.text.indexOf(stop)));
});

await check('countTokens equals the prompt of messages.create', async () => {
  const { system, messages } = body;
  const n = await client.messages.countTokens({ model, system, messages });
  assert.equal(n.input_tokens, expected.input_tokens);
  const withTools = await client.messages.countTokens({ model, system, messages, tools });
  assert.ok(withTools.input_tokens > n.input_tokens, 'the tools are part of the prompt');
});

await check('tools: a forced tool_use block, streamed and not; a tool_result round trip', async () => {
  const req = { ...body, max_tokens: 64, tools, tool_choice: { type: 'tool', name: 'get_weather' } };
  const m = await client.messages.create(req);
  assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m)); // a forced call is enforced while sampling
  const call = m.content.find((b) => b.type === 'tool_use');
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof call.input, 'object');
  assert.match(call.id, /^toolu_/);
  const f = await client.messages.stream(req).finalMessage();
  assert.equal(f.stop_reason, m.stop_reason);
  const turn = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '18 C, sunny' }] },
  ];
  const r = await client.messages.create({ model, max_tokens: 4, messages: turn, tools });
  assert.equal(r.type, 'message');
  assert.ok(r.usage.output_tokens > 0);
});

await check('errors: APIError subclasses with the status and Anthropic error types', async () => {
  await assert.rejects(client.messages.create({ model, messages: body.messages }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, e.constructor.name);
    assert.equal(e.status, 400);
    assert.equal(e.error.type, 'error');
    assert.equal(e.error.error.type, 'invalid_request_error');
    assert.match(e.message, /max_tokens/);
    return true;
  });
  const stranger = new Anthropic({ baseURL: url, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(stranger.messages.create(body), (e) => {
    assert.ok(e instanceof Anthropic.AuthenticationError, e.constructor.name);
    assert.equal(e.status, 401);
    assert.equal(e.error.error.type, 'authentication_error');
    return true;
  });
  // Too long for the context, streamed: refused with the status before any event.
  await assert.rejects(client.messages.stream({ ...body, max_tokens: 100000 }).finalMessage(), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, e.constructor.name);
    return true;
  });
});

if (failures > 0) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
