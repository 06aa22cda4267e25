// The Pod Security Standards check (pod-security.ts) and the fake API server's PodSecurity admission.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import { KubeApiError } from '../../kube/errors.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from './index.ts';
import { ENFORCE_LABEL, podSecurityViolations } from './pod-security.ts';
import { kubePathOf } from '../support/kube-path.ts';

/** A pod that passes `restricted`: every setting the profile asks for, at pod or container level. */
function restrictedPod(): V1Pod {
  const container = (name: string): V1Container => ({
    name,
    image: 'web:1',
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsUser: 1000 },
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web' },
    spec: {
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      initContainers: [{ ...container('init'), restartPolicy: 'Always' }],
      containers: [container('main')],
      volumes: [{ name: 'scratch', emptyDir: {} }, { name: 'config', configMap: { name: 'c' } }],
    },
  };
}

/** One way to break the restricted profile, and the check that must then report it. */
const BREAKS: [string, (pod: V1Pod) => void, RegExp][] = [
  ['privilege escalation allowed', (pod) => delete pod.spec!.containers[0]!.securityContext!.allowPrivilegeEscalation, /^allowPrivilegeEscalation != false \(container "main"/],
  ['capabilities kept', (pod) => (pod.spec!.initContainers![0]!.securityContext!.capabilities = { drop: ['NET_RAW'] }), /^unrestricted capabilities \(container "init" must set securityContext.capabilities.drop=\["ALL"\]\)/],
  ['a capability added', (pod) => (pod.spec!.containers[0]!.securityContext!.capabilities!.add = ['SYS_ADMIN']), /^non-default capabilities/],
  ['runAsNonRoot missing', (pod) => delete pod.spec!.securityContext!.runAsNonRoot, /^runAsNonRoot != true \(pod or containers "init", "main"/],
  ['a container runs as root', (pod) => (pod.spec!.containers[0]!.securityContext!.runAsUser = 0), /^runAsUser=0 \(container "main"/],
  ['no seccomp profile', (pod) => delete pod.spec!.securityContext!.seccompProfile, /^seccompProfile \(pod or containers "init", "main" must set/],
  ['seccomp unconfined in a container', (pod) => (pod.spec!.containers[0]!.securityContext!.seccompProfile = { type: 'Unconfined' }), /^seccompProfile \(pod and containers must not/],
  ['a hostPath volume', (pod) => pod.spec!.volumes!.push({ name: 'host', hostPath: { path: '/' } }), /^hostPath volumes \(.*"host"/],
  ['a volume type outside the restricted set', (pod) => pod.spec!.volumes!.push({ name: 'nfs', nfs: { server: 'n', path: '/' } }), /^restricted volume types \(.*volume "nfs"/],
  ['privileged', (pod) => (pod.spec!.containers[0]!.securityContext!.privileged = true), /^privileged \(container "main"/],
  ['the host network', (pod) => (pod.spec!.hostNetwork = true), /^host namespaces \(hostNetwork=true\)/],
  ['a host port', (pod) => (pod.spec!.containers[0]!.ports = [{ containerPort: 80, hostPort: 80 }]), /^hostPort \(container "main"/],
];

describe('podSecurityViolations', () => {
  it('passes a pod with every restricted setting, native sidecar and allowed volumes included', () => {
    expect(podSecurityViolations(restrictedPod(), 'restricted')).toEqual([]);
  });

  it.each(BREAKS)('restricted refuses %s, naming the check and the container', (_case, breakIt, expected) => {
    const pod = restrictedPod();
    breakIt(pod);
    const violations = podSecurityViolations(pod, 'restricted');
    expect(violations.some((violation) => expected.test(violation)), violations.join('; ')).toBe(true);
  });

  it('container settings stand in for pod-level ones: runAsNonRoot and seccomp in every container pass', () => {
    const pod = restrictedPod();
    delete pod.spec!.securityContext;
    for (const container of [...pod.spec!.initContainers!, ...pod.spec!.containers]) {
      Object.assign(container.securityContext!, { runAsNonRoot: true, seccompProfile: { type: 'Localhost', localhostProfile: 'p.json' } });
    }
    expect(podSecurityViolations(pod, 'restricted')).toEqual([]);
    pod.spec!.containers[0]!.securityContext!.runAsNonRoot = false;
    expect(podSecurityViolations(pod, 'restricted')).toEqual([expect.stringMatching(/^runAsNonRoot != true \(pod or container "main"/)]);
  });

  it('baseline asks only for the baseline controls; privileged for nothing', () => {
    const bare: V1Pod = { metadata: { name: 'bare' }, spec: { containers: [{ name: 'main', image: 'web:1' }] } };
    expect(podSecurityViolations(bare, 'baseline')).toEqual([]);
    expect(podSecurityViolations(bare, 'restricted').length).toBeGreaterThan(0);
    const privileged: V1Pod = { metadata: { name: 'p' }, spec: { hostPID: true, containers: [{ name: 'main', securityContext: { privileged: true } }] } };
    expect(podSecurityViolations(privileged, 'baseline')).toEqual(['host namespaces (hostPID=true)', 'privileged (container "main" must not set securityContext.privileged=true)']);
    expect(podSecurityViolations(privileged, 'privileged')).toEqual([]);
  });

  it('any set of breaks is reported, each by its own check, and restricted reports whatever baseline does', () => {
    fc.assert(
      fc.property(fc.subarray(BREAKS, { minLength: 1 }), (breaks) => {
        const pod = restrictedPod();
        for (const [, breakIt] of breaks) breakIt(pod);
        const restricted = podSecurityViolations(pod, 'restricted');
        for (const [, , expected] of breaks) expect(restricted.some((violation) => expected.test(violation)), restricted.join('; ')).toBe(true);
        for (const violation of podSecurityViolations(pod, 'baseline')) expect(restricted).toContain(violation);
      }),
    );
  });
});

describe('the fake API server’s PodSecurity admission', () => {
  let server: KubeApiServer;
  let api: KubeApi;

  afterEach(async () => {
    await api.close();
    await server.close();
  });

  async function namespace(name: string, level?: string): Promise<void> {
    await api.create(kubePathOf('/api/v1/namespaces'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name, ...(level === undefined ? {} : { labels: { [ENFORCE_LABEL]: level } }) } });
  }

  it('refuses a pod that breaks the namespace’s enforced level with 403 and the violations, and admits the rest', async () => {
    server = await startKubeApiServer();
    api = new KubeApi(await server.credentials());
    await namespace('locked', 'restricted');
    await namespace('open');
    const loose = { ...restrictedPod(), metadata: { name: 'loose' } };
    delete loose.spec!.containers[0]!.securityContext;

    const refused = await api.create(kubePathOf('/api/v1/namespaces/locked/pods'), loose as KubeObject).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(KubeApiError);
    expect(refused).toMatchObject({ status: 403, reason: 'Forbidden' });
    expect((refused as Error).message).toContain('pods "loose" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities');
    expect(await api.find(kubePathOf('/api/v1/namespaces/locked/pods/loose'))).toBeUndefined();

    await api.create(kubePathOf('/api/v1/namespaces/locked/pods'), restrictedPod() as KubeObject);
    await api.create(kubePathOf('/api/v1/namespaces/open/pods'), loose as KubeObject);
    expect(await api.find(kubePathOf('/api/v1/namespaces/open/pods/loose'))).toBeDefined();
  });
});
