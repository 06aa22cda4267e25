#!/usr/bin/env node
// Installed packages run the compiled CLI; a source checkout runs the TypeScript directly (Node 24 strips types).
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli/runlet.js', import.meta.url);
await import(existsSync(compiled) ? compiled.href : new URL('../cli/runlet.ts', import.meta.url).href);
