/** A problem with one field of an object: the path names the field, the message says the fix. */
export interface FieldError {
  /** Dotted path with indices, as kubectl prints it: spec.files[2].permissions */
  path: string;
  message: string;
}

export function fieldError(path: string, message: string): FieldError {
  return { path, message };
}

export function formatFieldError(error: FieldError): string {
  return error.path ? `${error.path}: ${error.message}` : error.message;
}

/** Thrown where a caller wants an exception rather than a list (CLI, renderers' guard). */
export class ValidationError extends Error {
  constructor(readonly errors: FieldError[]) {
    super(errors.map(formatFieldError).join('\n'));
    this.name = 'ValidationError';
  }
}
