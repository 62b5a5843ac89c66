// LoRA adapters through the official OpenAI Node client against `ll3 serve --lora alpha=...
// --lora beta=...` (tests/server/lora_server_test.cpp starts it and computes the expectations):
// the adapters are listed as models, one is selected by its model id, its text is the engine's,
// streamed and not, and an unknown model id as an adapter list entry is a NotFoundError.
// Usage: node lora_client_test.mjs URL EXPECT_JSON ({"prompt_tokens", "alpha", "base"})
import OpenAI from 'openai';
import assert from 'node:assert/strict';
import fs from 'node:fs';

const [url, expectFile] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60_000 });

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

const body = (model) => ({ model, prompt: expected.prompt_tokens, max_tokens: 8, temperature: 0, ignore_eos: true });

await check('adapters are listed as models', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.equal(ids.length, 3, ids.join(','));
  assert.deepEqual(ids.slice(1), ['alpha', 'beta']);
  const alpha = await client.models.retrieve('alpha');
  assert.equal(alpha.id, 'alpha');
  assert.equal(alpha.parent, ids[0]);
});

await check('model selects the adapter: its greedy text, streamed and not', async () => {
  assert.notEqual(expected.alpha, expected.base);
  const r = await client.completions.create(body('alpha'));
  assert.equal(r.model, 'alpha');
  assert.equal(r.choices[0].text, expected.alpha);
  let text = '';
  for await (const chunk of await client.completions.create({ ...body('alpha'), stream: true })) {
    assert.equal(chunk.model, 'alpha');
    text += chunk.choices[0]?.text ?? '';
  }
  assert.equal(text, expected.alpha);
  const base = await client.completions.create(body((await client.models.list()).data[0].id));
  assert.equal(base.choices[0].text, expected.base);
});

await check('an unknown adapter in the lora list is a NotFoundError', async () => {
  await assert.rejects(client.completions.create({ ...body('alpha'), lora: [{ id: 'gamma', scale: 1 }] }),
    (e) => e instanceof OpenAI.NotFoundError && /gamma/.test(e.message));
});

process.exitCode = failures ? 1 : 0;
