// Parsing the Go text/template subset the chart uses into a tree (render.ts lists the subset). Anything
// outside it is a TemplateError naming the file and line, never silently treated as text.

/** A value an action computes: a field chain, a literal, a function name (as a command's head) or a nested pipeline. */
export type Operand =
  | { kind: 'field'; from: 'dot' | 'root'; path: string[] }
  | { kind: 'string'; value: string }
  | { kind: 'number'; value: number }
  | { kind: 'bool'; value: boolean }
  | { kind: 'function'; name: string }
  | { kind: 'pipeline'; pipeline: Pipeline };

/** `a b c | d e`: each command's result is the last argument of the next. */
export interface Pipeline {
  commands: Operand[][];
  line: number;
}

export type TemplateNode =
  | { kind: 'text'; text: string }
  | { kind: 'print'; pipeline: Pipeline }
  | { kind: 'if'; branches: { condition: Pipeline; body: TemplateNode[] }[]; otherwise: TemplateNode[] }
  | { kind: 'with'; value: Pipeline; body: TemplateNode[]; otherwise: TemplateNode[] }
  /** `range LIST`: the body once per element, with `.` the element; `otherwise` when the list is empty. */
  | { kind: 'range'; value: Pipeline; body: TemplateNode[]; otherwise: TemplateNode[] };

export interface ParsedTemplate {
  file: string;
  nodes: TemplateNode[];
  /** `{{ define "name" }}` bodies, for `include`. */
  defines: Map<string, TemplateNode[]>;
}

export class TemplateError extends Error {
  constructor(file: string, line: number, message: string) {
    super(`${file}:${line}: ${message}`);
    this.name = 'TemplateError';
  }
}

type Token =
  | { kind: 'operand'; operand: Operand }
  | { kind: 'keyword'; word: Keyword }
  | { kind: 'pipe' }
  | { kind: 'open' }
  | { kind: 'close' };

type Item = { kind: 'text'; text: string } | { kind: 'action'; tokens: Token[]; line: number };

type Keyword = 'if' | 'else' | 'end' | 'with' | 'range' | 'define';
const KEYWORDS: ReadonlySet<string> = new Set<Keyword>(['if', 'else', 'end', 'with', 'range', 'define']);
const isKeyword = (word: string): word is Keyword => KEYWORDS.has(word);
/** Go keywords and actions outside the subset: named so the error says what is unsupported. */
const UNSUPPORTED_WORDS = new Set(['template', 'block', 'break', 'continue', 'nil', 'and', 'or', 'not', 'ne']);

