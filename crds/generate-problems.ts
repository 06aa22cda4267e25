// Writes the Python runtime's copy of the problem catalogue: `npm run problems`.
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { PYTHON_PROBLEM_TYPES_FILE, renderPythonProblemTypes } from './problems-python.ts';

await writeFile(resolve(import.meta.dirname, '..', PYTHON_PROBLEM_TYPES_FILE), renderPythonProblemTypes());
console.log(`wrote ${PYTHON_PROBLEM_TYPES_FILE}`);
