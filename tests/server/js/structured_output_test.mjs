// Structured output of ll3 serve as applications use it through the official OpenAI Node client:
// response_format json_schema / json_object on /v1/chat/completions and /v1/completions
// (streamed or not, several temperatures and seeds, small token budgets) and constrained tool
// calls. Every answer is checked by an independent validator (ajv, draft 2020-12, ajv-formats),
// never by the server's own grammar, so a schema the grammar compiles wrongly shows up here.
//
// Usage: node structured_output_test.mjs URL KEY MODEL [MODE] [TIME_LIMIT_S]
//   MODE: "all" (default): the schema corpus in schemas/, the refusals in schemas/unsupported/,
//         json_object and tools; "tools": the tool checks only (for a server whose chat template
//         does not read `tools`, where the call comes from the generic tool preamble).
//   TIME_LIMIT_S: the whole run's bound (default 240); past it the run fails, naming what is left.
// Prints one line per check ("ok   name" / "FAIL name: why", with the request to reproduce it)
// and exits 1 if any failed.
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [url, key, model, mode = 'all', limitArg = '240'] = process.argv.slice(2);
if (!url || !key || !model || !['all', 'tools'].includes(mode)) {
  console.error('usage: node structured_output_test.mjs URL KEY MODEL [all|tools] [TIME_LIMIT_S]');
  process.exit(2);
}
const started = Date.now();
const elapsed = () => ((Date.now() - started) / 1000).toFixed(1);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 90_000 });
const here = path.dirname(fileURLToPath(import.meta.url));

// allErrors: a failure report should list every violation, not the first; strict off: the
// corpus uses annotations (deprecated, contentMediaType...) that strict mode would reject.
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// ---------------------------------------------------------------------------------------------
// Checks: run CONCURRENCY at a time, so that the server batches them as it would real traffic
// (and the run stays short); each prints its own line when it ends.

const CONCURRENCY = 8;
const checks = [];
let failures = 0;
const running = new Set();
let next = 0;
function check(name, fn) {
  checks.push({ name, fn });
}
async function runChecks() {
  async function worker() {
    while (next < checks.length) {
      const c = checks[next++];
      running.add(c.name);
      const t0 = Date.now();
      try {
        await c.fn();
        console.log(`ok   ${c.name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      } catch (e) {
        failures++;
        const why = e instanceof assert.AssertionError || e instanceof ValidationError ? e.message : e && e.stack ? e.stack : String(e);
        console.log(`FAIL ${c.name}: ${why}`);
        if (e && e.request) console.log(`     request: POST ${e.request.path} ${JSON.stringify(e.request.body)}`);
      }
      running.delete(c.name);
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

class ValidationError extends Error {}

// The request that a failure came from, to reproduce it with curl.
async function traced(pathName, body, fn) {
  try {
    return await fn();
  } catch (e) {
    if (e && typeof e === 'object' && !e.request) e.request = { path: pathName, body };
    throw e;
  }
}

// One generation, streamed or not, reduced to what the checks look at. Streamed deltas are
// concatenated: that is what a client that renders as it goes ends up holding.
async function chat(body) {
  return traced('/v1/chat/completions', body, async () => {
    if (!body.stream) {
      const r = await client.chat.completions.create(body);
      const choices = r.choices.map((c) => ({ text: c.message.content, finish: c.finish_reason, message: c.message }));
      return { text: choices[0].text, finish: choices[0].finish, usage: r.usage, choices };
    }
    const s = await client.chat.completions.create({ ...body, stream_options: { include_usage: true } });
    let text = '';
    let finish = null;
    let usage = null;
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    return { text, finish, usage };
  });
}
async function complete(body) {
  return traced('/v1/completions', body, async () => {
    if (!body.stream) {
      const r = await client.completions.create(body);
      return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
    }
    const s = await client.completions.create({ ...body, stream_options: { include_usage: true } });
    let text = '';
    let finish = null;
    let usage = null;
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      text += c.text ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    return { text, finish, usage };
  });
}

function parseValid(text, validate) {
  if (typeof text !== 'string') throw new ValidationError(`the answer is ${text === null ? 'null' : typeof text}, not text`);
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(`not JSON (${e.message}): ${JSON.stringify(text.slice(0, 600))}`);
  }
  if (!validate(v)) {
    throw new ValidationError(`does not validate: ${ajv.errorsText(validate.errors, { separator: '; ' })}: ${JSON.stringify(text.slice(0, 600))}`);
  }
  return v;
}

// A generation that ends for lack of budget is fine as long as what it left is complete: the
// server steers to a close when max_tokens runs out (and never spends more than it).
function checkEnd(r, maxTokens) {
  assert.ok(['stop', 'length'].includes(r.finish), `finish_reason ${r.finish}`);
  assert.ok(r.usage, 'no usage');
  assert.ok(r.usage.completion_tokens <= maxTokens, `${r.usage.completion_tokens} completion tokens for max_tokens ${maxTokens}`);
}

// Awaits a request that must be refused with 400; returns the error's body fields.
async function refused(pathName, body, promise) {
  return traced(pathName, body, async () => {
    try {
      await promise();
    } catch (e) {
      if (!(e instanceof OpenAI.APIError)) throw e;
      assert.equal(e.status, 400, `status ${e.status}: ${e.message}`);
      assert.equal(e.type, 'invalid_request_error');
      return { message: e.error?.message ?? e.message, param: e.param };
    }
    assert.fail('accepted (200), not refused with 400');
  });
}
const quoted = (keyword) => new RegExp(`['"\`]${keyword.replace(/[$]/g, '\\$')}['"\`]`);

const responseFormat = (name, schema, strict = true) => ({ type: 'json_schema', json_schema: { name, schema, strict } });
const messagesFor = (what) => [
  { role: 'system', content: 'You extract structured data. Reply with JSON only.' },
  { role: 'user', content: `Give me a realistic example of a ${what}.` },
];
const bytes = (v) => Buffer.byteLength(JSON.stringify(v));

// ---------------------------------------------------------------------------------------------
// The schema corpus: each schema's `examples` (test metadata, taken off before it is sent) is a
// small valid instance, which bounds the schema's shortest output: every byte is a token of the
// Llama 3 vocabulary, so max_tokens of its length (plus room for the end) leaves the server no
// excuse for an incomplete answer.

function loadCorpus() {
  const dir = path.join(here, 'schemas');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const { examples, ...schema } = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
      return { name: f.replace(/\.json$/, ''), schema, examples };
    });
}
function loadRefusals() {
  const dir = path.join(here, 'schemas', 'unsupported');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f.replace(/\.json$/, ''), ...JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) }));
}

