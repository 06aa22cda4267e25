// A digest of the code ConfigMap's content. It goes into the pod template, so editing the code changes the
// template and the Deployment rolls out new pods (a ConfigMap volume alone updates files in place, which a
// running Python process never re-imports).
import { createHash } from 'node:crypto';

export interface CodeConfigMap {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

export function codeHash(configMap: CodeConfigMap): string {
  const sorted = (entries: Record<string, string> | undefined) => Object.entries(entries ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const canonical = JSON.stringify({ data: sorted(configMap.data), binaryData: sorted(configMap.binaryData) });
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}
