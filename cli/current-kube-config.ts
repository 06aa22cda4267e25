// The kubeconfig a command run by a person uses: kubectl's (KUBECONFIG, else ~/.kube/config) and its current
// context, or a CliError that says what to set.
import { KubeConfig } from '@kubernetes/client-node';
import { CliError } from './cli-error.ts';

export function currentKubeConfig(): KubeConfig {
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromDefault();
  } catch (err) {
    throw new CliError(`cannot read the kubeconfig (${(err as Error).message}): set KUBECONFIG to a valid file`);
  }
  if (!kubeConfig.getCurrentContext() || kubeConfig.getCurrentCluster() === null) {
    throw new CliError('no Kubernetes context: set KUBECONFIG, or choose one with kubectl config use-context NAME');
  }
  return kubeConfig;
}
