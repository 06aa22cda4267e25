// One probe or lifecycle-hook attempt against the pod's local ports: an HTTP GET that counts as success
// on 200–399 (redirects are not followed, as the kubelet does not follow them to other hosts), or a TCP
// connect. exec and grpc actions are not supported and say so when the pod is set up.
import { request } from 'node:http';
import { connect } from 'node:net';
import type { V1Container, V1HTTPGetAction, V1TCPSocketAction } from '@kubernetes/client-node';
import { LOCAL_IP } from './env.ts';
import { PodSetupError } from './setup-error.ts';

/** How a kubelet asks an httpGet lifecycle hook (kubelet.ts: `hookRequests`). */
export type HookRequests = 'consistent' | 'before-1.26';

export type ProbeAction =
  | { kind: 'http'; url: string; headers: Record<string, string> }
  | { kind: 'tcp'; port: number };

interface Handler {
  httpGet?: V1HTTPGetAction;
  tcpSocket?: V1TCPSocketAction;
  exec?: unknown;
  grpc?: unknown;
}

/** A pod port from a number or the name of one of the container's ports. */
export function containerPortNumber(port: number | string, container: V1Container): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const named = container.ports?.find((p) => p.name === port);
  if (named === undefined) {
    throw new PodSetupError('CreateContainerConfigError', `container "${container.name}" has no port named "${port}"`);
  }
  return named.containerPort;
}

function localPort(port: number | string, container: V1Container, ports: ReadonlyMap<number, number>): number {
  const podPort = containerPortNumber(port, container);
  const local = ports.get(podPort);
  if (local === undefined) throw new Error(`pod port ${podPort} of container "${container.name}" was given no local port`);
  return local;
}

export function probeAction(handler: Handler, container: V1Container, ports: ReadonlyMap<number, number>, what: string): ProbeAction {
  if (handler.httpGet !== undefined) {
    const { httpGet } = handler;
    if ((httpGet.scheme ?? 'HTTP').toUpperCase() !== 'HTTP') {
      throw new PodSetupError('CreateContainerConfigError', `${what} of container "${container.name}": only HTTP httpGet is supported`);
    }
    const host = httpGet.host === undefined || httpGet.host === '' ? LOCAL_IP : httpGet.host;
    const path = httpGet.path === undefined || httpGet.path === '' ? '/' : httpGet.path;
    const headers = Object.fromEntries((httpGet.httpHeaders ?? []).map((h) => [h.name, h.value]));
    return { kind: 'http', url: `http://${host}:${localPort(httpGet.port, container, ports)}${path.startsWith('/') ? path : `/${path}`}`, headers };
  }
  if (handler.tcpSocket !== undefined) return { kind: 'tcp', port: localPort(handler.tcpSocket.port, container, ports) };
  throw new PodSetupError('CreateContainerConfigError', `${what} of container "${container.name}": only httpGet and tcpSocket are supported by the test kubelet`);
}

/**
 * A lifecycle hook's request as `requests` asks it: kubelets before 1.26 (ConsistentHTTPGetHandlers) sent
 * no headers and built the URL as `http://` + host:port + `/` + path, doubling the path's leading slash.
 */
export function hookAction(action: ProbeAction, requests: HookRequests): ProbeAction {
  if (action.kind !== 'http' || requests === 'consistent') return action;
  const url = new URL(action.url);
  return { kind: 'http', url: `${url.origin}/${url.pathname}${url.search}`, headers: {} };
}

/** The pod ports a handler targets (so they are given local ports). */
export function handlerPorts(handler: Handler | undefined, container: V1Container): number[] {
  const port = handler?.httpGet?.port ?? handler?.tcpSocket?.port;
  if (port === undefined) return [];
  try {
    return [containerPortNumber(port, container)];
  } catch {
    return []; // reported when the probe itself is set up
  }
}

function httpAttempt(url: string, headers: Record<string, string>, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'GET', headers, timeout: timeoutMs, agent: false }, (res) => {
      res.resume();
      const status = res.statusCode ?? 0;
      resolve(status >= 200 && status < 400);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', () => resolve(false));
    req.end();
  });
}

function tcpAttempt(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: LOCAL_IP, port, timeout: timeoutMs });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => socket.destroy(new Error('timeout')));
    socket.once('error', () => resolve(false));
  });
}

export function attempt(action: ProbeAction, timeoutMs: number): Promise<boolean> {
  return action.kind === 'http' ? httpAttempt(action.url, action.headers, timeoutMs) : tcpAttempt(action.port, timeoutMs);
}
