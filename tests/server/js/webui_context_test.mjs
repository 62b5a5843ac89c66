// The chat page on a model whose context is short (the shared trained model: 256 tokens), in a
// real browser: Debian's chromium driven by playwright-core, against a server without a key.
// Usage: node webui_context_test.mjs URL ARTIFACT_DIR
// Checks: the context is shown beside the model; a message with the default settings is
// answered (no max_tokens is sent) and the tokens in use are shown; an answer that fills the
// context says so and offers a new chat or to leave out the oldest turns; a message that no
// longer fits is not sent and says why; leaving out the oldest turns answers it from the turns
// that fit (the left-out ones stay on the page, dimmed, and are not sent); a max_tokens larger
// than the context leaves is cut to it; "New chat" starts one; no script errors.
// Prints one line per check ("ok   name" / "FAIL name: why") and exits 1 if any failed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node webui_context_test.mjs URL ARTIFACT_DIR');
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
const T = Number(process.env.LL3_WEBUI_TIMEOUT_MS) || 90_000; // waits end early on success

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

const models = await (await fetch(`${url}/v1/models`)).json();
const ctx = models.data[0].max_model_len;
async function promptTokens(messages) {
  const r = await fetch(`${url}/tokenize`, { method: 'POST', body: JSON.stringify({ messages }) });
  assert.equal(r.status, 200);
  return (await r.json()).tokens.length;
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'll3-webui-ctx-profile-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.LL3_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
  viewport: { width: 1200, height: 820 },
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(T);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
const chatBodies = [];
page.on('request', (r) => {
  if (r.url().endsWith('/v1/chat/completions')) chatBodies.push(JSON.parse(r.postData()));
});

const currentConv = () => page.evaluate(() => {
  const id = JSON.parse(localStorage.getItem('ll3.current') || 'null');
  return JSON.parse(localStorage.getItem('ll3.conversations') || '[]').find((c) => c.id === id);
});
const lastAnswer = () => page.locator('#messages .msg.assistant').last();
const idle = () => page.locator('#send').waitFor({ state: 'visible' });
async function send(text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}
async function fillSettings(values) {
  await page.click('#settings-btn');
  for (const [name, v] of Object.entries(values)) await page.fill(`#settings-form [name="${name}"]`, v);
  await page.click('#save-settings');
  await page.locator('#settings').waitFor({ state: 'hidden' });
}

await check(`the page shows the model's context (${ctx} tokens) beside its name`, async () => {
  assert.equal(ctx, 256, 'the trained model holds 256 tokens');
  await page.goto(url + '/');
  await page.locator('#ctx', { hasText: `${ctx}-token context` }).waitFor();
  assert.notEqual(await page.locator('#model').innerText(), '');
});

await check('with the default settings a message is answered: no max_tokens is sent, the tokens in use are shown', async () => {
  await fillSettings({ temperature: '0' }); // greedy: the trained model loops, so it fills the context
  await send('Hello');
  await lastAnswer().locator('.stats', { hasText: 'tokens' }).waitFor();
  await idle();
  assert.equal(chatBodies.length, 1);
  assert.equal('max_tokens' in chatBodies[0], false, JSON.stringify(chatBodies[0]));
  assert.equal(await page.locator('#messages .error').count(), 0);
  const conv = await currentConv();
  const usage = conv.messages[1].stats.usage;
  assert.ok(conv.messages[1].content.length > 0);
  assert.equal(usage.prompt_tokens, await promptTokens([{ role: 'user', content: 'Hello' }]));
  await page.locator('#ctx', { hasText: `${usage.prompt_tokens + usage.completion_tokens} / ${ctx} tokens` }).waitFor();
});

await check('an answer that fills the context says so, with a new chat and leaving out old turns offered', async () => {
  const conv = await currentConv();
  const usage = conv.messages[1].stats.usage;
  assert.equal(usage.prompt_tokens + usage.completion_tokens, ctx, 'the greedy answer ran to the end of the context');
  assert.match(await lastAnswer().locator('.stats').innerText(), /the context is full/);
  const notice = lastAnswer().locator('.ctx-full');
  await notice.waitFor();
  assert.match(await notice.innerText(), /context is full/);
  assert.equal(await notice.locator('button.ctx-new').count(), 1);
  assert.equal(await notice.locator('button.ctx-drop').count(), 1);
  await page.screenshot({ path: path.join(outDir, 'webui-context-full.png') });
});

await check('a message that no longer fits is not sent, and the page says why', async () => {
  const before = chatBodies.length;
  await send('And then what happened?');
  const err = lastAnswer().locator('.error.context');
  await err.waitFor();
  await idle();
  assert.equal(chatBodies.length, before, 'a request that cannot fit was sent');
  const text = await err.innerText();
  assert.match(text, /no longer fits the context/);
  assert.match(text, new RegExp(`holds ${ctx}`));
  assert.equal(await err.locator('button.ctx-drop').count(), 1);
  assert.equal(await err.locator('button.ctx-new').count(), 1);
});

await check('leaving out the oldest turns answers the message from what fits; the old turn stays, dimmed and unsent', async () => {
  const before = chatBodies.length;
  await lastAnswer().locator('.error.context button.ctx-drop').click();
  await lastAnswer().locator('.stats', { hasText: 'tokens' }).waitFor();
  await idle();
  assert.equal(chatBodies.length, before + 1);
  const sent = chatBodies[chatBodies.length - 1].messages;
  assert.deepEqual(sent, [{ role: 'user', content: 'And then what happened?' }]);
  assert.equal(await page.locator('#messages .error').count(), 0);
  const conv = await currentConv();
  assert.deepEqual(conv.messages.map((m) => [m.role, !!m.omitted]), [['user', true], ['assistant', true], ['user', false], ['assistant', false]]);
  assert.equal(await page.locator('#messages .msg.omitted').count(), 2);
  await page.locator('#messages .omitted-note').waitFor();
  assert.ok(conv.messages[3].content.length > 0);
  await page.screenshot({ path: path.join(outDir, 'webui-context-dropped.png') });
});

await check('a max_tokens larger than the context leaves is cut to what it leaves', async () => {
  await page.click('#new-chat');
  await fillSettings({ max_tokens: '1024' }); // the old page's default
  await send('Hi');
  await lastAnswer().locator('.stats', { hasText: 'tokens' }).waitFor();
  await idle();
  assert.equal(await page.locator('#messages .error').count(), 0);
  const n = await promptTokens([{ role: 'user', content: 'Hi' }]);
  assert.equal(chatBodies[chatBodies.length - 1].max_tokens, ctx - n);
  await fillSettings({ max_tokens: '' });
});

await check('"New chat" from the notice starts an empty conversation', async () => {
  const notice = lastAnswer().locator('.ctx-full');
  await notice.waitFor();
  await notice.locator('button.ctx-new').click();
  await page.locator('#messages .empty').waitFor();
  await page.locator('#ctx', { hasText: `${ctx}-token context` }).waitFor();
});

await check('no script errors', async () => {
  assert.deepEqual(pageErrors, []);
});

await context.close();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
