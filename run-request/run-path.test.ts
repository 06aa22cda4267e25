// The run interface's path names its project and app under the same rules as the management API
// (crds/route-names.ts): a name no namespace or App could have is refused 400 `invalid-parameter`, naming it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProblemError } from '../crds/problem.ts';
import { APP_NAME, PROJECT_ID, followsRule } from '../crds/route-names.ts';
import { parseRunPath, parseRunPathOrNull } from './run-path.ts';

function refusal(path: string): { status: number; parameter: unknown } | 'parsed' {
  try {
    parseRunPath(path);
    return 'parsed';
  } catch (error) {
    if (!(error instanceof ProblemError)) throw error;
    return { status: error.status, parameter: error.extensions?.parameter };
  }
}

describe('parseRunPath', () => {
  it('splits and decodes a valid path', () => {
    expect(parseRunPath('/v4/team-a/hello/greet%20me')).toEqual({ projectId: 'team-a', appName: 'hello', rest: 'greet me', rawRest: 'greet%20me' });
    expect(parseRunPath('/v4/team-a')).toBeNull();
    expect(parseRunPath('/v2/team-a/hello')).toBeNull();
  });

  it.each([
    ['/v4/%2e%2e/hello', 'project_id'],
    ['/v4/../hello', 'project_id'],
    ['/v4/team-a%2F..%2Fteam-b/hello', 'project_id'],
    ['/v4/Team-A/hello', 'project_id'],
    [`/v4/${'a'.repeat(64)}/hello`, 'project_id'],
    ['/v4/caf%C3%A9/hello', 'project_id'],
    ['/v4/team-a/..', 'app_name'],
    ['/v4/team-a/%2E', 'app_name'],
    ['/v4/team-a/x%2F..%2F..%2Fteam-b', 'app_name'],
    ['/v4/team-a/hello%00', 'app_name'],
    ['/v4/team-a/%E2%80%AEhello', 'app_name'],
    [`/v4/team-a/${'a'.repeat(64)}/f`, 'app_name'],
  ])('refuses %s: 400 naming %s', (path, parameter) => {
    expect(refusal(path)).toEqual({ status: 400, parameter });
    expect(parseRunPathOrNull(path)).toBeNull();
  });

  it('for any project and app: parsed when both follow their rules, else refused naming the first that does not', () => {
    const name = fc.oneof(fc.stringMatching(/^[a-z0-9.-]{1,70}$/), fc.string({ unit: 'binary', minLength: 1 }).filter((value) => !value.includes('/')));
    fc.assert(
      fc.property(name, name, (project, app) => {
        let path: string;
        try {
          path = `/v4/${encodeURIComponent(project)}/${encodeURIComponent(app)}/f`;
        } catch {
          return; // a lone surrogate: no URL carries it
        }
        const expected = !followsRule(PROJECT_ID, project) ? { status: 400, parameter: 'project_id' } : !followsRule(APP_NAME, app) ? { status: 400, parameter: 'app_name' } : 'parsed';
        expect(refusal(path)).toEqual(expected);
      }),
      { numRuns: 2000 },
    );
  });
});
