// The other side of the warm-path A/B (scenarios/warm-ab.ts): another commit of this repository, checked out
// into a temporary git worktree under bench/.work/ and built there as this checkout is (bench/build.ts:
// `npm run build` → dist/), so its compiled CLI can run beside this checkout's. The worktree borrows this
// checkout's node_modules through a symlink (nothing is installed) and is removed when the comparison ends,
// whichever way it ends.
import { execFileSync } from 'node:child_process';
import { realpathSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildProject, compiledCli } from './build.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** A git ref as given, and the commit it names now. */
export interface BaselineRef {
  ref: string;
  commit: string;
  /** `<short hash> <subject>`, for the report. */
  summary: string;
}

export interface BaselineCheckout {
  /** Its compiled CLI (dist/cli/runlet.js in the worktree). */
  cli: string;
  /** Removes the worktree; safe to call more than once, and never throws (it runs in `finally` and at exit). */
  remove(): void;
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`git ${args.join(' ')} failed in ${REPO}: ${stderr || (err as Error).message}`);
  }
}

/** Resolves `ref` before anything is measured, so a typo or a shallow clone fails at once, not after the rounds. */
export function resolveBaselineRef(ref: string): BaselineRef {
  let commit: string;
  try {
    commit = git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  } catch {
    throw new Error(`the A/B baseline "${ref}" names no commit of this clone (a shallow clone lacks older commits); pass another with --ab-base`);
  }
  return { ref, commit, summary: git(['log', '-1', '--format=%h %s', commit]) };
}

/** `git worktree add --detach` of the commit at `dir`, node_modules linked, `npm run build` run there. */
export function checkOutBaseline(baseline: BaselineRef, dir: string): BaselineCheckout {
  // --force: a worktree registered at `dir` by a run that was killed (its folder since wiped with bench/.work/)
  // would otherwise refuse the add.
  git(['worktree', 'add', '--force', '--detach', dir, baseline.commit]);
  let removed = false;
  const remove = (): void => {
    if (removed) return;
    removed = true;
    process.off('exit', remove);
    try {
      // --force: dist/ and the node_modules link are untracked. The link is removed, not followed.
      git(['worktree', 'remove', '--force', dir]);
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      process.stderr.write(`bench: removed ${dir} by hand, its worktree entry is left to \`git worktree prune\`: ${(err as Error).message}\n`);
    }
  };
  // Last resort when the run ends without reaching its `finally` (an interrupt exits from its handler).
  process.on('exit', remove);
  try {
    symlinkSync(realpathSync(join(REPO, 'node_modules')), join(dir, 'node_modules'));
    buildProject(dir);
  } catch (err) {
    remove();
    throw new Error(`could not check out and build the A/B baseline ${baseline.ref} (${baseline.summary}) in ${dir}: ${(err as Error).message}`);
  }
  return { cli: compiledCli(dir), remove };
}
