// The test harness's kubelet: runs the pods of Deployments in the fake API server (test/kube) as local
// processes. See README.md for what it does, how it maps images, paths and ports, and what it leaves out.

export { Kubelet, startKubelet, type KubeletOptions, type PodFilter } from './kubelet.ts';
export type { PodRunner } from './pod-runner.ts';
export type { ContainerRunner } from './container-runner.ts';
export type { ImageTable, LocalImage } from './images.ts';
export type { KubeletTiming } from './timing.ts';
export { KUBELET_FINALIZER, TEMPLATE_HASH_LABEL } from './pod-factory.ts';
export { sidecarPorts, sidecarUrls, type SidecarPorts, type SidecarUrls } from './sidecar-urls.ts';
