// Reads a server-sent-event response event by event, as a browser's EventSource would parse it.
import { EventSourceParserStream, type EventSourceMessage } from 'eventsource-parser/stream';

export class EventReader {
  readonly #reader: ReadableStreamDefaultReader<EventSourceMessage>;

  constructor(body: ReadableStream<Uint8Array>) {
    this.#reader = body
      .pipeThrough(new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>)
      .pipeThrough(new EventSourceParserStream())
      .getReader();
  }

  /** The next event, or null at the end of the stream. */
  async next(): Promise<EventSourceMessage | null> {
    const { value, done } = await this.#reader.read();
    return done ? null : value;
  }

  async rest(): Promise<EventSourceMessage[]> {
    const events: EventSourceMessage[] = [];
    for (let event = await this.next(); event; event = await this.next()) events.push(event);
    return events;
  }

  async cancel(): Promise<void> {
    await this.#reader.cancel();
  }
}
