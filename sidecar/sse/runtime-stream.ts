// Turns the runtime's stream lines (runtime/python/PROTOCOL.md: `i<json>`, `e<json>`, `d`) into SSE text.
// Only string items are parsed (to split their lines into `data:` fields); other items pass through as the
// JSON text the runtime produced, which has no raw newlines.
import type { RunError } from '../../crds/run-record-schema.ts';

export type StreamState = 'open' | 'done' | 'error';

const LINE_BREAKS = /\r\n|\r|\n/;

export class RuntimeStreamDecoder {
  state: StreamState = 'open';
  error: RunError | null = null;
  /**
   * The items as JSON texts, kept only when the outcome needs them (a webhook forwards the list), and only
   * while their list is within the result limit: past it none are kept (null), and `keptOverLimit` says so.
   */
  items: string[] | null;
  /** The items' list came to more than the limit: it was dropped, and no more items are kept. */
  keptOverLimit = false;
  /** Bytes of the JSON list (`[a,b]`) all the items make, counted while they are to be kept: past the limit too. */
  listBytes: number;
  readonly #keeping: boolean;
  readonly #keepLimitBytes: number;
  itemCount = 0;
  #partial = '';

  /** `keepLimitBytes`: keep the items' list up to this many bytes; null keeps none. */
  constructor(options: { keepLimitBytes: number | null }) {
    this.#keeping = options.keepLimitBytes !== null;
    this.#keepLimitBytes = options.keepLimitBytes ?? 0;
    this.items = this.#keeping ? [] : null;
    this.listBytes = this.#keeping ? 2 : 0;
  }

  /** Consumes a decoded chunk; returns the SSE text of the complete lines in it ('' if none). */
  push(chunk: string): string {
    let text = this.#partial + chunk;
    let out = '';
    let newline = text.indexOf('\n');
    while (newline !== -1 && this.state === 'open') {
      out += this.#line(text.slice(0, newline));
      text = text.slice(newline + 1);
      newline = text.indexOf('\n');
    }
    this.#partial = this.state === 'open' ? text : '';
    return out;
  }

  #line(line: string): string {
    const kind = line.charCodeAt(0);
    const json = line.slice(1);
    if (kind === 105 /* i */) {
      this.itemCount++;
      if (this.#keeping) this.#keep(json);
      return json.charCodeAt(0) === 34 /* " */ ? stringEvent(JSON.parse(json) as string) : 'data: ' + json + '\n\n';
    }
    if (kind === 101 /* e */) {
      this.state = 'error';
      this.error = parseError(json);
      return errorEvent(json);
    }
    if (kind === 100 /* d */) {
      this.state = 'done';
      return '';
    }
    this.state = 'error';
    this.error = { type: 'ProtocolError', message: `unexpected line from the runtime: ${line.slice(0, 80)}` };
    return errorEvent(JSON.stringify(this.error));
  }

  #keep(json: string): void {
    this.listBytes += Buffer.byteLength(json) + (this.itemCount > 1 ? 1 : 0);
    if (this.items === null) return;
    if (this.listBytes <= this.#keepLimitBytes) {
      this.items.push(json);
      return;
    }
    this.items = null;
    this.keptOverLimit = true;
  }
}

export function errorEvent(errorJson: string): string {
  return 'event: error\ndata: ' + errorJson + '\n\n';
}

function stringEvent(item: string): string {
  if (!LINE_BREAKS.test(item)) return 'data: ' + item + '\n\n';
  let event = '';
  for (const line of item.split(LINE_BREAKS)) event += 'data: ' + line + '\n';
  return event + '\n';
}

function parseError(json: string): RunError {
  try {
    const value = JSON.parse(json) as Partial<RunError>;
    return { type: String(value.type ?? 'Error'), message: String(value.message ?? '') };
  } catch {
    return { type: 'Error', message: json };
  }
}
