import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isAtLeast, parseServerVersion } from './server-version.ts';

describe('parseServerVersion', () => {
  it.each([
    ['a plain release', { major: '1', minor: '20', gitVersion: 'v1.20.2' }, [1, 20]],
    ['GKE/EKS: minor with a +', { major: '1', minor: '29+', gitVersion: 'v1.29.3-eks-8cb36c9' }, [1, 29]],
    ['empty numbers: read from gitVersion', { major: '', minor: '', gitVersion: 'v1.31.0+k3s1' }, [1, 31]],
    ['no numbers at all: read from gitVersion', { gitVersion: 'v1.28.4-gke.1083000' }, [1, 28]],
    ['a build without version stamping (Debian kube-apiserver 1.20)', { major: '', minor: '', gitVersion: 'v0.0.0-master+faecb196815e2' }, [0, 0]],
  ])('%s', (_case, info, [major, minor]) => {
    expect(parseServerVersion(info)).toMatchObject({ major, minor });
  });

  it('refuses an answer with no version in it, quoting it', () => {
    expect(() => parseServerVersion({ gitVersion: 'unknown' })).toThrow(/cannot tell the Kubernetes version .*"unknown"/);
    expect(() => parseServerVersion('nonsense')).toThrow(/cannot tell/);
  });

  it('reads any vendor decoration after the numbers as the numbers alone', () => {
    const suffix = fc.string({ maxLength: 12 }).filter((text) => !/^\d/.test(text));
    fc.assert(
      fc.property(fc.nat(3), fc.nat(99), suffix, (major, minor, decoration) => {
        const fromNumbers = parseServerVersion({ major: `${major}`, minor: `${minor}${decoration}`, gitVersion: '' });
        const fromGit = parseServerVersion({ gitVersion: `v${major}.${minor}${decoration === '' ? '' : `.0${decoration}`}` });
        expect([fromNumbers.major, fromNumbers.minor]).toEqual([major, minor]);
        expect([fromGit.major, fromGit.minor]).toEqual([major, minor]);
      }),
    );
  });
});

describe('isAtLeast', () => {
  it('compares major first, then minor', () => {
    const version = (major: number, minor: number) => ({ major, minor, gitVersion: '' });
    expect(isAtLeast(version(1, 29), 1, 29)).toBe(true);
    expect(isAtLeast(version(1, 28), 1, 29)).toBe(false);
    expect(isAtLeast(version(1, 30), 1, 29)).toBe(true);
    expect(isAtLeast(version(2, 0), 1, 29)).toBe(true);
    expect(isAtLeast(version(0, 99), 1, 29)).toBe(false);
  });
});