export function parseTemplate(file: string, source: string): ParsedTemplate {
  const items = lex(file, source);
  const defines = new Map<string, TemplateNode[]>();
  let position = 0;

  function fail(line: number, message: string): never {
    throw new TemplateError(file, line, message);
  }

  /** Nodes up to an `else` or `end` (returned, not consumed) or the end of input. */
  function parseList(inDefine: boolean): { nodes: TemplateNode[]; stop: { word: 'else' | 'end'; tokens: Token[]; line: number } | undefined } {
    const nodes: TemplateNode[] = [];
    while (position < items.length) {
      const item = items[position++]!;
      if (item.kind === 'text') {
        if (item.text !== '') nodes.push({ kind: 'text', text: item.text });
        continue;
      }
      const [head, ...rest] = item.tokens;
      if (head === undefined) continue; // a comment
      if (head.kind !== 'keyword') {
        nodes.push({ kind: 'print', pipeline: parsePipeline(item.tokens, item.line) });
        continue;
      }
      switch (head.word) {
        case 'else':
        case 'end':
          return { nodes, stop: { word: head.word, tokens: rest, line: item.line } };
        case 'if':
          nodes.push(parseIf(rest, item.line, inDefine));
          break;
        case 'with':
        case 'range':
          nodes.push(parseWith(head.word, rest, item.line, inDefine));
          break;
        case 'define': {
          if (inDefine) fail(item.line, '{{ define }} inside a {{ define }}');
          const name = rest.length === 1 && rest[0]!.kind === 'operand' && rest[0].operand.kind === 'string' ? rest[0].operand.value : undefined;
          if (name === undefined) fail(item.line, '{{ define }} takes one quoted name');
          if (defines.has(name)) fail(item.line, `template "${name}" is defined twice`);
          const { nodes: body, stop } = parseList(true);
          if (stop?.word !== 'end' || stop.tokens.length > 0) fail(item.line, `{{ define "${name}" }} needs a plain {{ end }}`);
          defines.set(name, body);
          break;
        }
      }
    }
    return { nodes, stop: undefined };
  }

  function parseIf(conditionTokens: Token[], line: number, inDefine: boolean): TemplateNode {
    const branches = [{ condition: parsePipeline(conditionTokens, line), body: [] as TemplateNode[] }];
    for (;;) {
      const { nodes, stop } = parseList(inDefine);
      branches[branches.length - 1]!.body = nodes;
      if (stop === undefined) fail(line, '{{ if }} without {{ end }}');
      if (stop.word === 'end') {
        if (stop.tokens.length > 0) fail(stop.line, 'unexpected words after {{ end }}');
        return { kind: 'if', branches, otherwise: [] };
      }
      const [next, ...condition] = stop.tokens;
      if (next === undefined) {
        const { nodes: otherwise, stop: end } = parseList(inDefine);
        if (end?.word !== 'end' || end.tokens.length > 0) fail(stop.line, '{{ else }} of {{ if }} needs a plain {{ end }}');
        return { kind: 'if', branches, otherwise };
      }
      if (next.kind !== 'keyword' || next.word !== 'if') fail(stop.line, 'only {{ else }} and {{ else if … }} may continue an {{ if }}');
      branches.push({ condition: parsePipeline(condition, stop.line), body: [] });
    }
  }

  /** `with` and `range` share a shape: a value, a body, an optional `else`. */
  function parseWith(kind: 'with' | 'range', valueTokens: Token[], line: number, inDefine: boolean): TemplateNode {
    const value = parsePipeline(valueTokens, line);
    const { nodes: body, stop } = parseList(inDefine);
    if (stop === undefined) fail(line, `{{ ${kind} }} without {{ end }}`);
    if (stop.tokens.length > 0) fail(stop.line, '{{ else … }} chains are supported after {{ if }} only');
    if (stop.word === 'end') return { kind, value, body, otherwise: [] };
    const { nodes: otherwise, stop: end } = parseList(inDefine);
    if (end?.word !== 'end' || end.tokens.length > 0) fail(stop.line, `{{ else }} of {{ ${kind} }} needs a plain {{ end }}`);
    return { kind, value, body, otherwise };
  }

  function parsePipeline(tokens: Token[], line: number): Pipeline {
    let index = 0;
    function pipeline(): Pipeline {
      const commands: Operand[][] = [[]];
      while (index < tokens.length) {
        const token = tokens[index]!;
        if (token.kind === 'close') break;
        index++;
        if (token.kind === 'pipe') {
          if (commands[commands.length - 1]!.length === 0) fail(line, 'empty command in a pipeline');
          commands.push([]);
        } else if (token.kind === 'open') {
          const inner = pipeline();
          if (tokens[index]?.kind !== 'close') fail(line, 'unclosed parenthesis');
          index++;
          commands[commands.length - 1]!.push({ kind: 'pipeline', pipeline: inner });
        } else if (token.kind === 'keyword') {
          fail(line, `unexpected {{ ${token.word} }} inside an expression`);
        } else {
          commands[commands.length - 1]!.push(token.operand);
        }
      }
      if (commands[commands.length - 1]!.length === 0) fail(line, 'missing value in a pipeline');
      return { commands, line };
    }
    const result = pipeline();
    if (index < tokens.length) fail(line, 'unexpected ")"');
    return result;
  }

  const { nodes, stop } = parseList(false);
  if (stop !== undefined) fail(stop.line, `unexpected {{ ${stop.word} }}`);
  return { file, nodes, defines };
}

/** Splits the source into text and actions, applying `{{-` / `-}}` trimming and dropping comments. */
function lex(file: string, source: string): Item[] {
  const items: Item[] = [];
  let index = 0;
  let line = 1;
  let trimNextText = false;
  while (index < source.length) {
    const open = source.indexOf('{{', index);
    let text = source.slice(index, open === -1 ? source.length : open);
    line += countNewlines(text);
    if (trimNextText) text = text.replace(/^\s+/, '');
    if (open === -1) {
      items.push({ kind: 'text', text });
      break;
    }
    const actionLine = line;
    let cursor = open + 2;
    // `{{-` trims only when a space follows: `{{-3}}` is the number -3 in Go.
    if (source[cursor] === '-' && /\s/.test(source[cursor + 1] ?? '')) {
      text = text.replace(/\s+$/, '');
      cursor += 2;
    }
    items.push({ kind: 'text', text });
    const { tokens, end, trimAfter } = lexAction(file, source, cursor, actionLine);
    line += countNewlines(source.slice(open, end));
    items.push({ kind: 'action', tokens, line: actionLine });
    trimNextText = trimAfter;
    index = end;
  }
  return items;
}

