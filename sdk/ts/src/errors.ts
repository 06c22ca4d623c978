/**
 * The errors of handlers: each one becomes an HTTP status in the agent's error envelope.
 *
 * Throw them from any handler (`throw new ValidationError("Amount must be positive")`). Anything
 * else thrown is a bug: the SDK answers it as an `internal` error (a 500 the host logs with the
 * plugin's name) carrying its name, message and where it was thrown.
 */

/** The cases of the WIT `types.error` variant. */
export type ErrorKind = "validation" | "forbidden" | "not-found" | "unprocessable" | "internal";

/** A handler's expected failure; the host makes it the request's error response. */
export class CanopyError extends Error {
  /** The WIT `error` case this error crosses as. */
  readonly kind: ErrorKind;

  constructor(message: string, kind: ErrorKind = "internal") {
    super(message);
    this.kind = kind;
    this.name = new.target.name;
  }

  /** The WIT `types.error` value. */
  toWit(): { tag: ErrorKind; val: string } {
    return { tag: this.kind, val: this.message };
  }
}

/** 400 `ValidationError` (the Node agent's `throwValidationError`; bad input). */
export class ValidationError extends CanopyError {
  constructor(message: string) {
    super(message, "validation");
  }
}

/** 403 `ForbiddenError` (`throwForbiddenError`). */
export class ForbiddenError extends CanopyError {
  constructor(message: string) {
    super(message, "forbidden");
  }
}

/** 404 `NotFoundError`. */
export class NotFoundError extends CanopyError {
  constructor(message: string) {
    super(message, "not-found");
  }
}

/** 422 `UnprocessableError` (`throwError`). */
export class UnprocessableError extends CanopyError {
  constructor(message: string) {
    super(message, "unprocessable");
  }
}

/** 500: a bug or an unexpected state, logged by the host with the plugin's name. */
export class InternalError extends CanopyError {
  constructor(message: string) {
    super(message, "internal");
  }
}

/**
 * The error a host import failed with. The generated bindings throw a `ComponentError` whose
 * `payload` is the WIT `types.error` value (`{tag, val}`).
 */
export function fromHost(thrown: unknown): CanopyError {
  const payload = (thrown as { payload?: unknown } | null)?.payload ?? thrown;
  const { tag, val } = (payload ?? {}) as { tag?: unknown; val?: unknown };
  const message = typeof val === "string" ? val : String(thrown);
  switch (tag) {
    case "validation":
      return new ValidationError(message);
    case "forbidden":
      return new ForbiddenError(message);
    case "not-found":
      return new NotFoundError(message);
    case "unprocessable":
      return new UnprocessableError(message);
    default:
      return new InternalError(message);
  }
}
