/**
 * API-key authentication for the HTTP transport: key format and generation,
 * scrypt storage, the per-request {@link createAuthenticator}, the 401/503
 * response, and tool/project scope checks. The `keys` CLI is `cli.ts`.
 *
 * @module
 */

export {
  API_KEY_PATTERN,
  generateApiKey,
  parseApiKey,
  type ParsedApiKey,
  type PresentedKey,
  presentedKey,
} from "./api_key.ts";
export type { Authenticator, AuthFailure, AuthOutcome } from "./auth_outcome.ts";
export {
  API_KEY_CHALLENGE,
  AUTH_ERROR_CODE,
  authFailureResponse,
  isOAuthProbe,
  noOAuthResponse,
} from "./auth_response.ts";
export { type CreatedKey, createKey, type CreateKeyOptions } from "./create_key.ts";
export {
  type AuthenticatorOptions,
  createAuthenticator,
  type KeyAuthenticator,
} from "./authenticator.ts";
export {
  hashApiKey,
  nodeScrypt,
  SCRYPT_PARAMS,
  type ScryptFunction,
  type StoredHash,
  verifyApiKey,
} from "./key_hash.ts";
export {
  type ApiKeyListing,
  type ApiKeyRecord,
  type ChangeResult,
  deleteKey,
  findActiveKey,
  insertKey,
  type KeyState,
  listKeys,
  type NewApiKey,
  type Permission,
  revokeKey,
  type StoredKey,
} from "./key_store.ts";
