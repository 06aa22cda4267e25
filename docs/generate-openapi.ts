// `npm run openapi`: writes the committed OpenAPI documents (docs/openapi-*.json) from the route schemas.
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { buildOpenApiDocuments, DOCUMENT_FILES, serialise } from './openapi-documents.ts';

const root = resolve(import.meta.dirname, '..');
const documents = await buildOpenApiDocuments();
for (const [name, file] of Object.entries(DOCUMENT_FILES)) {
  await writeFile(resolve(root, file), serialise(documents[name as keyof typeof documents]));
  process.stdout.write(`wrote ${file}\n`);
}
