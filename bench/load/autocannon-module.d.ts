// The part of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  interface AutocannonOptions {
    url: string;
    connections: number;
    /** Seconds; ignored when `amount` is given. */
    duration?: number;
    /** Stop after this many requests. */
    amount?: number;
    method?: string;
    body?: string;
    headers?: Record<string, string>;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
  }

  interface AutocannonResult {
    /** Seconds, to 10 ms. */
    duration: number;
    start: Date;
    finish: Date;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    requests: { total: number; sent: number };
  }

  function autocannon(options: AutocannonOptions): Promise<AutocannonResult>;
  export default autocannon;
}
