// Valid objects for the crds tests, each a fresh copy so a test may change it.
import type { App } from '../../crds/app-schema.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import type { RunLog } from '../../crds/runlog-schema.ts';

export function pythonApp(): App {
  return {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'App',
    metadata: { name: 'hello', namespace: 'team-a' },
    spec: {
      runtime: { python: { module: 'main', code: { configMap: { name: 'hello-code' } } } },
      scaling: {
        minReplicas: 1,
        maxReplicas: 10,
        replicaConcurrency: 4,
        responseGracePeriod: 900,
        cooldown: 60,
        scalingMetric: 'concurrency_utilization',
        coldStartTimeout: 60,
      },
      auth: { enabled: true },
      runs: { keepFinished: 200, retention: 86400, keepResults: false, resultKeepBytes: 1048576, resultTtl: 3600 },
    },
  };
}

export function customApp(): App {
  return {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'App',
    metadata: { name: 'web', namespace: 'team-a' },
    spec: {
      runtime: {
        custom: {
          image: 'ghcr.io/acme/web:1',
          entrypoint: ['node', 'server.js'],
          port: 8080,
          healthcheckEndpoint: '/health',
          readycheckEndpoint: '/ready',
        },
      },
      resources: { cpu: '500m', memory: '512Mi', gpu: 0 },
      scaling: {
        minReplicas: 0,
        maxReplicas: 3,
        replicaConcurrency: 8,
        responseGracePeriod: 43200,
        cooldown: 300,
        scalingMetric: 'requests_per_second',
        scalingTarget: 25,
        coldStartTimeout: 120,
      },
      env: [
        { name: 'GREETING', value: 'hi' },
        { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'token' } } },
      ],
      auth: { enabled: false },
      runs: { keepFinished: 10000, retention: 60, retentionDays: 90, keepResults: true, resultKeepBytes: 1024, resultTtl: 60 },
      pip: ['numpy==2.1.0'],
    },
    status: {
      observedGeneration: 3,
      conditions: [
        { type: 'Ready', status: 'True', reason: 'ReplicasReady', message: '', lastTransitionTime: '2025-01-31T12:00:00Z', observedGeneration: 3 },
      ],
      replicas: 2,
      readyReplicas: 2,
      desiredReplicas: 2,
      lastScaling: { time: '2025-01-31T11:59:00Z', from: 1, to: 2, reason: 'PanicBurst', message: 'burst (load 5.2 over 6 s, target 2.8 per replica, 1 ready): 2' },
      url: 'https://runlet.example/v4/team-a/web',
      runs: { total: 10, success: 8, failure: 1, inFlight: 1, lastRunTime: '2025-01-31T12:00:00.123Z' },
      lastRestart: {
        time: '2025-01-31T11:58:00Z',
        pod: 'web-7d9c-x2x4z',
        container: 'app',
        restartCount: 1,
        exitCode: 137,
        reason: 'Error',
        message: "container app of pod web-7d9c-x2x4z ended with exit code 137 (killed by SIGKILL) and was restarted by the kubelet (restart 1 of this pod's app)",
      },
    },
  };
}

export function runRecord(): RunRecord {
  return {
    id: '0194b6e2-4d1c-7c3e-9a51-0f2f3c4d5e6f',
    projectId: 'team-a',
    appName: 'hello',
    functionName: 'run',
    method: 'POST',
    mode: 'async',
    async: true,
    status: 'failure',
    statusCode: 500,
    error: { type: 'ValueError', message: 'bad input' },
    reason: null,
    createdAt: '2025-01-31T12:00:00.000Z',
    startedAt: '2025-01-31T12:00:00.010Z',
    completedAt: '2025-01-31T12:00:01.010Z',
    queueTimeMs: 10,
    runtimeMs: 1000,
    responseTimeMs: 1010.5,
    coldStartMs: 2100,
    resultKept: true,
    resultExpiresAt: '2025-01-31T13:00:00.000Z',
    replica: 'hello-7d9c-abcde',
    webhook: { endpoint: 'https://hooks.example/x', state: 'delivered', attempts: 2, lastStatusCode: 200, lastError: null },
  };
}

export function runLog(): RunLog {
  return {
    apiVersion: 'runlet.dev/v1alpha1',
    kind: 'RunLog',
    metadata: { name: 'hello-7d9c-abcde', namespace: 'team-a', labels: { 'runlet.dev/app': 'hello' } },
    spec: { appName: 'hello' },
    status: {
      runs: [runRecord()],
      counts: { total: 1, success: 0, failure: 1, inFlight: 0 },
      load: { inFlight: 0, queued: 0, averageConcurrency: 0.4, peakConcurrency: 1, requestsPerSecond: 1.5, concurrency: 4, sampledAt: '2030-01-01T00:00:01.000Z' },
    },
  };
}
