// md.js — a small Markdown renderer with code highlighting for model answers (hand-written: the
// subset models write — fenced code, headings, lists, quotes, tables as text, emphasis, inline
// code, links — in under 200 lines, where an npm library would add 30-100 kB; README dependency table).
// Everything is HTML-escaped before any markup is added, so model output cannot inject HTML.
'use strict';
(function () {
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

  const KEYWORDS = new Set(('and as assert async await break case catch class const continue def default del do elif else ' +
    'enum except export extends false False finally fn for from func function go if impl import in interface is lambda let ' +
    'loop match mod mut new nil None nonlocal not null or package pass pub raise return self static struct super switch ' +
    'this throw true True try type typeof use var void while with yield int char float double long unsigned signed ' +
    'sizeof typedef bool auto extern register volatile inline restrict goto union').split(' '));
  const HASH_COMMENT = new Set(['', 'py', 'python', 'sh', 'bash', 'shell', 'ruby', 'rb', 'yaml', 'yml', 'toml', 'perl', 'r']);

  // Highlight code of language lang: returns escaped HTML with <span class="hl-*"> around tokens.
  function highlight(code, lang) {
    const hash = HASH_COMMENT.has((lang || '').toLowerCase());
    const re = new RegExp([
      hash ? '(#[^\\n]*)' : '(\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?(?:\\*\\/|$))',
      '("""[\\s\\S]*?(?:"""|$)|\'\'\'[\\s\\S]*?(?:\'\'\'|$)|"(?:\\\\.|[^"\\\\\\n])*"?|\'(?:\\\\.|[^\'\\\\\\n])*\'?|`(?:\\\\.|[^`\\\\])*`?)',
      '(\\b(?:0x[0-9a-fA-F]+|\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?)\\b)',
      '([A-Za-z_][A-Za-z0-9_]*)',
    ].join('|'), 'g');
    let out = '', last = 0, m;
    while ((m = re.exec(code)) !== null) {
      out += esc(code.slice(last, m.index));
      const t = esc(m[0]);
      if (m[1] !== undefined) out += `<span class="hl-com">${t}</span>`;
      else if (m[2] !== undefined) out += `<span class="hl-str">${t}</span>`;
      else if (m[3] !== undefined) out += `<span class="hl-num">${t}</span>`;
      else if (KEYWORDS.has(m[4])) out += `<span class="hl-kw">${t}</span>`;
      else out += t;
      last = re.lastIndex;
      if (m[0].length === 0) re.lastIndex++;
    }
    return out + esc(code.slice(last));
  }

  // Inline markup of one escaped line: `code`, **bold**, *italic* / _italic_, [text](http...) links.
  function inline(s) {
    const codes = [];
    s = s.replace(/`([^`]+)`/g, (_, c) => { codes.push(c); return `\u0000${codes.length - 1}\u0000`; });
    s = s.replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^\w*])\*([^*\s][^*]*)\*(?!\w)/g, '$1<em>$2</em>')
      .replace(/(^|[^\w])_([^_\s][^_]*)_(?!\w)/g, '$1<em>$2</em>')
      .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
    return s.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[+i]}</code>`);
  }

  function codeBlock(code, lang) {
    return `<div class="code"><div class="code-head"><span>${esc(lang || 'text')}</span>` +
      `<button type="button" class="copy-code">Copy</button></div><pre><code>${highlight(code, lang)}</code></pre></div>`;
  }

  // Block structure of text without fences: paragraphs, headings, lists, quotes, rules.
  function blocks(text) {
    const lines = esc(text).split('\n');
    let html = '', para = [], list = null;
    const flushPara = () => { if (para.length) html += `<p>${para.map(inline).join('<br>')}</p>`; para = []; };
    const flushList = () => { if (list) html += `<${list.tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join('')}</${list.tag}>`; list = null; };
    for (const line of lines) {
      let m;
      if (!line.trim()) { flushPara(); flushList(); continue; }
      if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
        flushPara(); flushList();
        const n = Math.min(6, m[1].length + 2);
        html += `<h${n}>${inline(m[2])}</h${n}>`;
      } else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
        flushPara(); flushList(); html += '<hr>';
      } else if ((m = /^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/.exec(line))) {
        flushPara();
        const tag = m[1] ? 'ol' : 'ul';
        if (!list || list.tag !== tag) { flushList(); list = { tag, items: [] }; }
        list.items.push(m[2]);
      } else if ((m = /^&gt;\s?(.*)$/.exec(line))) {
        flushPara(); flushList(); html += `<blockquote>${inline(m[1])}</blockquote>`;
      } else if (list && /^\s+\S/.test(line)) {
        list.items[list.items.length - 1] += ' ' + line.trim();
      } else {
        flushList(); para.push(line);
      }
    }
    flushPara(); flushList();
    return html;
  }

  // Markdown text -> HTML. An unterminated fence (a stream still running) renders as code so far.
  function render(text) {
    let html = '', pos = 0;
    const fence = /^([ \t]*)(```+|~~~+)[ \t]*([\w+#.-]*)[^\n]*\n/gm;
    let m;
    while ((m = fence.exec(text)) !== null) {
      html += blocks(text.slice(pos, m.index));
      const close = new RegExp(`^[ \\t]*${m[2][0] === '`' ? '`' : '~'}{${m[2].length},}[ \\t]*$`, 'm');
      const rest = text.slice(fence.lastIndex);
      const c = close.exec(rest);
      const code = c ? rest.slice(0, c.index).replace(/\n$/, '') : rest;
      html += codeBlock(code, m[3]);
      pos = c ? fence.lastIndex + c.index + c[0].length : text.length;
      fence.lastIndex = pos;
    }
    return html + blocks(text.slice(pos));
  }

  window.mtplxMarkdown = { render, highlight, escape: esc };
})();
