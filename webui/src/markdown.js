// Markdown to safe HTML: marked (GitHub-flavoured), code blocks highlighted by highlight.js (its
// core with a few common languages, to keep the page small), and DOMPurify over the result,
// because the text comes from a model and may hold anything. Raw HTML in the text is shown as
// text rather than interpreted.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const languages = { bash, c, cpp, css, go, java, javascript, json, python, rust, sql, typescript, xml, yaml };
for (const [name, def] of Object.entries(languages)) hljs.registerLanguage(name, def);

export function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const name = ((lang || '').match(/^\S*/) || [''])[0].toLowerCase();
      // Unlabelled blocks are not guessed at: highlightAuto tries every language on every
      // repaint of a streaming answer.
      const known = name && hljs.getLanguage(name);
      const body = known ? hljs.highlight(text, { language: name, ignoreIllegals: true }).value : escapeHtml(text);
      const label = name ? `<span class="code-lang">${escapeHtml(name)}</span>` : '';
      return `<div class="code">${label}<button type="button" class="copy-code" title="Copy the code">copy</button><pre><code class="hljs">${body}</code></pre></div>`;
    },
    html({ text }) {
      return escapeHtml(text);
    },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

export function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(text), { FORBID_TAGS: ['style', 'form', 'input', 'img'], FORBID_ATTR: ['style'] });
}
