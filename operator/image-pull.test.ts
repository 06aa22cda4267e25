import { describe, expect, it } from 'vitest';
import type { V1PodStatus } from '@kubernetes/client-node';
import { imagePullFailureOf } from './image-pull.ts';

const IMAGE = 'registry.example.com/hello:1';
const REFUSAL = `failed to pull and unpack image "${IMAGE}": pull access denied`;

function waiting(reason: string, message: string, init = false): V1PodStatus {
  const statuses = [{ name: init ? 'sidecar' : 'app', image: IMAGE, imageID: '', ready: false, restartCount: 0, state: { waiting: { reason, message } } }];
  return init ? { initContainerStatuses: statuses } : { containerStatuses: statuses };
}

describe('imagePullFailureOf', () => {
  it('keeps the registry’s refusal of the last pull through the back-off that follows, for the same image only', () => {
    const pulled = imagePullFailureOf(waiting('ErrImagePull', REFUSAL), undefined);
    expect(pulled).toEqual({ container: 'app', image: IMAGE, reason: 'ErrImagePull', message: REFUSAL, pullError: REFUSAL });
    const backingOff = imagePullFailureOf(waiting('ImagePullBackOff', `Back-off pulling image "${IMAGE}"`), pulled);
    expect(backingOff).toMatchObject({ reason: 'ImagePullBackOff', pullError: REFUSAL });
    expect(imagePullFailureOf(waiting('ImagePullBackOff', 'Back-off'), { ...pulled!, image: 'other:2' })?.pullError).toBeUndefined();
  });

  it('finds init containers (a native sidecar) first, and nothing in a container waiting for another reason', () => {
    expect(imagePullFailureOf(waiting('InvalidImageName', 'bad name', true), undefined)).toMatchObject({ container: 'sidecar', reason: 'InvalidImageName' });
    expect(imagePullFailureOf(waiting('ContainerCreating', ''), undefined)).toBeUndefined();
    expect(imagePullFailureOf(undefined, undefined)).toBeUndefined();
  });
});
