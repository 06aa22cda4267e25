import { describe, expect, it } from 'vitest';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import { MAX_WEBHOOK_ENDPOINT_LENGTH, endpointForRecord, parseWebhookEndpoint } from './endpoint.ts';

function problemOf(raw: string): ProblemError {
  try {
    parseWebhookEndpoint(raw);
  } catch (error) {
    if (error instanceof ProblemError) return error;
    throw error;
  }
  throw new Error(`expected '${raw}' to be refused`);
}

describe('parseWebhookEndpoint', () => {
  it('accepts absolute http and https URLs', () => {
    expect(parseWebhookEndpoint('https://hooks.example.com/runlet?token=abc').href).toBe('https://hooks.example.com/runlet?token=abc');
    expect(parseWebhookEndpoint('http://10.0.0.5:8080/in').port).toBe('8080');
  });

  it('refuses a relative reference with a 400 problem', () => {
    const problem = problemOf('/hooks/runlet');
    expect(problem.spec).toBe(Problems.invalidWebhookEndpoint);
    expect(problem.status).toBe(400);
    expect(problem.detail).toMatch(/not an absolute URL/);
    expect(problemOf('hooks.example.com/runlet').detail).toMatch(/not an absolute URL/);
  });

  it('refuses other schemes, naming the one given', () => {
    expect(problemOf('ftp://files.example.com/in').detail).toMatch(/scheme 'ftp'; only http and https/);
    expect(problemOf('file:///etc/passwd').detail).toMatch(/scheme 'file'/);
    expect(problemOf('javascript:alert(1)').detail).toMatch(/scheme 'javascript'/);
  });

  it('accepts 2048 characters and refuses 2049', () => {
    const prefix = 'https://hooks.example.com/';
    const atLimit = prefix + 'a'.repeat(MAX_WEBHOOK_ENDPOINT_LENGTH - prefix.length);
    expect(parseWebhookEndpoint(atLimit).href).toBe(atLimit);
    expect(problemOf(`${atLimit}a`).detail).toMatch(/2049 characters long; at most 2048/);
  });
});

describe('endpointForRecord', () => {
  it('drops query, fragment and userinfo, keeps scheme, host, port and path', () => {
    const url = parseWebhookEndpoint('https://user:pa55@hooks.example.com:8443/in/runlet?token=abc#frag');
    expect(endpointForRecord(url)).toBe('https://hooks.example.com:8443/in/runlet');
  });

  it('keeps a bare origin readable', () => {
    expect(endpointForRecord(parseWebhookEndpoint('http://[::1]:9000?x=1'))).toBe('http://[::1]:9000/');
  });
});
