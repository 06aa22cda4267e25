// App namespaces: the operator writes only where a cluster admin enrolled the namespace (a RoleBinding of its
// tenant ClusterRole there: the chart's tenantNamespaces, or `runlet namespace enable NS`). Elsewhere the API
// server refuses its writes with 403; this tells that refusal from any other failure, words what the App's
// status says about it (with the command that fixes it), and names the label of the enrolment RoleBindings, whose
// appearance brings the namespace's waiting Apps forward (app-watches.ts).
import { KubeApiError, isNamespaceTerminating } from '../kube/errors.ts';

/** On every enrolment RoleBinding (the chart's and the command's): watched, so that an enrolment takes effect at once. */
export const ENROLMENT_LABEL = 'runlet.dev/tenant-enrolment';
export const ENROLMENT_SELECTOR = `${ENROLMENT_LABEL}=true`;

/** The App condition reason, and the Warning Event's, while the App's namespace is not enrolled. */
export const NOT_ENROLLED_REASON = 'NamespaceNotEnrolled';

/**
 * Whether the API server refused a write because the caller's RBAC does not allow it (403 with the authorizer's
 * wording `… cannot <verb> resource …`): not a namespace being deleted, not an admission plugin's or a quota's
 * refusal, which are 403 too but say something else.
 */
export function isRbacForbidden(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 403 && !isNamespaceTerminating(error) && / cannot [a-z]+ resource /.test(error.message);
}

/** A reconcile stopped because its namespace is not an App namespace; retried with backoff, and at once on enrolment. */
export class NamespaceNotEnrolledError extends Error {
  readonly namespace: string;

  constructor(namespace: string, cause: unknown) {
    // The refusal itself too: should a namespace that was enrolled lack a right (an older chart's roles), it says which.
    super(`${notEnrolledMessage(namespace)} (refused: ${(cause as Error).message})`, { cause });
    this.name = 'NamespaceNotEnrolledError';
    this.namespace = namespace;
  }
}

/** What the App's status says: why nothing was applied, and what a cluster admin runs to change that. */
export function notEnrolledMessage(namespace: string): string {
  return (
    `the namespace "${namespace}" is not an App namespace: Runlet may not write there, so nothing was applied. ` +
    `A cluster admin enrols it with \`runlet namespace enable ${namespace}\` (or lists it in the chart value tenantNamespaces); ` +
    'the App is then reconciled at once'
  );
}