function schemaChecks() {
  const corpus = loadCorpus();
  check(`corpus: ${corpus.length} schemas (at least 35)`, async () => assert.ok(corpus.length >= 35));
  corpus.forEach(({ name, schema, examples }, i) => {
    const validate = ajv.compile(schema);
    check(`corpus: ${name} has a valid example`, async () => {
      assert.ok(Array.isArray(examples) && examples.length > 0, 'no examples');
      for (const ex of examples) parseValid(JSON.stringify(ex), validate);
    });
    // small: the shortest output's bytes plus a little (the end token, rounding), which the
    // server must fit; normal: some room beyond, so answers also end on their own.
    const shortest = Math.min(...(examples ?? [{}]).map(bytes));
    const small = Math.max(40, shortest + 8);
    const normal = small + 24;
    // OpenAI clients send strict: true; strict: false must not lose the guarantee either.
    const strict = i % 4 !== 3;
    const format = responseFormat(`s${name.replace(/[^a-zA-Z0-9_-]/g, '_')}`, schema, strict);
    const what = name.replace(/^\d+-/, '').replace(/-/g, ' ');
    // Six requests a schema (four for big ones): greedy, seeded draws at 0.7 and 1.0, and two small budgets, each on
    // one of the four endpoint x streaming combinations, rotating so that every schema meets all
    // four and every kind of request meets them across the corpus.
    const combos = [['chat', false], ['completions', true], ['chat', true], ['completions', false]];
    const variants = [
      { temperature: 0, max_tokens: normal },
      { temperature: 0.7, seed: 100 + i, max_tokens: normal },
      { temperature: 1.0, seed: 200 + i, max_tokens: normal },
      { temperature: 1.0, seed: 300 + i, max_tokens: small },
      { temperature: 0.7, seed: 400 + i, max_tokens: small },
      { temperature: 1.0, seed: 500 + i, max_tokens: normal },
    ]
      .map((v, k) => ({ api: combos[(i + k) % 4][0], stream: combos[(i + k) % 4][1], ...v }))
      // The big extraction schemas (a few hundred tokens an answer) are most of the run's time:
      // four requests each, which still meet every combination.
      .slice(0, small > 100 ? 4 : 6);
    for (const v of variants) {
      const label = `${name} ${v.api} t=${v.temperature}${v.seed !== undefined ? ` seed=${v.seed}` : ''}${v.stream ? ' stream' : ''} max_tokens=${v.max_tokens}${strict ? '' : ' strict=false'}`;
      check(label, async () => {
        const { api, ...params } = v;
        const body = { model, response_format: format, ...params };
        if (api === 'chat') body.messages = messagesFor(what);
        else body.prompt = `A ${what} as JSON:\n`;
        const r = await (api === 'chat' ? chat(body) : complete(body));
        await traced(`/v1/${api === 'chat' ? 'chat/' : ''}completions`, body, async () => {
          parseValid(r.text, validate);
          checkEnd(r, v.max_tokens);
        });
      });
    }
    // Greedy decoding is deterministic: streaming must not change what the grammar allows.
    if (/^(06|13|24|35|44)-/.test(name)) {
      check(`${name} chat t=0: streamed equals non-streamed`, async () => {
        const body = { model, messages: messagesFor(what), response_format: format, temperature: 0, max_tokens: small };
        const a = await chat(body);
        const b = await chat({ ...body, stream: true });
        await traced('/v1/chat/completions', body, async () => {
          parseValid(a.text, validate);
          assert.equal(b.text, a.text);
          assert.equal(b.finish, a.finish);
        });
      });
    }
    // A seed fixes the draw; the grammar's state must not add randomness of its own.
    if (/^(18|20|45)-/.test(name)) {
      check(`${name} completions t=1 seed=7: the same seed gives the same answer`, async () => {
        const body = { model, prompt: `A ${what} as JSON:\n`, response_format: format, temperature: 1, seed: 7, max_tokens: small };
        const a = await complete(body);
        const b = await complete(body);
        await traced('/v1/completions', body, async () => {
          parseValid(a.text, validate);
          assert.equal(b.text, a.text);
        });
      });
    }
    // n > 1: each choice keeps its own place in the grammar.
    if (/^(03|19|25)-/.test(name)) {
      check(`${name} chat t=1 n=3: every choice validates`, async () => {
        const body = { model, messages: messagesFor(what), response_format: format, temperature: 1, seed: 9, n: 3, max_tokens: small };
        const r = await chat(body);
        await traced('/v1/chat/completions', body, async () => {
          assert.equal(r.choices.length, 3);
          for (const c of r.choices) parseValid(c.text, validate);
        });
      });
    }
  });

  // Below the shortest output the promise cannot hold: the server must refuse (400) or flag the
  // answer as cut ("length"); an answer reported as finished ("stop") must be whole.
  const invoice = corpus.find((c) => c.name.endsWith('invoice'));
  if (invoice) {
    const validate = ajv.compile(invoice.schema);
    for (const api of ['chat', 'completions']) {
      check(`${invoice.name} ${api} max_tokens=20 (below the shortest answer): refused, or "length", never a broken "stop"`, async () => {
        const body = { model, response_format: responseFormat('invoice', invoice.schema), temperature: 0, max_tokens: 20 };
        if (api === 'chat') body.messages = messagesFor('invoice');
        else body.prompt = 'An invoice as JSON:\n';
        let r;
        try {
          r = await (api === 'chat' ? chat(body) : complete(body));
        } catch (e) {
          if (e instanceof OpenAI.APIError && e.status === 400) return;
          throw e;
        }
        await traced(`/v1/${api === 'chat' ? 'chat/' : ''}completions`, body, async () => {
          if (r.finish === 'stop') parseValid(r.text, validate);
          else assert.equal(r.finish, 'length');
        });
      });
    }
  }

  // The client's own structured-output helpers, which parse message.content themselves.
  for (const c of corpus.filter((c) => /(openai-strict-weather|tree)$/.test(c.name))) {
    const validate = ajv.compile(c.schema);
    const body = { model, messages: messagesFor(c.name), response_format: responseFormat('helper', c.schema), temperature: 0.8, seed: 3, max_tokens: 80 };
    check(`${c.name} client.chat.completions.parse: message.parsed validates`, async () => {
      const r = await traced('/v1/chat/completions', body, () => client.chat.completions.parse(body));
      await traced('/v1/chat/completions', body, async () => {
        const m = r.choices[0].message;
        assert.deepEqual(m.parsed, parseValid(m.content, validate));
      });
    });
    // The stream helper parses only formats made by its own helpers (zod); the content it
    // assembles from the deltas is what an application reads.
    check(`${c.name} client.chat.completions.stream: final content validates`, async () => {
      const s = client.chat.completions.stream(body);
      const content = await traced('/v1/chat/completions', body, () => s.finalContent());
      await traced('/v1/chat/completions', body, async () => parseValid(content, validate));
    });
  }
}

