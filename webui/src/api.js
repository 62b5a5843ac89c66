// The server's OpenAI API as the page uses it: a streamed chat completion (Server-Sent Events
// read from fetch's body, so that the Authorization header can be sent, which EventSource
// cannot), the model list and the token count of a conversation. URLs are relative, so the
// page also works behind a path prefix.

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status; // HTTP status; 0 when the server could not be reached
    this.code = code || '';
  }
}

function authHeaders(key) {
  const h = { 'Content-Type': 'application/json' };
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

// The message of an error response: OpenAI's {"error": {"message"}} shape, else the raw text.
async function errorFrom(res) {
  const text = await res.text().catch(() => '');
  let message = text.trim() || res.statusText || 'request failed';
  let code = '';
  try {
    const j = JSON.parse(text);
    if (j && j.error) {
      message = typeof j.error === 'string' ? j.error : j.error.message || message;
      code = j.error.code || '';
    }
  } catch {
    // not JSON: keep the text
  }
  return new ApiError(res.status, message, code);
}

async function post(path, body, key, signal) {
  let res;
  try {
    res = await fetch(path, { method: 'POST', headers: authHeaders(key), body: JSON.stringify(body), signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, `cannot reach the server (${e.message})`);
  }
  if (!res.ok) throw await errorFrom(res);
  return res;
}

// The prompt tokens a chat request of these messages will have (/tokenize renders them with the
// model's chat template, as /v1/chat/completions does); null when the server cannot say.
export async function countTokens(messages, key) {
  try {
    const res = await fetch('tokenize', { method: 'POST', headers: authHeaders(key), body: JSON.stringify({ messages }) });
    if (!res.ok) return null;
    const j = await res.json();
    return Array.isArray(j.tokens) ? j.tokens.length : null;
  } catch {
    return null;
  }
}

export async function listModels(key) {
  let res;
  try {
    res = await fetch('v1/models', { headers: authHeaders(key) });
  } catch (e) {
    throw new ApiError(0, `cannot reach the server (${e.message})`);
  }
  if (!res.ok) throw await errorFrom(res);
  return (await res.json()).data || [];
}

// Streams /v1/chat/completions. onDelta(text) gets each piece of the answer. Resolves with the
// timings and usage; an abort (signal) resolves too, with stopped set, keeping what came.
export async function streamChat({ body, key, signal, onDelta }) {
  const t0 = performance.now();
  const out = { stopped: false, finishReason: '', usage: null, chunks: 0, ttftMs: null, firstAt: 0, lastAt: 0, endAt: 0 };
  const res = await post('v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } }, key, signal);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  const onLine = (line) => {
    if (!line.startsWith('data:')) return; // comments, event names, blank separators
    const data = line.slice(5).trim();
    if (data === '[DONE]') return;
    let j;
    try {
      j = JSON.parse(data);
    } catch {
      throw new ApiError(500, `the server sent a malformed event: ${data.slice(0, 200)}`);
    }
    if (j.error) throw new ApiError(j.error.status || 500, j.error.message || String(j.error), j.error.code);
    if (j.usage) out.usage = j.usage;
    const choice = j.choices && j.choices[0];
    if (!choice) return;
    if (choice.finish_reason) out.finishReason = choice.finish_reason;
    const piece = choice.delta && choice.delta.content;
    if (piece) {
      const now = performance.now();
      if (out.ttftMs === null) {
        out.ttftMs = now - t0;
        out.firstAt = now;
      }
      out.lastAt = now;
      out.chunks++;
      onDelta(piece);
    }
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        onLine(line);
      }
    }
    if (buf) onLine(buf);
  } catch (e) {
    if (e.name !== 'AbortError') {
      reader.cancel().catch(() => {});
      if (e instanceof ApiError) throw e;
      throw new ApiError(0, `the connection broke during the answer (${e.message})`);
    }
    out.stopped = true;
  }
  out.endAt = performance.now();
  return out;
}

// "42 tokens · 123.4 tokens/s · first token 85 ms": generation speed counts the tokens after
// the first over the time since it, so the prompt's processing (the first token's wait) is
// reported apart.
export function speedLine(r) {
  if (!r) return '';
  const n = r.usage ? r.usage.completion_tokens : r.chunks;
  const parts = [`${r.usage ? '' : '≈'}${n} token${n === 1 ? '' : 's'}`];
  if (n > 1 && r.lastAt > r.firstAt) parts.push(`${((n - 1) / ((r.lastAt - r.firstAt) / 1000)).toFixed(1)} tokens/s`);
  if (r.ttftMs !== null && r.ttftMs !== undefined) parts.push(`first token ${Math.round(r.ttftMs)} ms`);
  if (r.stopped) parts.push('stopped');
  else if (r.finishReason === 'length') parts.push(r.contextFull ? 'the context is full' : 'max_tokens reached');
  return parts.join(' · ');
}
