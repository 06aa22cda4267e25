// A run's id, minted where a call is first taken: by the sidecar, or by the holder for a call held at zero
// (the sidecar then records the run under the id the hand-over names). UUID v7, so ids sort by creation.
import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

/**
 * Random bytes for 256 ids, drawn at once: on its own, `uuid` draws 16 bytes from the system per id, which
 * profiled at ~4% of a sync run's CPU in the sidecar.
 */
const randomPool = new Uint8Array(16 * 256);
let randomOffset = randomPool.length;
/** `uuid`'s monotonic state (ids of one millisecond still sort in creation order), which it skips when given bytes. */
let lastMs = Number.NEGATIVE_INFINITY;
let sequence = 0;

export function newRunId(): string {
  if (randomOffset === randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  const random = randomPool.subarray(randomOffset, (randomOffset += 16));
  const now = Date.now();
  if (now > lastMs) {
    // As `uuid` seeds it: 31 random bits, so a millisecond has room for 2^31 more ids.
    sequence = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
    lastMs = now;
  } else {
    sequence = (sequence + 1) | 0;
    if (sequence === 0) lastMs++;
  }
  uuidv7({ random, msecs: lastMs, seq: sequence }, idBytes, 0);
  return formatUuid(idBytes);
}

const idBytes = new Uint8Array(16);
const idText = Buffer.alloc(36);
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/**
 * The UUID's text form, written into one buffer and read out as one flat string: `uuid`'s own formatter joins
 * 36 pieces, ~700 bytes of garbage per id (measured with the sampling heap profiler).
 */
function formatUuid(bytes: Uint8Array): string {
  let at = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) idText[at++] = 0x2d;
    const byte = bytes[i]!;
    idText[at++] = HEX_DIGITS[byte >> 4]!;
    idText[at++] = HEX_DIGITS[byte & 0x0f]!;
  }
  return idText.toString('latin1', 0, 36);
}