function jsonObjectChecks() {
  const anyObject = ajv.compile({ type: 'object' });
  const format = { type: 'json_object' };
  const variants = [
    { api: 'chat', stream: false, temperature: 0, max_tokens: 64 },
    { api: 'chat', stream: true, temperature: 1, seed: 31, max_tokens: 64 },
    { api: 'chat', stream: false, temperature: 1, seed: 32, max_tokens: 40 },
    { api: 'completions', stream: false, temperature: 0.7, seed: 33, max_tokens: 64 },
    { api: 'completions', stream: true, temperature: 1, seed: 34, max_tokens: 40 },
  ];
  for (const v of variants) {
    check(`json_object ${v.api} t=${v.temperature}${v.stream ? ' stream' : ''} max_tokens=${v.max_tokens}: an object`, async () => {
      const { api, ...params } = v;
      const body = { model, response_format: format, ...params };
      if (api === 'chat') body.messages = messagesFor('user profile in JSON');
      else body.prompt = 'A user profile in JSON:\n';
      const r = await (api === 'chat' ? chat(body) : complete(body));
      await traced(`/v1/${api === 'chat' ? 'chat/' : ''}completions`, body, async () => {
        parseValid(r.text, anyObject);
        checkEnd(r, v.max_tokens);
      });
    });
  }
  // llama.cpp's own request fields, which its clients send through the same SDK (extra body keys).
  check("llama.cpp 'json_schema' field on completions: the answer validates", async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
    const body = { model, prompt: 'Status as JSON:\n', json_schema: schema, temperature: 1, seed: 35, max_tokens: 40 };
    const r = await complete(body);
    await traced('/v1/completions', body, async () => parseValid(r.text, ajv.compile(schema)));
  });
  check("llama.cpp 'grammar' field (GBNF) on completions: the answer matches", async () => {
    const body = { model, prompt: 'Answer:', grammar: 'root ::= ("yes" | "no") " " [0-9]{2}', temperature: 1, seed: 36, max_tokens: 20 };
    const r = await complete(body);
    await traced('/v1/completions', body, async () => assert.match(r.text, /^(yes|no) [0-9]{2}$/));
  });
  check('response_format text: accepted as before', async () => {
    const r = await chat({ model, messages: messagesFor('thing'), response_format: { type: 'text' }, max_tokens: 4 });
    assert.equal(typeof r.text, 'string');
  });
}

