/**
 * Job ids: 128 random bits from the system CSPRNG, base64url, behind a
 * `gen_` prefix a model can recognise. Unguessable, so an id is safe to show
 * in a tool result; ownership is still checked on every read.
 *
 * @module
 */

/** The shape of a job id: `gen_` and 22 base64url characters. */
export const JOB_ID_PATTERN: RegExp = /^gen_[A-Za-z0-9_-]{22}$/;

/** A fresh job id. */
export function newJobId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `gen_${bytes.toBase64({ alphabet: "base64url", omitPadding: true })}`;
}
