// ll3 serve's /v1/embeddings driven by the official OpenAI Node client, as applications use it:
// the client's default (it asks for base64 and decodes the float32 bytes itself), then
// encoding_format 'float', each vector against llama.cpp's reference within the case's
// tolerance (1e-4 but where the fixtures' README says why not).
// Usage: node embeddings_client_test.mjs URL KEY REFERENCE_JSON
//   REFERENCE_JSON: tests/fixtures/embeddings/<model>.json ({cases: [{text, tokens, mean, last}]}),
//   the model the server runs.
// Prints one line per check ("ok   name" / "FAIL name: why") and exits 1 if any failed.
import OpenAI from 'openai';
import assert from 'node:assert/strict';
import fs from 'node:fs';

const [url, key, refFile] = process.argv.slice(2);
const ref = JSON.parse(fs.readFileSync(refFile, 'utf8'));
const texts = ref.cases.map((c) => c.text);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });

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

// Within the case's tolerance: 1e-4, but where the README says why not.
function expectClose(got, want, tolerance, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  assert.ok(worst <= tolerance, `${what}: max |diff| ${worst} > ${tolerance}`);
}

function expectList(res, n) {
  assert.equal(res.object, 'list');
  assert.equal(res.data.length, n);
  res.data.forEach((d, i) => {
    assert.equal(d.object, 'embedding');
    assert.equal(d.index, i);
  });
  const tokens = ref.cases.slice(0, n).reduce((s, c) => s + c.tokens.length, 0);
  assert.equal(res.usage.prompt_tokens, tokens);
  assert.equal(res.usage.total_tokens, tokens);
}

let fromBase64;
await check('embeddings.create default (base64, decoded by the client)', async () => {
  const res = await client.embeddings.create({ model: ref.model, input: texts });
  expectList(res, texts.length);
  res.data.forEach((d, i) => {
    assert.ok(Array.isArray(d.embedding), 'the client decodes base64 into numbers');
    expectClose(d.embedding, ref.cases[i].mean, ref.cases[i].tolerance, `input ${i}`);
  });
  fromBase64 = res.data.map((d) => Array.from(d.embedding));
});

await check("embeddings.create encoding_format 'float'", async () => {
  const res = await client.embeddings.create({ model: ref.model, input: texts, encoding_format: 'float' });
  expectList(res, texts.length);
  res.data.forEach((d, i) => {
    assert.ok(Array.isArray(d.embedding));
    expectClose(d.embedding, ref.cases[i].mean, ref.cases[i].tolerance, `input ${i}`);
    // JSON numbers are the floats written out: the same values as the base64 bytes.
    if (fromBase64) assert.deepEqual(Float32Array.from(d.embedding), Float32Array.from(fromBase64[i]));
  });
});

await check('embeddings.create one string, pooling last (an ll3 field)', async () => {
  const res = await client.embeddings.create({ model: ref.model, input: texts[1], pooling: 'last' });
  assert.equal(res.data.length, 1);
  expectClose(res.data[0].embedding, ref.cases[1].last, ref.cases[1].tolerance, 'last');
});

await check('embeddings.create token ids', async () => {
  const res = await client.embeddings.create({ model: ref.model, input: [ref.cases[0].tokens], encoding_format: 'float' });
  expectClose(res.data[0].embedding, ref.cases[0].mean, ref.cases[0].tolerance, 'tokens');
  assert.equal(res.usage.prompt_tokens, ref.cases[0].tokens.length);
});

await check('dimensions other than the model width: BadRequestError naming the param', async () => {
  await assert.rejects(client.embeddings.create({ model: ref.model, input: 'x', dimensions: 8 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'dimensions');
    return true;
  });
});

process.exit(failures > 0 ? 1 : 0);
