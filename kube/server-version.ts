// The API server's version, from its `/version` endpoint, as the operator needs it to choose what it may render.
// Managed clusters decorate the numbers: GKE and EKS answer minor "29+" and gitVersion "v1.29.3-eks-8cb36c9";
// some distributions leave major and minor empty. The numbers are read from their leading digits, and from
// gitVersion when they are missing.
import type { KubeApi } from './client.ts';
import { KubePath } from './paths.ts';

export interface ServerVersion {
  major: number;
  minor: number;
  /** As the server reported it, for logs. */
  gitVersion: string;
}

interface VersionInfo {
  major?: unknown;
  minor?: unknown;
  gitVersion?: unknown;
}

/** The server's version; a KubeApiError when `/version` cannot be read, an Error when it cannot be understood. */
export async function readServerVersion(api: KubeApi): Promise<ServerVersion> {
  return parseServerVersion(await api.request('GET', KubePath.version));
}

export function parseServerVersion(info: unknown): ServerVersion {
  const fields: VersionInfo = typeof info === 'object' && info !== null ? info : {};
  const gitVersion = typeof fields.gitVersion === 'string' ? fields.gitVersion : '';
  const major = leadingNumber(fields.major);
  const minor = leadingNumber(fields.minor);
  if (major !== undefined && minor !== undefined) return { major, minor, gitVersion };
  const fromGit = /^v?(\d+)\.(\d+)/.exec(gitVersion);
  if (fromGit === null) throw new Error(`cannot tell the Kubernetes version from the API server's /version: ${JSON.stringify(info)}`);
  return { major: Number(fromGit[1]), minor: Number(fromGit[2]), gitVersion };
}

/** Whether the server is at least `major.minor`. */
export function isAtLeast(version: Pick<ServerVersion, 'major' | 'minor'>, major: number, minor: number): boolean {
  return version.major > major || (version.major === major && version.minor >= minor);
}

function leadingNumber(value: unknown): number | undefined {
  const digits = typeof value === 'string' ? /^\d+/.exec(value) : null;
  return digits === null ? undefined : Number(digits[0]);
}
