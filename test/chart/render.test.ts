// The template renderer's subset, with Helm's semantics where charts depend on them, and its refusals.
import { describe, expect, it } from 'vitest';
import { coalesceValues, renderTemplate } from '../../charts/render/render.ts';

const render = (source: string, data: unknown = {}, helpers: string[] = []) => renderTemplate(source, data, helpers);

describe('actions and whitespace', () => {
  it('prints values and trims whitespace at {{- and -}}', () => {
    expect(render('a: {{ .x }}\nb: {{ .y.z }}', { x: 'one', y: { z: 2 } })).toBe('a: one\nb: 2');
    expect(render('a\n  {{- "b" }}\n  {{- "c" -}}\n  d', {})).toBe('abcd');
    expect(render('{{/* a comment */}}x{{- /* trimmed */ -}}  \n y')).toBe('xy');
    expect(render('{{ -3 }}')).toBe('-3');
  });

  it('moves . into with, keeps $ at the top', () => {
    const data = { name: 'top', inner: { v: 'in' } };
    expect(render('{{ with .inner }}{{ .v }} {{ $.name }}{{ else }}none{{ end }}|{{ with .missing }}x{{ else }}none{{ end }}', data)).toBe('in top|none');
  });

  it('takes if / else if / else by Go truth: empty strings, lists, maps, 0 and false are false', () => {
    const pick = (value: unknown) => render('{{ if .v }}yes{{ else if .w }}w{{ else }}no{{ end }}', { v: value, w: false });
    expect([pick('x'), pick(''), pick([]), pick({}), pick(0), pick(false), pick(undefined), pick([0]), pick({ a: 1 })]).toEqual(['yes', 'no', 'no', 'no', 'no', 'no', 'no', 'yes', 'yes']);
  });
});

