// The chat page of ll3 serve (webui/) in a real browser: Debian's chromium driven by
// playwright-core, against a server that wants an API key.
// Usage: node webui_test.mjs URL KEY ARTIFACT_DIR
// Checks, in one fresh browser profile: the page asks for the key (401) and shows the auth error
// of a message sent without it, then answers once the key is entered, with the server's greedy
// text; an answer streams (its text grows), stop ends it and keeps the partial answer;
// regenerate; edit; server errors are shown; markdown and code are rendered and sanitized; the
// conversations survive a reload and can be switched and deleted; a phone-sized viewport works;
// no script errors or Content-Security-Policy violations. Screenshots go to ARTIFACT_DIR.
// Prints one line per check ("ok   name" / "FAIL name: why") and exits 1 if any failed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [url, key, outDir] = process.argv.slice(2);
if (!url || !key || !outDir) {
  console.error('usage: node webui_test.mjs URL KEY ARTIFACT_DIR');
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
const T = Number(process.env.LL3_WEBUI_TIMEOUT_MS) || 90_000; // the machine may be busy: waits are long, and end early on success

let failures = 0;
let stopAll = false;
async function check(name, fn) {
  if (stopAll) {
    failures++;
    console.log(`FAIL ${name}: skipped after an earlier failure it depends on`);
    return;
  }
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

// The server's own greedy answer to these messages, for the page's to equal.
async function greedy(messages, maxTokens) {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0 }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()).choices[0].message.content;
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'll3-webui-profile-'));
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
page.on('console', (m) => {
  if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) pageErrors.push(`console: ${m.text()}`);
});
let chatRequests = 0;
page.on('request', (r) => {
  if (r.url().endsWith('/v1/chat/completions')) chatRequests++;
});

const conversations = () => page.evaluate(() => JSON.parse(localStorage.getItem('ll3.conversations') || '[]'));
const currentConv = async () => {
  const id = await page.evaluate(() => JSON.parse(localStorage.getItem('ll3.current') || 'null'));
  return (await conversations()).find((c) => c.id === id);
};
const lastAnswer = () => page.locator('#messages .msg.assistant').last();
const idle = () => page.locator('#send').waitFor({ state: 'visible' });

async function fillSettings(values) {
  if (!(await page.locator('#settings').evaluate((d) => d.open))) await page.click('#settings-btn');
  for (const [name, v] of Object.entries(values)) await page.fill(`#settings-form [name="${name}"]`, v);
  await page.click('#save-settings');
  await page.locator('#settings').waitFor({ state: 'hidden' });
}

