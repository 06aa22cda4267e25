// The Pod a Deployment's template becomes: named `<deployment>-<template hash>-<random>`, labelled with the
// template's labels plus `pod-template-hash`, owned by the Deployment (so garbage collection removes it
// with the Deployment), bound to the test kubelet's node, and carrying the kubelet's finalizer.
//
// The finalizer stands in for graceful deletion, which the fake API server does not implement: a deleted
// pod stays (with a deletionTimestamp) until the kubelet has stopped its processes and removes the
// finalizer, as a real pod stays Terminating until its containers are gone.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { randomSuffix } from './template-hash.ts';

export const KUBELET_FINALIZER = 'runlet.dev/test-kubelet';
export const TEMPLATE_HASH_LABEL = 'pod-template-hash';

export function podForDeployment(deployment: V1Deployment, hash: string, nodeName: string): V1Pod {
  const meta = deployment.metadata!;
  const template = deployment.spec!.template;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${meta.name}-${hash}-${randomSuffix()}`,
      namespace: meta.namespace,
      labels: { ...template.metadata?.labels, [TEMPLATE_HASH_LABEL]: hash },
      annotations: { ...template.metadata?.annotations },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'Deployment', name: meta.name!, uid: meta.uid!, controller: true, blockOwnerDeletion: true },
      ],
      finalizers: [KUBELET_FINALIZER],
    },
    spec: { ...template.spec!, nodeName },
  };
}
