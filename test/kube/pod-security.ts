// The Pod Security Standards' `baseline` and `restricted` profiles as a check of one pod, written from the
// Kubernetes documentation, https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the
// "Baseline" and "Restricted" tables, policy version latest). Every control applies to all containers:
// containers, initContainers and ephemeralContainers. Each violation reads as the PodSecurity admission
// words it: `<check> (<what must change>)`. The fake API server enforces it on pods created in namespaces
// labelled `pod-security.kubernetes.io/enforce` (lifecycle.ts); render tests check the operator's pods with it.
import type { V1Capabilities, V1Container, V1Pod, V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';

export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';

export const ENFORCE_LABEL = 'pod-security.kubernetes.io/enforce';

/** Baseline, "Capabilities": what a container may add beyond the runtime's defaults. */
const BASELINE_CAPABILITIES = new Set(['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT']);
/** Baseline, "Sysctls": the safe set. */
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);
/** Baseline, "SELinux": the types a pod may ask for. */
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);
/** Restricted, "Volume Types": the only volume sources allowed. */
const RESTRICTED_VOLUME_SOURCES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
const APPARMOR_ANNOTATION = 'container.apparmor.security.beta.kubernetes.io/';

interface NamedContainer {
  container: V1Container;
  context: V1SecurityContext;
}

/** What `pod` violates of `level` (restricted includes baseline); empty when it passes. */
export function podSecurityViolations(pod: V1Pod, level: PodSecurityLevel): string[] {
  if (level === 'privileged') return [];
  const spec = pod.spec ?? { containers: [] };
  const podContext = spec.securityContext ?? {};
  const containers: NamedContainer[] = [...(spec.initContainers ?? []), ...spec.containers, ...((spec.ephemeralContainers ?? []) as V1Container[])].map(
    (container) => ({ container, context: container.securityContext ?? {} }),
  );
  const violations = baselineViolations(pod, podContext, containers);
  if (level === 'restricted') violations.push(...restrictedViolations(pod, podContext, containers));
  return violations;
}

function baselineViolations(pod: V1Pod, podContext: V1PodSecurityContext, containers: NamedContainer[]): string[] {
  const spec = pod.spec!;
  const violations: string[] = [];
  const report = (check: string, offenders: string[], what: string) => {
    if (offenders.length > 0) violations.push(`${check} (${describe(offenders)} ${what})`);
  };
  const hostNamespaces = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter((field) => spec[field] === true);
  if (hostNamespaces.length > 0) violations.push(`host namespaces (${hostNamespaces.map((field) => `${field}=true`).join(', ')})`);
  const hostProcess = podContext.windowsOptions?.hostProcess === true || containers.some(({ context }) => context.windowsOptions?.hostProcess === true);
  if (hostProcess) violations.push('hostProcess (pod and containers must not set securityContext.windowsOptions.hostProcess=true)');
  report('privileged', names(containers, ({ context }) => context.privileged === true), 'must not set securityContext.privileged=true');
  report(
    'non-default capabilities',
    names(containers, ({ context }) => (context.capabilities?.add ?? []).some((capability) => !BASELINE_CAPABILITIES.has(capability))),
    'must not include capabilities beyond the default set in securityContext.capabilities.add',
  );
  const hostPaths = (spec.volumes ?? []).filter((volume) => volume.hostPath !== undefined).map((volume) => `"${volume.name}"`);
  if (hostPaths.length > 0) violations.push(`hostPath volumes (volume${hostPaths.length > 1 ? 's' : ''} ${hostPaths.join(', ')})`);
  report('hostPort', names(containers, ({ container }) => (container.ports ?? []).some((port) => (port.hostPort ?? 0) !== 0)), 'must not set hostPort');
  const appArmor = Object.entries(pod.metadata?.annotations ?? {}).some(
    ([key, value]) => key.startsWith(APPARMOR_ANNOTATION) && value !== 'runtime/default' && !value.startsWith('localhost/'),
  );
  const appArmorProfiles = [podContext.appArmorProfile, ...containers.map(({ context }) => context.appArmorProfile)];
  if (appArmor || appArmorProfiles.some((profile) => profile !== undefined && profile.type !== 'RuntimeDefault' && profile.type !== 'Localhost')) {
    violations.push('forbidden AppArmor profile (only RuntimeDefault or Localhost)');
  }
  const seLinux = [podContext.seLinuxOptions, ...containers.map(({ context }) => context.seLinuxOptions)];
  if (seLinux.some((options) => options !== undefined && (!SELINUX_TYPES.has(options.type ?? '') || (options.user ?? '') !== '' || (options.role ?? '') !== ''))) {
    violations.push('seLinuxOptions (only the container types, and no user or role)');
  }
  report('procMount', names(containers, ({ context }) => context.procMount !== undefined && context.procMount !== 'Default'), 'must not set securityContext.procMount');
  const unconfined = [podContext.seccompProfile, ...containers.map(({ context }) => context.seccompProfile)].some((profile) => profile?.type === 'Unconfined');
  if (unconfined) violations.push('seccompProfile (pod and containers must not set securityContext.seccompProfile.type to "Unconfined")');
  const sysctls = (podContext.sysctls ?? []).filter((sysctl) => !SAFE_SYSCTLS.has(sysctl.name)).map((sysctl) => sysctl.name);
  if (sysctls.length > 0) violations.push(`forbidden sysctls (${sysctls.join(', ')})`);
  return violations;
}

