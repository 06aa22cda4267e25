// Which sidecar mode each App renders while the cluster's mode changes: one App moves at a time; Apps without
// pods, or whose pods are replaced anyway, move at once; the turn passes on when the moving App's rollout ends
// or stalls, or the App is deleted.
import { describe, expect, it } from 'vitest';
import type { DeploymentStatusView } from './rollout-state.ts';
import { SidecarMigration, type SidecarModeView } from './sidecar-migration.ts';

/** A Deployment of this mode with `replicas` wanted; `rolledOut`: all of them of the current template and available. */
function live(nativeSidecar: boolean, replicas: number, rolledOut: boolean, conditions: DeploymentStatusView['conditions'] = []): SidecarModeView {
  const ready = rolledOut ? replicas : 0;
  return {
    nativeSidecar,
    metadata: { generation: 2 },
    spec: { replicas },
    status: { observedGeneration: rolledOut ? 2 : 1, replicas, updatedReplicas: ready, readyReplicas: ready, availableReplicas: ready, conditions },
  };
}

function migration(native: boolean) {
  const woken: string[] = [];
  const sidecars = new SidecarMigration({ native: () => native, reconcileSoon: (namespace, name) => woken.push(`${namespace}/${name}`) });
  return { sidecars, woken };
}

describe('SidecarMigration', () => {
  it('renders the wanted mode for an App without a Deployment, or with one already in it', () => {
    const { sidecars } = migration(true);
    expect(sidecars.modeFor('team', 'new', undefined)).toBe(true);
    expect(sidecars.modeFor('team', 'same', live(true, 2, true))).toBe(true);
    expect(sidecars.moving).toBeUndefined();
  });

  it('moves one App at a time; the others keep their mode until its rollout has ended, then the longest waiting goes', () => {
    const { sidecars, woken } = migration(false);
    expect(sidecars.modeFor('team', 'a', live(true, 2, true))).toBe(false);
    expect(sidecars.modeFor('team', 'b', live(true, 2, true))).toBe(true);
    expect(sidecars.modeFor('team', 'c', live(true, 2, true))).toBe(true);
    expect(sidecars.moving).toBe('team/a');
    // Applied, still rolling out: a keeps the turn.
    expect(sidecars.modeFor('team', 'a', live(false, 2, false))).toBe(false);
    expect(sidecars.moving).toBe('team/a');
    expect(woken).toEqual([]);
    // Rolled out: b, which waited longest, is woken and takes the turn at its reconcile.
    expect(sidecars.modeFor('team', 'a', live(false, 2, true))).toBe(false);
    expect(woken).toEqual(['team/b']);
    expect(sidecars.modeFor('team', 'c', live(true, 2, true))).toBe(false);
    expect(sidecars.moving).toBe('team/c');
    expect(sidecars.modeFor('team', 'b', live(true, 2, true))).toBe(true);
  });

  it('moves an App without pods at once, whoever is moving', () => {
    const { sidecars } = migration(false);
    expect(sidecars.modeFor('team', 'a', live(true, 1, true))).toBe(false);
    expect(sidecars.modeFor('team', 'idle', live(true, 0, true))).toBe(false);
    expect(sidecars.moving).toBe('team/a');
  });

  it('moves an App whose pods are replaced anyway at once, without taking the turn', () => {
    const { sidecars } = migration(false);
    expect(sidecars.modeFor('team', 'a', live(true, 1, true))).toBe(false);
    expect(sidecars.modeFor('team', 'edited', live(true, 1, true), { replacedAnyway: true })).toBe(false);
    expect(sidecars.modeFor('team', 'b', live(true, 1, true), { replacedAnyway: false })).toBe(true);
    expect(sidecars.moving).toBe('team/a');
  });

  it('passes the turn on when the moving App’s rollout stalls, or the App is deleted', () => {
    const { sidecars, woken } = migration(false);
    sidecars.modeFor('team', 'a', live(true, 1, true));
    sidecars.modeFor('team', 'b', live(true, 1, true));
    sidecars.modeFor('team', 'c', live(true, 1, true));
    const stalled = [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "a-1" has timed out progressing.' }];
    sidecars.modeFor('team', 'a', live(false, 1, false, stalled));
    expect(sidecars.moving).toBeUndefined();
    expect(woken).toEqual(['team/b']);
    expect(sidecars.modeFor('team', 'b', live(true, 1, true))).toBe(false);
    sidecars.forget('team', 'b');
    expect(woken).toEqual(['team/b', 'team/c']);
    expect(sidecars.modeFor('team', 'c', live(true, 1, true))).toBe(false);
  });

  it('wakes the next waiting App when one that waited no longer needs the turn', () => {
    const { sidecars, woken } = migration(false);
    sidecars.modeFor('team', 'a', live(true, 1, true));
    sidecars.modeFor('team', 'b', live(true, 1, true));
    sidecars.modeFor('team', 'c', live(true, 1, true));
    sidecars.forget('team', 'a');
    expect(woken).toEqual(['team/b']);
    // b scaled to zero meanwhile: it moves at once and c is woken to take the turn.
    expect(sidecars.modeFor('team', 'b', live(true, 0, true))).toBe(false);
    expect(woken).toEqual(['team/b', 'team/c']);
  });
});
