// The chat page of ll3 serve: conversations kept in localStorage, answers streamed from
// /v1/chat/completions, with stop, regenerate, edit, settings (system prompt, sampling, the API
// key) and the speed of each answer. It keeps to the model's context: the tokens in use are shown
// beside the model, max_tokens is cut to what the context leaves, and a conversation that
// outgrows the context says so and offers a new chat or to leave out its oldest turns. Plain DOM
// code: the page stays small and needs no framework.
import { ApiError, countTokens, listModels, speedLine, streamChat } from './api.js';
import { renderMarkdown } from './markdown.js';
import { DEFAULT_SETTINGS, store } from './store.js';

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'dataset') Object.assign(n.dataset, v);
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else if (k in n) n[k] = v;
    else n.setAttribute(k, v);
  }
  n.append(...kids.filter((x) => x !== null && x !== undefined && x !== false));
  return n;
}

const button = (label, onclick, props = {}) => el('button', { type: 'button', onclick, ...props }, label);

let convs = store.conversations();
let currentId = store.current();
let settings = store.settings();
let apiKey = store.apiKey();
let modelId = '';
let modelCtx = 0; // the tokens one sequence holds (prompt and answer): /v1/models' max_model_len
// The answer being generated: { conv, msg, index, controller }. One at a time.
let running = null;
let frame = 0;

const current = () => convs.find((c) => c.id === currentId) || null;
const newId = () => Date.now().toString(36) + Math.random().toString(36).slice(2, 8);

function save() {
  store.saveConversations(convs);
  store.saveCurrent(currentId);
}

function titleOf(text) {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > 48 ? `${t.slice(0, 47)}…` : t || 'New chat';
}

// ---- rendering --------------------------------------------------------------------------------

function renderList() {
  const list = $('conv-list');
  const sorted = [...convs].sort((a, b) => b.updated - a.updated);
  list.replaceChildren(
    ...sorted.map((c) =>
      el(
        'div',
        { className: `conv${c.id === currentId ? ' active' : ''}`, dataset: { id: c.id } },
        button(c.title, () => select(c.id), { className: 'conv-open', title: c.title }),
        button('×', () => remove(c.id), { className: 'conv-del', title: 'Delete this conversation', 'aria-label': `Delete ${c.title}` }),
      ),
    ),
  );
  if (!sorted.length) list.append(el('p', { className: 'conv-none' }, 'No conversations yet.'));
  const c = current();
  $('conv-title').textContent = c ? c.title : 'New chat';
  document.title = c ? `${c.title} · ll3` : 'll3 chat';
  renderCtx();
}

// The tokens the current conversation's last answer left in the context, beside the model.
function renderCtx() {
  const node = $('ctx');
  if (!modelCtx) {
    node.textContent = '';
    return;
  }
  const c = current();
  const last = c && [...c.messages].reverse().find((m) => m.role === 'assistant' && m.stats && m.stats.usage);
  const used = last ? last.stats.usage.prompt_tokens + last.stats.usage.completion_tokens : 0;
  node.textContent = used ? `${used} / ${modelCtx} tokens` : `${modelCtx}-token context`;
  node.title = `The model's context holds ${modelCtx} tokens, prompt and answer together` +
    (used ? `; the last answer left ${used} in use` : '');
}

// What to do when a conversation outgrows the context: a new chat, or leave out its oldest turns.
function contextActions(c) {
  return el('span', { className: 'ctx-actions' },
    button('New chat', newChat, { className: 'link ctx-new' }),
    button('Leave out the oldest turns', () => dropOldest(c), { className: 'link ctx-drop' }));
}

function fillContent(node, m) {
  if (m.role === 'assistant') node.innerHTML = renderMarkdown(m.content);
  else node.textContent = m.content;
}