function restrictedViolations(pod: V1Pod, podContext: V1PodSecurityContext, containers: NamedContainer[]): string[] {
  const violations: string[] = [];
  const report = (check: string, offenders: string[], what: string) => {
    if (offenders.length > 0) violations.push(`${check} (${describe(offenders)} ${what})`);
  };
  const volumes = (pod.spec!.volumes ?? []).filter((volume) => !Object.keys(volume).every((field) => field === 'name' || RESTRICTED_VOLUME_SOURCES.has(field)));
  if (volumes.length > 0) violations.push(`restricted volume types (${volumes.map((volume) => `volume "${volume.name}"`).join(', ')} must use only ${[...RESTRICTED_VOLUME_SOURCES].join(', ')})`);
  report('allowPrivilegeEscalation != false', names(containers, ({ context }) => context.allowPrivilegeEscalation !== false), 'must set securityContext.allowPrivilegeEscalation=false');
  report('unrestricted capabilities', names(containers, ({ context }) => !dropsAll(context.capabilities)), 'must set securityContext.capabilities.drop=["ALL"]');
  report(
    'unrestricted capabilities',
    names(containers, ({ context }) => (context.capabilities?.add ?? []).some((capability) => capability !== 'NET_BIND_SERVICE')),
    'must not add capabilities other than NET_BIND_SERVICE',
  );
  // Running as non-root: true at pod level with no container setting false, or true in every container.
  const nonRoot = containers.every(({ context }) => context.runAsNonRoot === true || (context.runAsNonRoot === undefined && podContext.runAsNonRoot === true));
  if (!nonRoot) {
    const offenders = names(containers, ({ context }) => context.runAsNonRoot !== true);
    violations.push(`runAsNonRoot != true (pod or ${describe(offenders)} must set securityContext.runAsNonRoot=true)`);
  }
  if (podContext.runAsUser === 0) violations.push('runAsUser=0 (pod must not set runAsUser=0)');
  report('runAsUser=0', names(containers, ({ context }) => context.runAsUser === 0), 'must not set runAsUser=0');
  const allowedSeccomp = (type: string | undefined) => type === 'RuntimeDefault' || type === 'Localhost';
  const seccompMissing = names(containers, ({ context }) =>
    context.seccompProfile === undefined ? !allowedSeccomp(podContext.seccompProfile?.type) : !allowedSeccomp(context.seccompProfile.type),
  );
  if (seccompMissing.length > 0) violations.push(`seccompProfile (pod or ${describe(seccompMissing)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`);
  return violations;
}

function dropsAll(capabilities: V1Capabilities | undefined): boolean {
  return (capabilities?.drop ?? []).includes('ALL');
}

function names(containers: NamedContainer[], offends: (container: NamedContainer) => boolean): string[] {
  return containers.filter(offends).map(({ container }) => container.name);
}

function describe(containers: string[]): string {
  return `container${containers.length > 1 ? 's' : ''} ${containers.map((name) => `"${name}"`).join(', ')}`;
}

/** The level a namespace's labels enforce; an unknown value enforces restricted, as the admission defaults safe. */
export function enforcedLevel(namespaceLabels: Record<string, string> | undefined): PodSecurityLevel {
  const value = namespaceLabels?.[ENFORCE_LABEL];
  if (value === undefined || value === 'privileged') return 'privileged';
  return value === 'baseline' ? 'baseline' : 'restricted';
}
