// Builds dist/index.html (or the file named by the first argument): src/main.js bundled and minified by esbuild, src/style.css minified,
// both inlined into src/index.html, so that the server embeds one self-contained file and the
// page loads nothing else. The output depends only on the sources and the locked packages.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(fileURLToPath(import.meta.url));
const src = (f) => path.join(root, 'src', f);

const common = { bundle: true, minify: true, write: false, charset: 'utf8', logLevel: 'warning' };
const js = await esbuild.build({
  ...common,
  entryPoints: [src('main.js')],
  format: 'iife',
  target: ['es2020', 'chrome90', 'firefox90', 'safari15'],
  legalComments: 'eof', // the packages' license notices stay with their code
});
const css = await esbuild.build({ ...common, entryPoints: [src('style.css')], target: ['chrome90', 'firefox90', 'safari15'] });

// Inside a <script> element, "</script" would end it early, whatever JavaScript context it is
// in; "<\/script" means the same in strings, regular expressions and comments.
const script = js.outputFiles[0].text.replace(/<\/(script)/gi, '<\\/$1').trim();
const style = css.outputFiles[0].text.replace(/<\/(style)/gi, '<\\/$1').trim();

const template = fs.readFileSync(src('index.html'), 'utf8');
const parts = template.split('/*STYLE*/');
const parts2 = parts.length === 2 ? parts[1].split('/*SCRIPT*/') : [];
if (parts2.length !== 2) throw new Error('src/index.html must hold /*STYLE*/ and /*SCRIPT*/ once each');
// Concatenation, not String.replace: the bundle holds "$&"-like sequences.
const html = parts[0] + style + parts2[0] + script + parts2[1];

// An argument names another output (tests/server/webui_test.cpp checks that dist/ is current).
const out = process.argv[2] || path.join(root, 'dist', 'index.html');
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, html);
console.log(`webui: ${path.relative(process.cwd(), out)}, ${Buffer.byteLength(html)} bytes`);
