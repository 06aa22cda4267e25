// The images `make images` builds (images/images.sh), as the CLI names them by default. The chart's values,
// install.yaml, the Makefile and the docs name the same ones: test/images/image-names.test.ts checks it.
import packageJson from '../package.json' with { type: 'json' };

export const RUNLET_VERSION: string = packageJson.version;
/** The repositories, without a registry: `make images IMAGE_REPO=registry.example.com/runlet` names others. */
export const RUNLET_IMAGE_REPOSITORY = 'runlet/runlet';
export const PYTHON_RUNTIME_IMAGE_REPOSITORY = 'runlet/python-runtime';
export const DEFAULT_RUNLET_IMAGE = `${RUNLET_IMAGE_REPOSITORY}:${RUNLET_VERSION}`;
export const DEFAULT_PYTHON_RUNTIME_IMAGE = `${PYTHON_RUNTIME_IMAGE_REPOSITORY}:${RUNLET_VERSION}`;
