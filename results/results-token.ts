// The audience of the token a pod sends its batches of run records with: the operator renders a projected
// ServiceAccount token for it into each sidecar (operator/render/deployment.ts), and the collector asks the API
// server to review tokens for it alone (operator/results-callers.ts). Valid for the collector, not the API
// server; its own module, so the rendering loads no collector.
export const RESULTS_TOKEN_AUDIENCE = 'runlet-results';