function lexAction(file: string, source: string, start: number, line: number): { tokens: Token[]; end: number; trimAfter: boolean } {
  const fail = (message: string): never => {
    throw new TemplateError(file, line, message);
  };
  const tokens: Token[] = [];
  let index = start;
  // As in Go, a comment fills its action exactly: {{/* … */}} or {{- /* … */ -}}.
  if (source.startsWith('/*', index)) {
    const close = source.indexOf('*/', index + 2);
    if (close === -1) fail('unclosed comment');
    const after = source.slice(close + 2).match(/^(?:}}|\s-}})/);
    if (after === null) fail('a comment must end its action: */}} or */ -}}');
    return { tokens, end: close + 2 + after![0].length, trimAfter: after![0] !== '}}' };
  }
  for (;;) {
    const spaceBefore = /\s/.test(source[index] ?? '');
    while (/\s/.test(source[index] ?? '')) index++;
    if (index >= source.length) fail('unclosed action: no "}}"');
    if (source.startsWith('}}', index)) return { tokens, end: index + 2, trimAfter: false };
    if (spaceBefore && source.startsWith('-}}', index)) return { tokens, end: index + 3, trimAfter: true };
    const char = source[index]!;
    const rest = source.slice(index);
    let match: RegExpMatchArray | null;
    if (char === '|' || char === '(' || char === ')') {
      tokens.push(char === '|' ? { kind: 'pipe' } : char === '(' ? { kind: 'open' } : { kind: 'close' });
      index++;
    } else if (char === '"') {
      match = rest.match(/^"(?:[^"\\\n]|\\.)*"/);
      if (match === null) return fail('unterminated string');
      tokens.push({ kind: 'operand', operand: { kind: 'string', value: unquoteGoString(match[0], fail) } });
      index += match[0].length;
    } else if (char === '`') {
      const close = source.indexOf('`', index + 1);
      if (close === -1) fail('unterminated raw string');
      tokens.push({ kind: 'operand', operand: { kind: 'string', value: source.slice(index + 1, close) } });
      index = close + 1;
    } else if ((match = rest.match(/^-?\d+(?![\w.])/))) {
      tokens.push({ kind: 'operand', operand: { kind: 'number', value: Number(match[0]) } });
      index += match[0].length;
    } else if ((match = rest.match(/^(\$?)((?:\.[A-Za-z_]\w*)+|\.)?(?![\w$.])/)) && match[0] !== '') {
      const path = match[2] === undefined || match[2] === '.' ? [] : match[2].slice(1).split('.');
      tokens.push({ kind: 'operand', operand: { kind: 'field', from: match[1] === '$' ? 'root' : 'dot', path } });
      index += match[0].length;
    } else if ((match = rest.match(/^[A-Za-z_]\w*/))) {
      const word = match[0];
      if (word === 'true' || word === 'false') tokens.push({ kind: 'operand', operand: { kind: 'bool', value: word === 'true' } });
      else if (isKeyword(word)) tokens.push({ kind: 'keyword', word });
      else if (UNSUPPORTED_WORDS.has(word)) fail(`"${word}" is not supported by this renderer`);
      else tokens.push({ kind: 'operand', operand: { kind: 'function', name: word } });
      index += word.length;
      if (source[index] === '.') fail(`field access on a function result (${word}.…) is not supported`);
    } else {
      fail(`unexpected "${rest.slice(0, 10)}" in an action (variables, assignments and operators are not supported)`);
    }
  }
}

const GO_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\' };

function unquoteGoString(quoted: string, fail: (message: string) => never): string {
  return quoted.slice(1, -1).replace(/\\(.)/g, (_, escape: string) => GO_ESCAPES[escape] ?? fail(`string escape \\${escape} is not supported`));
}

function countNewlines(text: string): number {
  let count = 0;
  for (const char of text) if (char === '\n') count++;
  return count;
}
