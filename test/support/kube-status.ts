// The HTTP status a Kubernetes API call ended with: 200 when it succeeded, the API server's status when it
// refused (KubeApiError); any other failure is thrown. For tests that assert who may do what.
import { KubeApiError } from '../../kube/errors.ts';

export function kubeStatusOf(request: Promise<unknown>): Promise<number> {
  return request.then(
    () => 200,
    (error: unknown) => {
      if (error instanceof KubeApiError) return error.status;
      throw error;
    },
  );
}