function messageNode(c, m, i) {
  const isRunning = running && running.msg === m;
  const body = el('div', { className: 'content' });
  fillContent(body, m);
  const node = el('div', { className: `msg ${m.role}${isRunning ? ' running' : ''}${m.omitted ? ' omitted' : ''}`, dataset: { index: String(i) } },
    el('div', { className: 'role' }, m.role === 'user' ? 'You' : 'Assistant'), body);
  if (m.error && m.error.code === 'context_length_exceeded') {
    node.append(
      el('div', { className: 'error context', role: 'alert' },
        el('strong', {}, 'The conversation no longer fits the context'), ': ', m.error.message, ' ', contextActions(c)),
    );
  } else if (m.error) {
    node.append(
      el('div', { className: 'error', role: 'alert' },
        el('strong', {}, m.error.status ? `Error ${m.error.status}` : 'Error'), ': ', m.error.message,
        m.error.status === 401 ? button('Enter the API key', () => openSettings(m.error.message), { className: 'link' }) : null),
    );
  }
  if (m.stats && m.stats.contextFull && i === c.messages.length - 1 && !isRunning) {
    node.append(el('div', { className: 'notice ctx-full', role: 'status' },
      `The context is full (${modelCtx} tokens): the next message needs room. `, contextActions(c)));
  }
  if (m.role === 'assistant') node.append(el('div', { className: 'stats' }, m.stats ? speedLine(m.stats) : ''));
  if (!isRunning) {
    const last = i === c.messages.length - 1;
    const actions = el('div', { className: 'actions' });
    if (m.role === 'user') actions.append(button('Edit', () => startEdit(c, i, node), { className: 'edit' }));
    else {
      if (m.content) actions.append(button('Copy', () => copyText(m.content), { className: 'copy' }));
      if (last) actions.append(button('Regenerate', () => regenerate(c), { className: 'regenerate' }));
    }
    node.append(actions);
  }
  return node;
}

function renderMessages() {
  const box = $('messages');
  const c = current();
  if (!c || !c.messages.length) {
    box.replaceChildren(el('div', { className: 'empty' }, el('h2', {}, 'll3'),
      el('p', {}, 'Type a message below. ⚙ Settings hold the system prompt, the sampling values and the API key.')));
    return;
  }
  const nodes = c.messages.map((m, i) => messageNode(c, m, i));
  const firstSent = c.messages.findIndex((m) => !m.omitted);
  if (firstSent > 0) {
    nodes.splice(firstSent, 0, el('div', { className: 'omitted-note' },
      `The ${firstSent} message${firstSent === 1 ? '' : 's'} above ${firstSent === 1 ? 'is' : 'are'} left out of what the model sees: they no longer fit its context.`));
  }
  box.replaceChildren(...nodes);
  box.scrollTop = box.scrollHeight;
}

// Repaints the streaming answer at most once a frame: re-rendering the markdown per token would
// cost more than the tokens take to arrive.
function paintRunning() {
  frame = 0;
  if (!running || running.conv.id !== currentId) return;
  const box = $('messages');
  const node = box.querySelector(`.msg[data-index="${running.index}"] .content`);
  if (!node) return;
  const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  fillContent(node, running.msg);
  if (stick) box.scrollTop = box.scrollHeight;
}

function setBusy(busy) {
  document.body.classList.toggle('busy', busy);
  $('send').hidden = busy;
  $('stop').hidden = !busy;
}

// ---- conversations ----------------------------------------------------------------------------

function select(id) {
  currentId = id;
  store.saveCurrent(id);
  closeSidebar();
  renderList();
  renderMessages();
}

function remove(id) {
  if (running && running.conv.id === id) running.controller.abort();
  convs = convs.filter((c) => c.id !== id);
  if (currentId === id) currentId = null;
  save();
  renderList();
  renderMessages();
}

function newChat() {
  currentId = null;
  store.saveCurrent(null);
  closeSidebar();
  renderList();
  renderMessages();
  $('input').focus();
}

function numberOr(v, int) {
  if (v === '' || v === null || v === undefined) return undefined;
  const x = int ? parseInt(v, 10) : parseFloat(v);
  return Number.isFinite(x) ? x : undefined;
}

function requestBody(history) {
  const messages = [];
  if (settings.system.trim()) messages.push({ role: 'system', content: settings.system });
  for (const m of history) {
    if (m.omitted) continue; // outside the context
    if (m.role === 'assistant' && !m.content) continue; // a failed answer
    messages.push({ role: m.role, content: m.content });
  }
  const body = { messages };
  if (modelId) body.model = modelId;
  for (const [k, int] of [['temperature', false], ['top_p', false], ['top_k', true], ['min_p', false], ['max_tokens', true], ['seed', true]]) {
    const v = numberOr(settings[k], int);
    if (v !== undefined) body[k] = v;
  }
  return body;
}