describe('functions', () => {
  it('pipes the previous result in as the last argument; parentheses nest', () => {
    expect(render('{{ .a | default "d" | quote }} {{ printf "%s-%s" .b (.c | default "x") | trunc 5 | trimSuffix "-" }}', { a: '', b: 'abcd', c: '' })).toBe('"d" abcd');
  });

  it('toYaml writes YAML as Helm does: sorted keys, unindented lists, YAML 1.1 words quoted, no final newline', () => {
    expect(render('{{ toYaml . }}', { b: ['off', 'x'], a: { y: 'yes', n: 1 } })).toBe('a:\n  "n": 1\n  "y": "yes"\nb:\n- "off"\n- x');
    expect(render('k:{{ toYaml .m | nindent 2 }}', { m: {} })).toBe('k:\n  {}');
  });

  it('nindent starts a new line and pads every line', () => {
    expect(render('{{ "a\\n\\nb" | nindent 1 }}')).toBe('\n a\n \n b');
  });

  it('quote, default, contains, trunc and sha256sum follow Sprig', () => {
    expect(render('{{ quote "say \\"hi\\"\\n" }} {{ quote true }} {{ quote 8080 }}')).toBe('"say \\"hi\\"\\n" "true" "8080"');
    expect(render('{{ default "d" .zero }} {{ default "d" .set }}', { zero: 0, set: 'v' })).toBe('d v');
    expect(render('{{ if contains "run" "runlet-eu" }}y{{ end }}{{ if contains "run" "prod" }}n{{ end }}')).toBe('y');
    expect(render('{{ trunc 3 "abcdef" }} {{ trunc -2 "abcdef" }} {{ trunc 10 "ab" }}')).toBe('abc ef ab');
    expect(render('{{ sha256sum "abc" }}')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('int64 prints a count of a million or more in full, as Helm does, where printing the float64 would not', () => {
    expect(render('{{ int64 .big }} {{ int64 .small }} {{ if int64 .zero }}y{{ else }}n{{ end }}', { big: 2_000_000, small: 7, zero: 0 })).toBe('2000000 7 n');
    expect(() => render('{{ int64 .s }}', { s: 'x' })).toThrow(/int64 wants a number/);
  });

  it('semverCompare compares as Sprig does for one comparison, vendor suffixes ignored with -0, and refuses ranges', () => {
    const compare = (constraint: string, version: string) => render(`{{ if semverCompare "${constraint}" .v }}y{{ else }}n{{ end }}`, { v: version });
    expect([compare('>=1.21.0-0', 'v1.20.2'), compare('>=1.21.0-0', 'v1.21.0'), compare('>=1.21.0-0', 'v1.29.3-eks-8cb36c9')]).toEqual(['n', 'y', 'y']);
    expect([compare('<1.29', 'v1.28.9'), compare('>1.20', 'v1.20.0'), compare('=1.20', 'v1.20.0'), compare('!=1.20', 'v1.21.0')]).toEqual(['y', 'n', 'y', 'y']);
    expect(() => compare('>=1.20 <1.30', 'v1.25.0')).toThrow(/only one comparison/);
  });

  it('include renders a define with the data it is given', () => {
    const helpers = ['{{- define "name" -}}{{ .first }}-{{ .last }}{{- end }}'];
    expect(render('{{ include "name" .person }}', { person: { first: 'a', last: 'b' } }, helpers)).toBe('a-b');
    expect(render('{{- define "local" }}L{{ end }}{{ include "local" . }}')).toBe('L');
  });

  it('range repeats its body for each element of a list with . the element and $ the top, else when it is empty', () => {
    const data = { names: ['a', 'b'], none: [], top: 'T' };
    expect(render('{{ range .names }}[{{ . }}{{ $.top }}]{{ end }}|{{ range .none }}x{{ else }}empty{{ end }}|{{ range .missing }}x{{ end }}', data)).toBe('[aT][bT]|empty|');
  });

  it('eq is whether its first argument equals any of the others; fail stops with its message', () => {
    expect(render('{{ if eq .n "a" "b" }}y{{ else }}n{{ end }}{{ if eq .n "c" }}y{{ else }}n{{ end }}{{ if eq 1 1 }}y{{ end }}', { n: 'b' })).toBe('yny');
    expect(() => render('\n{{ if eq .n "kube-system" }}{{ fail "not there" }}{{ end }}', { n: 'kube-system' })).toThrow('template:2: not there');
  });

  it('required fails with its message on a missing or empty value and passes anything else', () => {
    expect(() => render('{{ required "host is required" .host }}', { host: '' })).toThrow('template:1: host is required');
    expect(render('{{ required "m" .n }}', { n: 0 })).toBe('0');
  });
});

describe('what it refuses, naming the line', () => {
  it.each([
    ['a variable', '{{ $x := 1 }}', /variables, assignments and operators are not supported/],
    ['an unsupported function', '\n{{ upper "a" }}', /template:2: the function "upper" is not supported/],
    ['an unsupported keyword', '{{ template "x" . }}', /"template" is not supported/],
    ['range over a map', '{{ range .m }}{{ end }}', /range over a map is not supported/],
    ['eq on a map', '{{ if eq .m "a" }}{{ end }}', /eq compares strings, numbers and booleans, got a map/],
    ['printing a missing value', 'a: {{ .nope }}', /template:1: printing: the value is missing/],
    ['quoting a missing value', '{{ .nope | quote }}', /quote: the value is missing/],
    ['a field of a missing value', '{{ .a.b.c }}', /nil pointer evaluating \.a\.b/],
    ['printing a map', '{{ .m }}', /cannot print a map; use toYaml/],
    ['a number Helm prints in exponent form', '{{ .big }}', /exponent form/],
    ['a printf verb other than %s', '{{ printf "%d" 1 }}', /verb %d is not supported/],
    ['an unclosed if', '{{ if .a }}x', /\{\{ if \}\} without \{\{ end \}\}/],
    ['a stray end', 'x{{ end }}', /unexpected \{\{ end \}\}/],
    ['an unknown template', '{{ include "nope" . }}', /no template named "nope"/],
    ['a wrongly typed argument', '{{ nindent 2 .m }}', /nindent wants a string, got a map/],
  ])('%s', (_, source, error) => {
    expect(() => render(source, { m: { a: 1 }, big: 1_000_000 })).toThrow(error);
  });
});

describe('values', () => {
  it('coalesce as Helm does: maps merge, other values replace, null deletes', () => {
    const base = { a: { b: 1, c: 2 }, list: [1, 2], gone: 'x' };
    expect(coalesceValues(base, { a: { c: 3 }, list: [9], gone: null })).toEqual({ a: { b: 1, c: 3 }, list: [9] });
  });
});
