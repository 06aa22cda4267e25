// Tests name API paths as text, as the API server's request log shows them; kube/'s client takes only a
// KubePath built from segments (kube/paths.ts). This reads such a text back into its segments — for tests only:
// production code builds its paths with KubePath.of and never from text.
import { KubePath } from '../../kube/paths.ts';

/** `/api/v1/namespaces/ns/pods/name/status`, `/apis/apps/v1/deployments`, `/apis/discovery.k8s.io`, `/version`. */
export function kubePathOf(text: string): KubePath {
  if (text === '/version') return KubePath.version;
  const segments = text.split('/').slice(1).map(decodeURIComponent);
  const [root, ...rest] = segments;
  if (root === 'apis' && rest.length === 1) return KubePath.group(rest[0]!);
  const [group, version, ...place] = root === 'api' ? ['', ...rest] : root === 'apis' ? rest : [];
  if (version === undefined || place.length === 0) throw new Error(`not a Kubernetes API path: ${text}`);
  const namespaced = place[0] === 'namespaces' && place.length >= 3;
  const [resource, name, subresource, ...beyond] = namespaced ? place.slice(2) : place;
  if (beyond.length > 0) throw new Error(`not a Kubernetes API path: ${text}`);
  return KubePath.of({ group, version: version, namespace: namespaced ? place[1] : undefined, resource: resource!, name, subresource });
}