async function generate(c) {
  const msg = { role: 'assistant', content: '' };
  c.messages.push(msg);
  c.updated = Date.now();
  const index = c.messages.length - 1;
  running = { conv: c, msg, index, controller: new AbortController() };
  setBusy(true);
  save();
  renderList();
  if (c.id === currentId) renderMessages();
  try {
    const body = await fitContext(requestBody(c.messages.slice(0, index)));
    const r = await streamChat({
      body,
      key: apiKey,
      signal: running.controller.signal,
      onDelta: (piece) => {
        msg.content += piece;
        if (!frame) frame = requestAnimationFrame(paintRunning);
      },
    });
    const used = r.usage ? r.usage.prompt_tokens + r.usage.completion_tokens : 0;
    const contextFull = r.finishReason === 'length' && modelCtx > 0 && used >= modelCtx;
    msg.stats = { usage: r.usage, chunks: r.chunks, ttftMs: r.ttftMs, firstAt: r.firstAt, lastAt: r.lastAt, stopped: r.stopped, finishReason: r.finishReason, contextFull };
  } catch (e) {
    if (e.name === 'AbortError') msg.stats = { chunks: 0, ttftMs: null, stopped: true };
    else {
      msg.error = { status: e instanceof ApiError ? e.status : 0, code: e instanceof ApiError ? e.code : '', message: e.message || String(e) };
      if (msg.error.status === 401) openSettings(msg.error.message);
    }
  } finally {
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    running = null;
    c.updated = Date.now();
    setBusy(false);
    save();
    renderList();
    if (c.id === currentId) renderMessages();
  }
}

// The request as the context allows: refused (with the context's own error) when its prompt
// leaves no room for an answer, max_tokens cut to the room left. Without a count (an older
// server) it goes as it is, and the server's answer says what is wrong.
async function fitContext(body) {
  if (!modelCtx) return body;
  const n = await countTokens(body.messages, apiKey);
  if (n === null) return body;
  if (n >= modelCtx) {
    throw new ApiError(400, `its prompt is ${n} tokens, and the model's context holds ${modelCtx} in all, prompt and answer.`,
      'context_length_exceeded');
  }
  if (body.max_tokens !== undefined && n + body.max_tokens > modelCtx) body.max_tokens = modelCtx - n;
  return body;
}

// Leaves out the oldest turns (a user message and its answers) until what stays fits the
// context with room for an answer (a quarter of the context, at most 256 tokens), then answers
// the last message if it waits for one. The turns stay on the page, dimmed, and are not sent.
async function dropOldest(c) {
  if (running) return;
  const last = c.messages[c.messages.length - 1];
  if (last && last.role === 'assistant' && !last.content && last.error) c.messages.pop();
  const room = Math.min(256, Math.floor(modelCtx / 4));
  let first = Math.max(0, c.messages.findIndex((m) => !m.omitted));
  for (;;) {
    const n = await countTokens(requestBody(c.messages.slice(first)).messages, apiKey);
    if (n === null || n + room <= modelCtx) break;
    const next = c.messages.findIndex((m, i) => i > first && m.role === 'user');
    if (next < 0) {
      // One turn left, and it does not fit alone: only a shorter message helps.
      c.messages.push({ role: 'assistant', content: '', error: { status: 400, code: 'context_length_exceeded',
        message: `the last message alone is ${n} tokens, and the context holds ${modelCtx} with room for an answer; edit it to be shorter.` } });
      save();
      renderMessages();
      return;
    }
    first = next;
  }
  c.messages.forEach((m, i) => {
    m.omitted = i < first;
  });
  save();
  renderMessages();
  const tail = c.messages[c.messages.length - 1];
  if (tail && tail.role === 'user') generate(c);
}

function send(text) {
  if (running || !text.trim()) return;
  let c = current();
  if (!c) {
    c = { id: newId(), title: titleOf(text), created: Date.now(), updated: Date.now(), messages: [] };
    convs.push(c);
    currentId = c.id;
  }
  // An answer that failed is replaced by the next one rather than left between two questions.
  const last = c.messages[c.messages.length - 1];
  if (last && last.role === 'assistant' && !last.content && last.error) c.messages.pop();
  c.messages.push({ role: 'user', content: text });
  generate(c);
}

function regenerate(c) {
  if (running) return;
  while (c.messages.length && c.messages[c.messages.length - 1].role === 'assistant') c.messages.pop();
  if (c.messages.length) generate(c);
}

