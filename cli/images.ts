// The images `make images` builds, as the CLI names them by default (the chart's values name the same ones).
import packageJson from '../package.json' with { type: 'json' };

export const RUNLET_VERSION: string = packageJson.version;
export const DEFAULT_PYTHON_RUNTIME_IMAGE = `runlet/python-runtime:${RUNLET_VERSION}`;
