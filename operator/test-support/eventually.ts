// Bounded polling of API state for the operator's tests: never a fixed sleep. (test/support/wait.ts does the
// same for the repository's tests; operator/ keeps its own because everything in operator/ that is not a
// *.test.ts file is compiled into the image, where test/ does not exist.)

export async function eventually<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: { timeoutMs: number; intervalMs?: number; what: string },
): Promise<T> {
  const deadline = performance.now() + options.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (performance.now() > deadline) throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what}`, { cause: lastError });
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 20));
  }
}