function startEdit(c, i, node) {
  if (running) return;
  const ta = el('textarea', { className: 'edit-box', value: c.messages[i].content, rows: 3 });
  const submit = () => {
    const text = ta.value.trim();
    if (!text || running) return;
    c.messages.splice(i);
    c.messages.push({ role: 'user', content: text });
    if (i === 0) c.title = titleOf(text);
    generate(c);
  };
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    } else if (e.key === 'Escape') renderMessages();
  });
  node.querySelector('.content').replaceWith(
    el('div', { className: 'editing' }, ta,
      el('div', { className: 'edit-actions' }, button('Cancel', renderMessages), button('Send', submit, { className: 'primary save-edit' }))),
  );
  node.querySelector('.actions')?.remove();
  ta.focus();
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Without a secure context (http on a LAN address) the clipboard API is absent.
    const ta = el('textarea', { value: text });
    document.body.append(ta);
    ta.select();
    document.execCommand('copy');
    ta.remove();
  }
}

// ---- settings and the API key -----------------------------------------------------------------

function openSettings(authMessage) {
  const dlg = $('settings');
  const form = $('settings-form');
  for (const k of Object.keys(DEFAULT_SETTINGS)) form.elements[k].value = settings[k];
  form.elements.api_key.value = apiKey;
  const notice = $('auth-notice');
  notice.hidden = !authMessage;
  notice.textContent = authMessage ? `The server wants an API key: ${authMessage}` : '';
  dlg.dataset.auth = authMessage ? '1' : '';
  if (!dlg.open) dlg.showModal();
  (authMessage ? form.elements.api_key : form.elements.system).focus();
}

function saveSettings() {
  const form = $('settings-form');
  for (const k of Object.keys(DEFAULT_SETTINGS)) settings[k] = form.elements[k].value;
  apiKey = form.elements.api_key.value.trim();
  store.saveSettings(settings);
  store.saveApiKey(apiKey);
  const wasAuth = $('settings').dataset.auth === '1';
  $('settings').close();
  loadModel();
  // The answer that failed for want of the key is retried with it.
  const c = current();
  const last = c && c.messages[c.messages.length - 1];
  if (wasAuth && last && last.error && last.error.status === 401) regenerate(c);
}

async function loadModel() {
  try {
    const models = await listModels(apiKey);
    modelId = models.length ? models[0].id : '';
    modelCtx = models.length && Number.isInteger(models[0].max_model_len) ? models[0].max_model_len : 0;
    $('model').textContent = modelId;
    $('model').title = modelId ? `model: ${modelId}` : '';
    renderCtx();
  } catch (e) {
    $('model').textContent = '';
    if (e.status === 401) openSettings(e.message);
  }
}

// ---- wiring -----------------------------------------------------------------------------------

function closeSidebar() {
  document.body.classList.remove('side-open');
}

function autosize(ta) {
  ta.style.height = 'auto';
  ta.style.height = `${Math.min(ta.scrollHeight, 200)}px`;
}

function init() {
  const input = $('input');
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = input.value;
    if (running || !text.trim()) return;
    input.value = '';
    autosize(input);
    send(text);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  input.addEventListener('input', () => autosize(input));
  $('stop').addEventListener('click', () => running && running.controller.abort());
  $('new-chat').addEventListener('click', newChat);
  $('menu').addEventListener('click', () => document.body.classList.toggle('side-open'));
  $('scrim').addEventListener('click', closeSidebar);
  $('settings-btn').addEventListener('click', () => openSettings(''));
  $('settings-form').addEventListener('submit', (e) => {
    e.preventDefault(); // no navigation: Enter in a field saves too
    saveSettings();
  });
  $('cancel-settings').addEventListener('click', () => $('settings').close());
  $('reset-settings').addEventListener('click', () => {
    const form = $('settings-form');
    for (const [k, v] of Object.entries(DEFAULT_SETTINGS)) form.elements[k].value = v;
  });
  $('messages').addEventListener('click', (e) => {
    const b = e.target.closest('.copy-code');
    if (b) copyText(b.parentElement.querySelector('code').textContent);
  });
  // Another tab changed the conversations: show them (unless this one is mid-answer).
  window.addEventListener('storage', (e) => {
    if (e.key !== 'll3.conversations' || running) return;
    convs = store.conversations();
    renderList();
    renderMessages();
  });
  if (currentId && !current()) currentId = null;
  renderList();
  renderMessages();
  loadModel();
}

init();
