// Small assertion helpers over node:assert (jsr:@std/assert is not reachable here).
import nodeAssert from "node:assert/strict";

/** Asserts that `cond` is truthy. */
export function assert(cond: unknown, message?: string): asserts cond {
  nodeAssert.ok(cond, message);
}

/** Deep strict equality. */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

/** Deep strict inequality. */
export function assertNotEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, message);
}

type Ctor<E extends Error> = new (...args: never[]) => E;

/** Asserts `fn` throws an instance of `Class` (whose message includes `includes`); returns it. */
export function assertThrows<E extends Error = Error>(
  fn: () => unknown,
  Class?: Ctor<E>,
  includes?: string,
): E {
  try {
    fn();
  } catch (err) {
    check(err, Class, includes);
    return err as E;
  }
  throw new nodeAssert.AssertionError({ message: "expected the function to throw" });
}

/** Asserts the promise from `fn` rejects with `Class` (message including `includes`); returns the error. */
export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  Class?: Ctor<E>,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (err) {
    check(err, Class, includes);
    return err as E;
  }
  throw new nodeAssert.AssertionError({ message: "expected the promise to reject" });
}

function check(err: unknown, Class?: Ctor<Error>, includes?: string): void {
  if (Class && !(err instanceof Class)) {
    throw new nodeAssert.AssertionError({
      message: `expected ${Class.name}, got ${
        err instanceof Error ? `${err.name}: ${err.message}` : err
      }`,
    });
  }
  if (includes && !(err instanceof Error && err.message.includes(includes))) {
    throw new nodeAssert.AssertionError({
      message: `expected message to include "${includes}", got "${(err as Error)?.message}"`,
    });
  }
}
