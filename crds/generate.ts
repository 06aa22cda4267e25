// Writes the CRD YAML files next to this script: `npm run crds`. crds/crd-yaml.test.ts fails while a
// committed file differs from what this would write.
import { writeFile } from 'node:fs/promises';
import { crdFiles } from './crd-yaml.ts';

for (const file of crdFiles()) {
  const target = new URL(file.fileName, import.meta.url);
  await writeFile(target, file.yaml);
  console.log(`wrote crds/${file.fileName}`);
}