async function send(text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

await check('the page loads from / and asks for the API key (401)', async () => {
  const res = await page.goto(url + '/');
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-type'], /^text\/html/);
  await page.locator('#auth-notice').waitFor({ state: 'visible' });
  assert.match(await page.locator('#auth-notice').innerText(), /API key/i);
  assert.equal(await page.locator('#settings').evaluate((d) => d.open), true);
});

await check('without the key a message shows the auth error; with it, the greedy answer', async () => {
  await page.click('#cancel-settings');
  await send('Hello');
  const err = page.locator('#messages .msg.assistant .error');
  await err.waitFor();
  assert.match(await err.innerText(), /401/);
  assert.match(await err.innerText(), /API key/i);
  await page.locator('#auth-notice').waitFor({ state: 'visible' }); // asked again
  // The key, and greedy sampling so that the answer is known.
  await fillSettings({ api_key: key, temperature: '0', max_tokens: '24' });
  await page.locator('#messages .msg.assistant .stats', { hasText: 'tokens/s' }).waitFor();
  await idle();
  const want = await greedy([{ role: 'user', content: 'Hello' }], 24);
  const conv = await currentConv();
  assert.equal(conv.messages.length, 2, JSON.stringify(conv.messages));
  assert.equal(conv.messages[1].content, want);
  assert.equal(await page.locator('#messages .error').count(), 0);
  assert.ok((await lastAnswer().locator('.content').innerText()).trim().length > 0);
  const stats = await lastAnswer().locator('.stats').innerText();
  assert.match(stats, /^24 tokens · [\d.]+ tokens\/s · first token \d+ ms/);
  assert.equal(await page.locator('#model').innerText() !== '', true);
});

await check('an answer streams (its text grows) and stop keeps the partial answer', async () => {
  await page.click('#new-chat');
  await fillSettings({ max_tokens: '4000' });
  const before = chatRequests;
  await send('Tell me a long story');
  await page.locator('#stop').waitFor({ state: 'visible' });
  const content = lastAnswer().locator('.content');
  await page.waitForFunction(() => {
    const n = [...document.querySelectorAll('#messages .msg.assistant .content')].pop();
    return n && n.textContent.length > 0;
  });
  const first = await content.textContent();
  await page.waitForFunction(
    (len) => [...document.querySelectorAll('#messages .msg.assistant .content')].pop().textContent.length > len,
    first.length,
  );
  const second = await content.textContent();
  assert.ok(second.length > first.length && second.startsWith(first.slice(0, 1)), `${first.length} then ${second.length}`);
  await page.click('#stop');
  await idle();
  assert.equal(await page.locator('#stop').isVisible(), false);
  const stopped = await content.textContent();
  await page.waitForTimeout(600);
  assert.equal(await content.textContent(), stopped, 'the answer grew after stop');
  assert.match(await lastAnswer().locator('.stats').innerText(), /stopped/);
  const conv = await currentConv();
  assert.equal(conv.messages.length, 2);
  assert.ok(conv.messages[1].content.length > 0, 'the partial answer was not kept');
  assert.ok(conv.messages[1].stats.stopped);
  assert.equal(chatRequests, before + 1);
});

await check('regenerate replaces the last answer', async () => {
  await fillSettings({ max_tokens: '16' });
  const before = chatRequests;
  const old = (await currentConv()).messages;
  await lastAnswer().locator('button.regenerate').click();
  await page.locator('#messages .msg.assistant .stats', { hasText: 'tokens/s' }).waitFor();
  await idle();
  const conv = await currentConv();
  assert.equal(conv.messages.length, 2);
  assert.equal(chatRequests, before + 1);
  assert.equal(conv.messages[1].content, await greedy([{ role: 'user', content: old[0].content }], 16));
});

await check('edit a message: the conversation continues from the edited text', async () => {
  await send('And another one');
  await idle();
  assert.equal((await currentConv()).messages.length, 4);
  await page.locator('#messages .msg.user').first().locator('button.edit').click();
  await page.fill('#messages .editing textarea', 'Tell me a short story');
  await page.click('#messages .editing button.save-edit');
  await page.locator('#messages .msg.assistant .stats', { hasText: 'tokens/s' }).waitFor();
  await idle();
  const conv = await currentConv();
  assert.deepEqual(conv.messages.map((m) => m.role), ['user', 'assistant']);
  assert.equal(conv.messages[0].content, 'Tell me a short story');
  assert.equal(conv.messages[1].content, await greedy([{ role: 'user', content: 'Tell me a short story' }], 16));
  assert.equal(await page.locator('#messages .msg.user .content').innerText(), 'Tell me a short story');
  assert.equal(conv.title, 'Tell me a short story');
});

await check('a server error is shown to the user', async () => {
  await fillSettings({ top_p: '7' });
  await send('This request is invalid');
  const err = lastAnswer().locator('.error');
  await err.waitFor();
  const text = await err.innerText();
  assert.match(text, /Error 400/);
  assert.match(text, /top_p/);
  await fillSettings({ top_p: '' });
});

await check('the system prompt and sampling settings go into the request', async () => {
  await fillSettings({ system: 'You are terse.', temperature: '0.5', top_p: '0.9', top_k: '20', min_p: '0.05', max_tokens: '4', seed: '7' });
  const req = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
  await send('Settings check');
  const body = JSON.parse((await req).postData());
  await idle();
  assert.deepEqual(body.messages[0], { role: 'system', content: 'You are terse.' });
  assert.equal(body.messages[body.messages.length - 1].content, 'Settings check');
  for (const [k, v] of Object.entries({ temperature: 0.5, top_p: 0.9, top_k: 20, min_p: 0.05, max_tokens: 4, seed: 7, stream: true })) {
    assert.equal(body[k], v, k);
  }
  assert.deepEqual(body.stream_options, { include_usage: true });
  assert.equal((await req).headers().authorization, `Bearer ${key}`);
  await fillSettings({ system: '', temperature: '0', top_p: '', top_k: '', min_p: '', max_tokens: '16', seed: '' });
});

await check('markdown and code are rendered, model HTML is not run', async () => {
  const md = '# Heading\n\nSome **bold** text and `code`.\n\n```python\ndef f(x):\n    return x + 1\n```\n\n' +
    '<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> [link](javascript:window.__xss=3)';
  await page.evaluate((content) => {
    const convs = JSON.parse(localStorage.getItem('ll3.conversations') || '[]');
    convs.push({ id: 'md-test', title: 'Markdown test', created: 1, updated: 1,
                 messages: [{ role: 'user', content: 'Show markdown' }, { role: 'assistant', content }] });
    localStorage.setItem('ll3.conversations', JSON.stringify(convs));
  }, md);
  await page.reload();
  await page.locator('#conv-list .conv[data-id="md-test"] .conv-open').click();
  const answer = lastAnswer().locator('.content');
  await answer.locator('h1', { hasText: 'Heading' }).waitFor();
  assert.equal(await answer.locator('strong').innerText(), 'bold');
  assert.ok((await answer.locator('pre code .hljs-keyword').count()) > 0, 'the code block is not highlighted');
  assert.equal(await answer.locator('img, script').count(), 0);
  assert.equal(await answer.locator('a', { hasText: 'link' }).count(), 1, 'the link is kept, without its javascript: address');
  const href = await answer.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href') || ''));
  assert.ok(href.every((h) => !/^javascript:/i.test(h)), href.join(','));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await page.screenshot({ path: path.join(outDir, 'webui-markdown.png') });
});

await check('conversations survive a reload: switch, then delete', async () => {
  await page.reload();
  const items = page.locator('#conv-list .conv');
  await items.first().waitFor();
  assert.equal(await items.count(), 3);
  await page.locator('#conv-list .conv-open', { hasText: 'Hello' }).click();
  await page.locator('#messages .msg.user', { hasText: 'Hello' }).waitFor();
  const hello = (await conversations()).find((c) => c.title === 'Hello');
  assert.equal(await page.locator('#messages .msg').count(), hello.messages.length);
  assert.equal(await page.locator('#conv-title').innerText(), 'Hello');
  await page.locator('#conv-list .conv-open', { hasText: 'Tell me a short story' }).click();
  await page.locator('#messages .msg.user', { hasText: 'Tell me a short story' }).waitFor();
  await page.locator('#conv-list .conv', { hasText: 'Markdown test' }).locator('.conv-del').click();
  assert.equal(await items.count(), 2);
  await page.reload();
  await items.first().waitFor();
  assert.equal(await items.count(), 2);
  assert.equal((await conversations()).some((c) => c.id === 'md-test'), false);
  await page.locator('#conv-list .conv-open', { hasText: 'Hello' }).click();
  await page.locator('#messages .msg.assistant .stats', { hasText: 'tokens/s' }).waitFor();
  const shot = path.join(outDir, 'webui.png');
  await page.screenshot({ path: shot });
  console.log(`screenshot: ${shot}`);
});

await check('a phone-sized viewport: no sideways scrolling, the list opens as a drawer', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator('#messages .msg').first().waitFor();
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'the page scrolls sideways');
  const inView = async (sel) => {
    const b = await page.locator(sel).boundingBox();
    return b && b.x >= 0 && b.x + b.width <= 391 && b.y >= 0 && b.y + b.height <= 845;
  };
  assert.equal(await inView('#sidebar'), false, 'the list covers the chat');
  assert.ok(await inView('#input'));
  assert.ok(await inView('#send'));
  await page.click('#menu');
  await page.waitForFunction(() => document.querySelector('#sidebar').getBoundingClientRect().x >= 0);
  await page.locator('#conv-list .conv-open', { hasText: 'Tell me a short story' }).click();
  await page.waitForFunction(() => document.querySelector('#sidebar').getBoundingClientRect().right <= 0);
  await send('Hi from a phone');
  await page.locator('#messages .msg.assistant .stats', { hasText: 'tokens/s' }).last().waitFor();
  await idle();
  const shot = path.join(outDir, 'webui-phone.png');
  await page.screenshot({ path: shot });
  console.log(`screenshot: ${shot}`);
});

await check('no script errors or Content-Security-Policy violations', async () => {
  assert.deepEqual(pageErrors, []);
});

await context.close();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
