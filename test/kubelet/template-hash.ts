// The `pod-template-hash` of a Deployment's pod template: a short, label-safe digest of the template, the
// same for the same template however its keys are ordered, different when anything in it changes.
import { createHash } from 'node:crypto';

/** The alphabet Kubernetes uses for generated name suffixes: no vowels, so no words, and no look-alikes. */
export const NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortedKeys((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

export function templateHash(template: unknown): string {
  // Through JSON first: dates and class instances from client-node become the plain values the API holds.
  const plain: unknown = JSON.parse(JSON.stringify(template ?? {}));
  const digest = createHash('sha256').update(JSON.stringify(sortedKeys(plain))).digest();
  let hash = '';
  for (let i = 0; i < 10; i += 1) hash += NAME_ALPHABET[digest[i]! % NAME_ALPHABET.length];
  return hash;
}

export function randomSuffix(length = 5): string {
  let suffix = '';
  for (let i = 0; i < length; i += 1) suffix += NAME_ALPHABET[Math.floor(Math.random() * NAME_ALPHABET.length)];
  return suffix;
}