function refusalChecks() {
  const cases = loadRefusals();
  cases.forEach(({ name, keyword, at, schema }, i) => {
    const format = responseFormat('refused', schema);
    const expectNamed = (err) => {
      assert.match(err.message, quoted(keyword), `the message does not name '${keyword}': ${err.message}`);
      if (at) assert.ok(err.message.includes(at), `the message does not say where (${at}): ${err.message}`);
      assert.equal(err.param, 'response_format');
    };
    check(`refused ${name}: chat 400 naming '${keyword}'`, async () => {
      const body = { model, messages: messagesFor('thing'), response_format: format, max_tokens: 8 };
      expectNamed(await refused('/v1/chat/completions', body, () => client.chat.completions.create(body)));
    });
    if (i % 3 === 0) {
      check(`refused ${name}: completions 400 naming '${keyword}'`, async () => {
        const body = { model, prompt: 'x', response_format: format, max_tokens: 8 };
        expectNamed(await refused('/v1/completions', body, () => client.completions.create(body)));
      });
    }
    if (i % 4 === 1) {
      check(`refused ${name}: streamed chat 400 before any event`, async () => {
        const body = { model, messages: messagesFor('thing'), response_format: format, max_tokens: 8, stream: true };
        expectNamed(await refused('/v1/chat/completions', body, () => client.chat.completions.create(body)));
      });
    }
  });

  // Requests that are not a schema the server can use at all.
  const bad = [
    ['json_schema without json_schema', { type: 'json_schema' }],
    ['json_schema.schema not an object', { type: 'json_schema', json_schema: { name: 'x', schema: 5 } }],
    ['an unknown response_format type', { type: 'xml' }],
    ['an unknown JSON type name', { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'strng' } } } } }],
    ['a $ref to a missing definition', { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } }, required: ['a'] } } }],
    ['a $ref outside the schema', { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: 'https://example.test/a.json' } } } } }],
  ];
  for (const [what, rf] of bad) {
    check(`refused ${what}: 400, param response_format`, async () => {
      const body = { model, messages: messagesFor('thing'), response_format: rf, max_tokens: 8 };
      const err = await refused('/v1/chat/completions', body, () => client.chat.completions.create(body));
      assert.match(err.param ?? '', /^response_format/, `param ${err.param}`);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Tools: tool_choice "required" and a named function constrain the call's arguments with the
// same grammar; they must come back as tool_calls whose arguments validate.

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', minLength: 1, maxLength: 24 }, unit: { enum: ['celsius', 'fahrenheit'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'create_event',
      description: 'Add an event to the calendar',
      parameters: {
        type: 'object',
        properties: {
          title: { type: 'string', maxLength: 40 },
          date: { type: 'string', format: 'date' },
          attendees: { type: 'array', maxItems: 3, items: { type: 'string', maxLength: 20 } },
          priority: { type: 'integer', minimum: 1, maximum: 5 },
        },
        required: ['title', 'date'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'lookup_order',
      description: 'Find an order by its id',
      parameters: {
        type: 'object',
        properties: { order: { $ref: '#/$defs/ref' } },
        required: ['order'],
        additionalProperties: false,
        $defs: {
          ref: {
            type: 'object',
            properties: { id: { type: 'string', pattern: '^ORD-[0-9]{6}$' }, include_items: { type: 'boolean' } },
            required: ['id'],
            additionalProperties: false,
          },
        },
      },
    },
  },
  { type: 'function', function: { name: 'get_time', description: 'The current time', parameters: { type: 'object', properties: {}, additionalProperties: false } } },
];
const toolValidators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const toolMessages = [
  { role: 'system', content: 'You are an assistant that uses tools.' },
  { role: 'user', content: 'What is the weather in Oslo, and book lunch with Ana tomorrow.' },
];

async function toolCall(body) {
  return traced('/v1/chat/completions', body, async () => {
    if (!body.stream) {
      const r = await client.chat.completions.create(body);
      const c = r.choices[0];
      const calls = (c.message.tool_calls ?? []).map((t) => ({ id: t.id, type: t.type, name: t.function.name, arguments: t.function.arguments }));
      return { calls, content: c.message.content, finish: c.finish_reason, usage: r.usage };
    }
    const s = await client.chat.completions.create({ ...body, stream_options: { include_usage: true } });
    const calls = [];
    let content = '';
    let finish = null;
    let usage = null;
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      content += c.delta?.content ?? '';
      for (const d of c.delta?.tool_calls ?? []) {
        const t = (calls[d.index] ??= { id: '', type: '', name: '', arguments: '' });
        if (d.id) t.id = d.id;
        if (d.type) t.type = d.type;
        if (d.function?.name) t.name += d.function.name;
        if (d.function?.arguments) t.arguments += d.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    return { calls, content, finish, usage };
  });
}

function expectCalls(r, { name, maxTokens, finishes = ['tool_calls'] }) {
  assert.ok(r.calls.length >= 1, `no tool_calls (finish_reason ${r.finish}, content ${JSON.stringify(r.content)})`);
  assert.ok(finishes.includes(r.finish), `finish_reason ${r.finish}`);
  assert.ok(!r.content, `content beside the call: ${JSON.stringify(r.content)}`);
  for (const c of r.calls) {
    assert.ok(typeof c.id === 'string' && c.id.length > 0, 'a call without an id');
    assert.equal(c.type, 'function');
    if (name) assert.equal(c.name, name);
    assert.ok(c.name in toolValidators, `a call to ${c.name}, which is not a tool`);
    parseValid(c.arguments, toolValidators[c.name]);
  }
  if (maxTokens) assert.ok(r.usage && r.usage.completion_tokens <= maxTokens, `completion_tokens ${r.usage?.completion_tokens}`);
}

function toolChecks(where) {
  const variants = [
    { tool_choice: 'required', temperature: 0, max_tokens: 100 },
    { tool_choice: 'required', temperature: 1, seed: 41, max_tokens: 100 },
    { tool_choice: 'required', temperature: 0.7, seed: 42, max_tokens: 100, stream: true },
    { tool_choice: 'required', temperature: 1, seed: 43, max_tokens: 60 },
    ...tools.map((t, i) => ({ tool_choice: { type: 'function', function: { name: t.function.name } }, temperature: 1, seed: 50 + i, max_tokens: 100 })),
    { tool_choice: { type: 'function', function: { name: 'lookup_order' } }, temperature: 0.7, seed: 55, max_tokens: 100, stream: true },
    // The shortest get_weather call, {"name":"get_weather","parameters":{"city":"a","unit":"celsius"}},
    // is 63 bytes: the least budget the server promises to complete.
    { tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 1, seed: 56, max_tokens: 72 },
  ];
  for (const v of variants) {
    const forced = typeof v.tool_choice === 'object' ? v.tool_choice.function.name : null;
    const label = `${where} tools tool_choice=${forced ?? v.tool_choice} t=${v.temperature}${v.stream ? ' stream' : ''} max_tokens=${v.max_tokens}`;
    check(label, async () => {
      const body = { model, messages: toolMessages, tools, ...v };
      const r = await toolCall(body);
      // A budget too small for the call the model started is steered to a close, which may be
      // reported as "length"; the call must be whole either way.
      const finishes = v.max_tokens < 90 ? ['tool_calls', 'length'] : ['tool_calls'];
      await traced('/v1/chat/completions', body, async () => expectCalls(r, { name: forced, maxTokens: v.max_tokens, finishes }));
    });
  }
  check(`${where} tools tool_choice=required t=0: streamed calls equal non-streamed`, async () => {
    const body = { model, messages: toolMessages, tools, tool_choice: 'required', temperature: 0, max_tokens: 100 };
    const a = await toolCall(body);
    const b = await toolCall({ ...body, stream: true });
    await traced('/v1/chat/completions', body, async () => {
      expectCalls(a, {});
      assert.deepEqual(b.calls.map((c) => [c.name, c.arguments]), a.calls.map((c) => [c.name, c.arguments]));
    });
  });
  check(`${where} tools tool_choice=get_weather max_tokens=30 (below the shortest call): refused, or "length", never a broken "stop"`, async () => {
    const body = { model, messages: toolMessages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 0, max_tokens: 30 };
    let r;
    try {
      r = await toolCall(body);
    } catch (e) {
      if (e instanceof OpenAI.APIError && e.status === 400) return;
      throw e;
    }
    await traced('/v1/chat/completions', body, async () => {
      if (r.finish === 'length') return;
      expectCalls(r, { name: 'get_weather' });
    });
  });
  // Parameters schemas that a server-side rewrite of the tools into one grammar could get
  // wrong: a recursion to the parameters' own root ("#"), draft-7 "definitions", and a const
  // whose value is an object with a "$ref" member (data, not a reference).
  const edgeTools = [
    {
      name: 'outline',
      parameters: {
        type: 'object',
        properties: { title: { type: 'string', maxLength: 8 }, sections: { type: 'array', maxItems: 2, items: { $ref: '#' } } },
        required: ['title', 'sections'],
        additionalProperties: false,
      },
    },
    {
      name: 'paint',
      parameters: {
        type: 'object',
        properties: { fill: { $ref: '#/definitions/color' }, stroke: { $ref: '#/definitions/color' } },
        required: ['fill'],
        additionalProperties: false,
        definitions: { color: { enum: ['red', 'green', 'blue'] } },
      },
    },
    {
      name: 'link_schema',
      parameters: {
        type: 'object',
        properties: { target: { const: { $ref: '#/components/schemas/Pet' } }, mode: { enum: [{ $ref: '#' }, 'inline'] } },
        required: ['target', 'mode'],
        additionalProperties: false,
      },
    },
  ];
  for (const [k, t] of edgeTools.entries()) {
    check(`${where} tools: parameters of ${t.name} (${['recursion to #', 'definitions', 'a const holding "$ref"'][k]}) validate`, async () => {
      const tool = { type: 'function', function: { name: t.name, description: 'edge case', parameters: t.parameters } };
      const body = { model, messages: toolMessages, tools: [tool], tool_choice: { type: 'function', function: { name: t.name } }, temperature: 1, seed: 70 + k, max_tokens: 120 };
      const r = await toolCall(body);
      await traced('/v1/chat/completions', body, async () => {
        assert.equal(r.calls.length, 1, `${r.calls.length} calls, finish_reason ${r.finish}`);
        assert.equal(r.calls[0].name, t.name);
        parseValid(r.calls[0].arguments, ajv.compile(t.parameters));
      });
    });
  }
  check(`${where} tools: a function without parameters gets {} arguments`, async () => {
    const ping = { type: 'function', function: { name: 'ping', description: 'Check the connection' } };
    const body = { model, messages: toolMessages, tools: [ping], tool_choice: { type: 'function', function: { name: 'ping' } }, temperature: 1, seed: 61, max_tokens: 40 };
    const r = await toolCall(body);
    await traced('/v1/chat/completions', body, async () => {
      assert.equal(r.calls.length, 1, `${r.calls.length} calls`);
      assert.equal(r.calls[0].name, 'ping');
      const args = JSON.parse(r.calls[0].arguments);
      assert.ok(args && typeof args === 'object' && !Array.isArray(args), `arguments ${r.calls[0].arguments}`);
    });
  });
  check(`${where} tools: parameters with 'uniqueItems' refused with 400 naming it`, async () => {
    const bad = { type: 'function', function: { name: 'tag', parameters: { type: 'object', properties: { tags: { type: 'array', items: { type: 'string' }, uniqueItems: true } }, required: ['tags'] } } };
    const body = { model, messages: toolMessages, tools: [bad], tool_choice: 'required', max_tokens: 8 };
    const err = await refused('/v1/chat/completions', body, () => client.chat.completions.create(body));
    assert.match(err.message, quoted('uniqueItems'), err.message);
    assert.match(err.param ?? '', /^tools/, `param ${err.param}`);
  });
  // "auto" leaves the model free to answer in prose; whatever it does must be well-formed.
  check(`${where} tools tool_choice=auto: a call, if made, validates`, async () => {
    const body = { model, messages: toolMessages, tools, tool_choice: 'auto', temperature: 1, seed: 62, max_tokens: 60 };
    const r = await toolCall(body);
    await traced('/v1/chat/completions', body, async () => {
      if (r.calls.length > 0) expectCalls(r, { finishes: ['tool_calls', 'length'] });
      else assert.ok(['stop', 'length'].includes(r.finish), `finish_reason ${r.finish}`);
    });
  });
  // The conversation goes on after the call: the call and its result are part of the prompt.
  check(`${where} tools: the turn after a tool result`, async () => {
    const first = await toolCall({ model, messages: toolMessages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 0, max_tokens: 80 });
    expectCalls(first, { name: 'get_weather' });
    const call = first.calls[0];
    const body = {
      model,
      tools,
      max_tokens: 8,
      messages: [
        ...toolMessages,
        { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
        { role: 'tool', tool_call_id: call.id, content: '{"temperature": -3, "sky": "snow"}' },
      ],
    };
    const r = await toolCall(body);
    assert.ok(['stop', 'length', 'tool_calls'].includes(r.finish), `finish_reason ${r.finish}`);
  });
}

// ---------------------------------------------------------------------------------------------

if (mode === 'all') {
  schemaChecks();
  jsonObjectChecks();
  refusalChecks();
  toolChecks('llama3.1-template');
} else {
  toolChecks('no-tools-template');
}

const limitS = Number(limitArg);
const watchdog = setTimeout(() => {
  console.log(`FAIL time limit: ${limitS} s passed; unfinished: ${[...running].join(', ')}; ${checks.length - next} not started`);
  console.log(`elapsed ${elapsed()} s`);
  process.exit(1);
}, limitS * 1000);
await runChecks();
clearTimeout(watchdog);
console.log(`${checks.length - failures} of ${checks.length} checks passed in ${elapsed()} s`);
process.exit(failures ? 1 : 0);
